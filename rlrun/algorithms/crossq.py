"""CrossQ (``algo=crossq``; Bhatt et al. 2024): TorchRL's ``CrossQLoss``, SAC without target
networks whose critics (``policy=crossq``: batch renormalisation) see the current and the next
state-action pairs in one joint batch, so their normalisation statistics cover both; the actor and
the temperature learn every ``algo.policy_delay`` critic steps, as in the paper's code."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import CrossQLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.algorithms.sac import max_entropy
from rlrun.algorithms.td3 import DelayedActor
from rlrun.builders.policies import ActorCritic


class DelayedCrossQLoss(DelayedActor, CrossQLoss):
    """TorchRL's ``CrossQLoss``, its actor and temperature delayed (:class:`DelayedActor`)."""

    delayed = ("loss_actor", "loss_alpha")


def make_crossq(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """CrossQ on ``ac.actor`` (TanhNormal) and ``ac.qvalue``; nothing to update but the
    networks themselves."""
    require_qvalue(ac, "crossq", "make_crossq_networks", "crossq")
    loss = DelayedCrossQLoss(
        ac.actor,
        ac.qvalue,
        loss_function=cfg.loss_function,
        policy_delay=cfg.policy_delay,
        **max_entropy(cfg, ac),
    )
    return off_policy(cfg, loss, frames_per_batch, target_networks=False)
