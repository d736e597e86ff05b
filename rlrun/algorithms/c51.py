"""C51 (``algo=c51``): TorchRL's ``DistributionalDQNLoss`` (Bellemare et al. 2017) on a network
of return distributions (``policy=c51``: atoms and support), epsilon-greedy exploration and
hard or soft target updates, as DQN."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import DISCRETE, Algorithm
from rlrun.config import EpsilonGreedyConfig, PolicyConfig, ranged
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class C51Config(EpsilonGreedyConfig):
    """C51's keys (``conf/algo/c51.yaml``); the return support (atoms, bounds) belongs to the
    network: ``policy=c51``."""


@dataclass
class C51PolicyConfig(PolicyConfig):
    """``policy=c51``: a distribution over ``n_atoms`` returns in [v_min, v_max] per action."""

    n_atoms: int = ranged(2)
    v_min: float = MISSING
    v_max: float = MISSING


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (120, 84),
    activation: str = "relu",
    n_atoms: int = 101,
    v_min: float = -100.0,
    v_max: float = 100.0,
    **_: object,
) -> ActorCritic:
    """C51's network (``policy=c51``): an MLP of ``n_atoms`` logits per action over returns
    evenly spaced in [v_min, v_max], behind TorchRL's ``DistributionalQValueActor`` (greedy on
    the distributions' means, ties broken). Returned as actor and qvalue, as DQN's."""
    import torch
    from torch import nn
    from torchrl.modules import DistributionalQValueActor

    from rlrun.builders.policies import ActorCritic, discrete_actions, mlp
    from rlrun.compat.torchrl import GreedyDistributionalHead

    if v_min >= v_max:
        raise ConfigError(f"policy.v_min={v_min} must be below policy.v_max={v_max}.")
    n_actions = discrete_actions(action_spec, f"{__name__}.networks")
    obs_dim = observation_spec["observation"].shape[-1]
    net = nn.Sequential(
        mlp(obs_dim, n_atoms * n_actions, hidden_sizes, activation),
        nn.Unflatten(-1, (n_atoms, n_actions)),
    )
    actor = DistributionalQValueActor(
        net,
        support=torch.linspace(v_min, v_max, n_atoms),
        in_keys=["observation"],
        spec=action_spec,
    )
    head = actor.module[-1]  # TorchRL's greedy head, swapped for one that breaks ties
    actor.module[-1] = GreedyDistributionalHead(
        action_space=head.action_space,
        support=head.support,
        action_value_key=head.action_value_key,
        out_keys=head.out_keys,
        spec=head.spec,
    )
    return ActorCritic(actor=actor.to(device), qvalue=actor.to(device))


def build(cfg: DictConfig, ctx: Context) -> Training:
    """C51 on ``ac.qvalue``, which must be a ``DistributionalQValueActor`` (its support is the
    loss's); the collector acts epsilon-greedily on the distributions' means."""
    from torchrl.modules import DistributionalQValueActor
    from torchrl.objectives import DistributionalDQNLoss

    from rlrun.builders.offpolicy import epsilon_greedy, hard_or_soft, off_policy

    if not isinstance(ctx.ac.qvalue, DistributionalQValueActor):
        raise ConfigError(
            f"algo={cfg.name} needs a distributional Q-network (a DistributionalQValueActor): "
            f"set policy._target_=null (its own, {__name__}.networks), or return one."
        )
    loss = DistributionalDQNLoss(ctx.ac.qvalue, gamma=cfg.gamma, delay_value=True)
    exploration = epsilon_greedy(cfg, ctx.ac, ctx.device)
    updater = hard_or_soft(cfg, loss)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater, exploration=exploration)


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="Distributional DQN over a fixed support of returns (policy=c51: atoms, bounds)",
    schema=C51Config,
    actions=(DISCRETE,),
    policy_schemas={"c51": C51PolicyConfig},
)
