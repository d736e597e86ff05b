"""A2C (``algo=a2c``): TorchRL's ``A2CLoss``, one optimisation step on each whole fresh batch with
GAE advantages (``algo.gae_lambda=1``: plain n-step returns, as Stable-Baselines3's A2C)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import Algorithm, Data
from rlrun.config import OnPolicyConfig, RegressionLoss

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class A2CConfig(OnPolicyConfig):
    """A2C's keys (``conf/algo/a2c.yaml``)."""

    loss_critic_type: RegressionLoss = MISSING


def build(cfg: DictConfig, ctx: Context) -> Training:
    """A2C on the actor and critic of ``ac``: the batch is the minibatch, used once. A2C has no
    importance ratio, so a stale batch (async collector) is not checked, only learned from."""
    from torchrl.objectives import A2CLoss

    from rlrun.builders.onpolicy import on_policy, require_critic

    require_critic(ctx.ac, cfg.name)
    loss = A2CLoss(
        ctx.ac.actor,
        ctx.ac.critic,
        entropy_bonus=cfg.entropy_coef > 0,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        loss_critic_type=cfg.loss_critic_type,
    )
    return on_policy(cfg, loss, ctx, minibatch_size=ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_actor_critic",
    summary="Advantage actor-critic: one step on each whole fresh batch",
    schema=A2CConfig,
    data=Data.ON_POLICY,
)
