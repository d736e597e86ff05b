"""DQN (``algo=dqn``): TorchRL's ``DQNLoss`` (double DQN by default), epsilon-greedy exploration
annealed over frames, hard or soft target updates."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.modules import EGreedyModule
from torchrl.objectives import DQNLoss, HardUpdate

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import AnnealExploration, SoftUpdate, off_policy, require_qvalue
from rlrun.policies import ActorCritic


def make_dqn(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """DQN on ``ac.qvalue``; the collector acts epsilon-greedily."""
    require_qvalue(ac, "dqn", "make_qvalue_actor", "dqn")
    loss = DQNLoss(
        ac.qvalue, loss_function=cfg.loss_function, delay_value=True, double_dqn=cfg.double_dqn
    )
    epsilon = EGreedyModule(
        ac.actor.spec["action"],
        eps_init=float(cfg.eps_start),
        eps_end=float(cfg.eps_end),
        annealing_num_steps=cfg.eps_anneal_frames,
        device=device,
    )
    if cfg.target_update == "hard":
        updater = HardUpdate(loss, value_network_update_interval=cfg.target_update_period)
    else:
        updater = SoftUpdate(loss, tau=cfg.tau)
    exploration = AnnealExploration(epsilon, "eps", "epsilon")
    return off_policy(cfg, loss, frames_per_batch, updater=updater, exploration=exploration)
