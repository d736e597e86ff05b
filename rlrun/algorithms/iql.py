"""IQL (``algo=iql``; Kostrikov et al. 2021): implicit Q-learning, continuous or discrete by the
env's action space. TorchRL's ``IQLLoss`` or ``DiscreteIQLLoss``: V(s) fitted by expectile
regression (``algo.expectile``) to Q(s, a) of dataset actions only, Q to r + gamma V(s'), the
actor by advantage-weighted regression (``algo.temperature``); soft target updates of Q. Its
networks add V(s) to a TanhNormal actor and Q(s, a), or a categorical actor and Q(s, .)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import Algorithm, Data
from rlrun.config import POSITIVE, RegressionLoss, TargetNetConfig, ranged
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class IQLConfig(TargetNetConfig):
    """IQL's keys (``conf/algo/iql.yaml``), continuous or discrete by the action space."""

    expectile: float = ranged(0, 1, low_open=True, high_open=True)
    temperature: float = ranged(**POSITIVE)
    num_qvalue_nets: int = ranged(1)
    loss_function: RegressionLoss = MISSING


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    state_dependent_std: bool = True,
    **_: object,
) -> ActorCritic:
    """IQL's networks: a TanhNormal actor and Q(s, a) (continuous actions) or a categorical
    actor and Q(s, .) (discrete ones), plus a state-value network V(s) as ``critic`` (the loss
    makes the twin Q copies)."""
    from tensordict.nn import TensorDictModule

    from rlrun.builders.policies import make_categorical_actor_q, make_stochastic_actor_q, mlp

    discrete = action_spec.domain == "discrete"
    make = make_categorical_actor_q if discrete else make_stochastic_actor_q
    ac = make(
        observation_spec=observation_spec,
        action_spec=action_spec,
        device=device,
        hidden_sizes=hidden_sizes,
        activation=activation,
        state_dependent_std=state_dependent_std,
    )
    obs_dim = observation_spec["observation"].shape[-1]
    value = mlp(obs_dim, 1, hidden_sizes, activation)
    ac.critic = TensorDictModule(value, ["observation"], ["state_value"]).to(device)
    return ac


def build(cfg: DictConfig, ctx: Context) -> Training:
    """IQL on ``ac.actor``, ``ac.qvalue`` and ``ac.critic`` (V(s))."""
    from torchrl.objectives import DiscreteIQLLoss, IQLLoss

    from rlrun.builders.offpolicy import off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    if ctx.ac.critic is None:
        raise ConfigError(
            f"algo={cfg.name} needs a state-value network too (ActorCritic.critic): set "
            f"policy._target_=null (its own, {__name__}.networks), or return one."
        )
    spec = ctx.ac.actor.spec["action"]
    common = {
        "num_qvalue_nets": cfg.num_qvalue_nets,
        "loss_function": cfg.loss_function,
        "temperature": cfg.temperature,
        "expectile": cfg.expectile,
    }
    if spec.domain == "discrete":
        loss = DiscreteIQLLoss(
            ctx.ac.actor, ctx.ac.qvalue, ctx.ac.critic, action_space=spec, **common
        )
        loss.set_keys(state_action_value="action_value")  # Q(s, .) of the categorical networks
    else:
        loss = IQLLoss(ctx.ac.actor, ctx.ac.qvalue, ctx.ac.critic, **common)
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="Implicit Q-learning from a dataset (offline), continuous or discrete actions",
    schema=IQLConfig,
    data=Data.OFFLINE,
)
