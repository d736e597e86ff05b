"""SAC (``algo=sac``): TorchRL's ``SACLoss``, a TanhNormal actor, twin Q, a learned entropy
temperature (target entropy -|A|) and soft target updates."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from torchrl.objectives import SACLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic


def make_sac(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """SAC on ``ac.actor`` (stochastic, explores by sampling) and ``ac.qvalue``."""
    require_qvalue(ac, "sac", "make_sac_networks", "sac")
    loss = SACLoss(
        ac.actor,
        ac.qvalue,
        loss_function=cfg.loss_function,
        delay_qvalue=True,
        **max_entropy(cfg, ac),
    )
    return off_policy(cfg, loss, frames_per_batch)


def max_entropy(cfg: DictConfig, ac: ActorCritic) -> dict[str, Any]:
    """What SAC's loss shares with its continuous kin (REDQ, TQC, CrossQ): the number of
    critics, the initial temperature and the target entropy -|A|, from the action spec's last
    dim only (the spec carries the env batch dims too)."""
    return {
        "num_qvalue_nets": cfg.num_qvalue_nets,
        "alpha_init": cfg.alpha_init,
        "target_entropy": -float(ac.actor.spec["action"].shape[-1]),
    }
