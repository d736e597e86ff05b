"""SAC (``algo=sac``): TorchRL's ``SACLoss``, a TanhNormal actor, twin Q, a learned entropy
temperature (target entropy -|A|) and soft target updates."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import SACLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.policies import ActorCritic


def make_sac(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """SAC on ``ac.actor`` (stochastic, explores by sampling) and ``ac.qvalue``."""
    require_qvalue(ac, "sac", "make_sac_networks", "sac")
    loss = SACLoss(
        ac.actor,
        ac.qvalue,
        num_qvalue_nets=cfg.num_qvalue_nets,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha_init,
        target_entropy=target_entropy(ac),
        delay_qvalue=True,
    )
    return off_policy(cfg, loss, frames_per_batch)


def target_entropy(ac: ActorCritic) -> float:
    """SAC's target entropy -|A| (and its kin's: REDQ, TQC, CrossQ), from the action spec's
    last dim only: the spec carries the env batch dims too."""
    return -float(ac.actor.spec["action"].shape[-1])
