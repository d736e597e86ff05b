"""DQN (``algo=dqn``): TorchRL's ``DQNLoss`` (double DQN by default), epsilon-greedy exploration
annealed over frames, hard or soft target updates."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import DQNLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import epsilon_greedy, hard_or_soft, off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic


def make_dqn(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """DQN on ``ac.qvalue``; the collector acts epsilon-greedily."""
    require_qvalue(ac, "dqn", "make_qvalue_actor", "dqn")
    loss = DQNLoss(
        ac.qvalue, loss_function=cfg.loss_function, delay_value=True, double_dqn=cfg.double_dqn
    )
    exploration = epsilon_greedy(cfg, ac, device)
    updater = hard_or_soft(cfg, loss)
    return off_policy(cfg, loss, frames_per_batch, updater=updater, exploration=exploration)
