"""DDPG (``algo=ddpg``): TorchRL's ``DDPGLoss`` (one Q network, target actor and critic), a
deterministic actor tanh-scaled to the action bounds and Gaussian exploration noise while
collecting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import GaussianNoiseConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class DDPGConfig(GaussianNoiseConfig):
    """DDPG's keys (``conf/algo/ddpg.yaml``)."""


def build(cfg: DictConfig, ctx: Context) -> Training:
    """DDPG on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; both have targets,
    soft-updated with ``algo.tau`` after every step."""
    from torchrl.objectives import DDPGLoss

    from rlrun.builders.offpolicy import gaussian_noise, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = DDPGLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        loss_function=cfg.loss_function,
        delay_actor=True,
        delay_value=True,
    )
    exploration = gaussian_noise(cfg, ctx.ac, ctx.device)
    return off_policy(cfg, loss, ctx.frames_per_batch, exploration=exploration)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_deterministic_actor_q",
    summary="Deep deterministic policy gradient, Gaussian exploration noise",
    schema=DDPGConfig,
    actions=(BOX,),
)
