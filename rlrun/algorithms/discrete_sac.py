"""Discrete SAC (``algo=discrete_sac``; Christodoulou 2019): TorchRL's ``DiscreteSACLoss``, a
categorical actor, twin Q networks with one value per action, a learned temperature whose
target entropy is ``algo.target_entropy_weight`` times the uniform policy's, soft target
updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import DISCRETE, Algorithm
from rlrun.config import MaxEntropyConfig, RegressionLoss, TargetNetConfig, ranged

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class DiscreteSACConfig(TargetNetConfig, MaxEntropyConfig):
    """Discrete SAC's keys (``conf/algo/discrete_sac.yaml``)."""

    loss_function: RegressionLoss = MISSING
    target_entropy_weight: float = ranged(0, 1, low_open=True)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """Discrete SAC on ``ac.actor`` (samples its actions: explores by itself) and
    ``ac.qvalue`` (``action_value`` per action)."""
    from torchrl.objectives import DiscreteSACLoss

    from rlrun.builders.offpolicy import off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    spec = ctx.ac.actor.spec["action"]
    loss = DiscreteSACLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        action_space=spec,
        num_actions=int(spec.space.n),
        num_qvalue_nets=cfg.num_qvalue_nets,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha_init,
        target_entropy_weight=cfg.target_entropy_weight,
        delay_qvalue=True,
    )
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_categorical_actor_q",
    summary="Soft actor-critic for discrete actions: categorical actor, Q(s, .) per action",
    schema=DiscreteSACConfig,
    actions=(DISCRETE,),
)
