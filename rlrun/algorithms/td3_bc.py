"""TD3+BC (``algo=td3_bc``; Fujimoto & Gu 2021): TorchRL's ``TD3BCLoss``, TD3's twin Q and
target policy smoothing with the actor's objective -lambda Q(s, pi(s)) + (pi(s) - a)^2, lambda =
``algo.alpha`` / mean |Q|; actor and soft target updates every ``algo.policy_delay`` critic
steps, as TD3's. On TD3's networks (``make_td3_networks``)."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import TD3BCLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.algorithms.td3 import DelayedActor, DelayedSoftUpdate
from rlrun.builders.policies import ActorCritic


class DelayedTD3BCLoss(DelayedActor, TD3BCLoss):
    """TorchRL's ``TD3BCLoss``, its actor delayed as the paper's (:class:`DelayedActor`)."""


def make_td3_bc(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """TD3+BC on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; the targets follow
    the actor."""
    require_qvalue(ac, "td3_bc", "make_td3_networks", "td3_bc")
    loss = DelayedTD3BCLoss(
        ac.actor,
        ac.qvalue,
        action_spec=ac.actor.spec["action"],
        num_qvalue_nets=cfg.num_qvalue_nets,
        policy_noise=cfg.policy_noise,
        noise_clip=cfg.noise_clip,
        alpha=cfg.alpha,
        loss_function=cfg.loss_function,
        policy_delay=cfg.policy_delay,
    )
    updater = DelayedSoftUpdate(loss, tau=cfg.tau)
    return off_policy(cfg, loss, frames_per_batch, updater=updater)
