"""A policy that cannot be copied, and the factory that hands it to rlrun.

``LockedMLP`` serves its network under a ``threading.Lock``, the way a model bound to one
accelerator queue or holding a native handle must be used: one object, never duplicated.
``copy.deepcopy`` and ``pickle`` both fail on it ("cannot pickle '_thread.lock' object").
Its class says so with ``rlrun_copyable = False``, so rlrun uses it in place everywhere
(collector and loss) without probing and without a warning.

Use it (from the repository root):
    PYTHONPATH=examples rlrun +experiment=ppo policy=locked --config-dir examples/my_conf
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import torch
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor

from rlrun.builders.policies import ActorCritic


class LockedMLP(nn.Module):
    """An MLP whose forward runs under a lock held by this one object."""

    rlrun_copyable = False  # rlrun: never deep-copy or pickle this module; use it in place

    def __init__(self, in_features: int, out_features: int, hidden_sizes: Sequence[int]) -> None:
        super().__init__()
        self.net = MLP(in_features=in_features, out_features=out_features, num_cells=hidden_sizes)
        self.lock = threading.Lock()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with self.lock:
            return self.net(x)


def build_policy(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device,
    hidden_sizes: Sequence[int] = (64, 64),
    **_: object,
) -> ActorCritic:
    """The policy-factory contract: specs, device and this YAML file's keys in, ActorCritic out."""
    make_net = functools.partial(LockedMLP, hidden_sizes=list(hidden_sizes))
    return actor_critic(observation_spec, action_spec, device, make_net)


def actor_critic(
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device,
    make_net: Callable[[int, int], nn.Module],
) -> ActorCritic:
    """A categorical actor and a critic, each a ``make_net(in_features, out_features)``.

    Discrete (one-hot) actions, as in CartPole.
    """
    if not isinstance(action_spec, OneHot):
        raise TypeError(f"my_lab.policies needs one-hot actions, got {type(action_spec).__name__}")
    n_obs, n_act = observation_spec["observation"].shape[-1], action_spec.shape[-1]
    actor = ProbabilisticActor(
        TensorDictModule(make_net(n_obs, n_act), ["observation"], ["logits"]),
        in_keys=["logits"],
        spec=action_spec,
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    ).to(device)
    critic = TensorDictModule(make_net(n_obs, 1), ["observation"], ["state_value"]).to(device)
    return ActorCritic(actor=actor, critic=critic)
