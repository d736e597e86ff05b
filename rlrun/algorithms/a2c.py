"""A2C (``algo=a2c``): TorchRL's ``A2CLoss``, one optimisation step on each whole fresh batch with
GAE advantages (``algo.gae_lambda=1``: plain n-step returns, as Stable-Baselines3's A2C)."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import A2CLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.onpolicy import OnPolicyBatches, make_gae, require_critic
from rlrun.builders.policies import ActorCritic


def make_a2c(
    cfg: DictConfig,
    ac: ActorCritic,
    frames_per_batch: int,
    device: torch.device,
    fresh_batches: bool,
) -> Algorithm:
    """A2C on the actor and critic of ``ac``: the batch is the minibatch, used once. A2C has no
    importance ratio, so a stale batch (async collector) is not checked, only learned from."""
    require_critic(ac, "a2c")
    loss = A2CLoss(
        ac.actor,
        ac.critic,
        entropy_bonus=cfg.entropy_coef > 0,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        loss_critic_type=cfg.loss_critic_type,
    )
    advantage = make_gae(cfg, ac, loss)
    hook = OnPolicyBatches(
        advantage,
        loss,
        ac,
        minibatch_size=frames_per_batch,
        frames_per_batch=frames_per_batch,
        sequence_length=None,
        logprob_check_tol=None,
        device=device,
        fresh_batches=fresh_batches,
    )
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=1,
        max_grad_norm=cfg.max_grad_norm,
        hooks=[hook],
        advantage=advantage,
    )
