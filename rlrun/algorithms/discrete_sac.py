"""Discrete SAC (``algo=discrete_sac``; Christodoulou 2019): TorchRL's ``DiscreteSACLoss``, a
categorical actor, twin Q networks with one value per action, a learned temperature whose
target entropy is ``algo.target_entropy_weight`` times the uniform policy's, soft target
updates."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import DiscreteSACLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic


def make_discrete_sac(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """Discrete SAC on ``ac.actor`` (samples its actions: explores by itself) and
    ``ac.qvalue`` (``action_value`` per action)."""
    require_qvalue(ac, "discrete_sac", "make_discrete_sac_networks", "discrete_sac")
    spec = ac.actor.spec["action"]
    loss = DiscreteSACLoss(
        ac.actor,
        ac.qvalue,
        action_space=spec,
        num_actions=int(spec.space.n),
        num_qvalue_nets=cfg.num_qvalue_nets,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha_init,
        target_entropy_weight=cfg.target_entropy_weight,
        delay_qvalue=True,
    )
    return off_policy(cfg, loss, frames_per_batch)
