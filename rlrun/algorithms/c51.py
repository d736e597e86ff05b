"""C51 (``algo=c51``): TorchRL's ``DistributionalDQNLoss`` (Bellemare et al. 2017) on a network
of return distributions (``policy=c51``: atoms and support), epsilon-greedy exploration and
hard or soft target updates, as DQN."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.modules import DistributionalQValueActor
from torchrl.objectives import DistributionalDQNLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import epsilon_greedy, hard_or_soft, off_policy
from rlrun.builders.policies import ActorCritic
from rlrun.errors import ConfigError


def make_c51(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """C51 on ``ac.qvalue``, which must be a ``DistributionalQValueActor`` (its support is the
    loss's); the collector acts epsilon-greedily on the distributions' means."""
    if not isinstance(ac.qvalue, DistributionalQValueActor):
        raise ConfigError(
            "algo=c51 needs a distributional Q-network: use policy=c51 "
            "(policy._target_=rlrun.builders.policies.make_c51_actor), or start from +experiment=c51."
        )
    loss = DistributionalDQNLoss(ac.qvalue, gamma=cfg.gamma, delay_value=True)
    exploration = epsilon_greedy(cfg, ac, device)
    updater = hard_or_soft(cfg, loss)
    return off_policy(cfg, loss, frames_per_batch, updater=updater, exploration=exploration)
