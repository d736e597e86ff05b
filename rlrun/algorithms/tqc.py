"""TQC (``algo=tqc``; Kuznetsov et al. 2020): TorchRL's ``TQCLoss``, SAC whose critics predict
return quantiles (``policy=tqc``: ``n_quantiles``); the target pools every critic's quantiles
and drops the ``algo.top_quantiles_to_drop_per_net`` largest per critic, which curbs
overestimation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import MaxEntropyConfig, PolicyConfig, TargetNetConfig, ranged

if TYPE_CHECKING:
    import torch
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class TQCConfig(TargetNetConfig, MaxEntropyConfig):
    """TQC's keys (``conf/algo/tqc.yaml``); its quantiles: ``policy.n_quantiles``."""

    top_quantiles_to_drop_per_net: int = ranged(0)


@dataclass
class TQCPolicyConfig(PolicyConfig):
    """``policy=tqc``: critics that predict ``n_quantiles`` return quantiles."""

    n_quantiles: int = ranged(1)


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    state_dependent_std: bool = True,
    n_quantiles: int = 25,
    **_: object,
) -> ActorCritic:
    """TQC's networks (``policy=tqc``): a TanhNormal actor and a critic that predicts
    ``n_quantiles`` quantiles of Q(s, a) (the loss makes the copies)."""
    from rlrun.builders.policies import ActorCritic, qvalue_network, tanh_normal_actor

    actor = tanh_normal_actor(
        observation_spec, action_spec, hidden_sizes, activation, state_dependent_std
    )
    qvalue = qvalue_network(observation_spec, action_spec, hidden_sizes, activation, n_quantiles)
    return ActorCritic(actor=actor.to(device), qvalue=qvalue.to(device))


def build(cfg: DictConfig, ctx: Context) -> Training:
    """TQC on ``ac.actor`` (TanhNormal) and ``ac.qvalue`` (quantiles of Q(s, a))."""
    from torchrl.objectives import TQCLoss

    from rlrun.builders.offpolicy import max_entropy, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = TQCLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        top_quantiles_to_drop_per_net=cfg.top_quantiles_to_drop_per_net,
        **max_entropy(cfg, ctx.ac),
        delay_qvalue=True,
    )
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="Truncated quantile critics: SAC with distributional critics (policy=tqc)",
    schema=TQCConfig,
    actions=(BOX,),
    policy_schemas={"tqc": TQCPolicyConfig},
)
