"""Losses and their training-loop glue from the ``algo`` config group, one module per algorithm
(``ppo``, ``dqn``, ``sac``, ``td3``); the off-policy ones share ``offpolicy.py``.

``make_algorithm`` returns the TorchRL loss module plus the Trainer hooks that feed it (for PPO:
advantages and minibatches of the collected batch), so ``run.py`` stays a recipe.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.dqn import make_dqn
from rlrun.algorithms.ppo import log_prob_error, make_ppo
from rlrun.algorithms.sac import make_sac
from rlrun.algorithms.td3 import make_td3
from rlrun.policies import ActorCritic

BUILDERS = {"ppo": make_ppo, "dqn": make_dqn, "sac": make_sac, "td3": make_td3}
__all__ = ["Algorithm", "BUILDERS", "log_prob_error", "make_algorithm"]


def make_algorithm(
    cfg: DictConfig,
    ac: ActorCritic,
    frames_per_batch: int,
    device: torch.device,
    fresh_batches: bool = True,
) -> Algorithm:
    """Build the loss and its hooks for ``algo.name`` on the learner's ``device`` (where ``ac``
    lives). ``fresh_batches``: every batch is collected with the weights of the previous update
    (false for an async collector)."""
    return BUILDERS[cfg.name](cfg, ac, frames_per_batch, device, fresh_batches)
