"""DDPG (``algo=ddpg``): TorchRL's ``DDPGLoss`` (one Q network, target actor and critic), the
deterministic actor of TD3's factory and Gaussian exploration noise while collecting."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import DDPGLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import gaussian_noise, off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic


def make_ddpg(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """DDPG on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; both have targets,
    soft-updated with ``algo.tau`` after every step."""
    require_qvalue(ac, "ddpg", "make_td3_networks", "ddpg")
    loss = DDPGLoss(
        ac.actor,
        ac.qvalue,
        loss_function=cfg.loss_function,
        delay_actor=True,
        delay_value=True,
    )
    exploration = gaussian_noise(cfg, ac, device)
    return off_policy(cfg, loss, frames_per_batch, exploration=exploration)
