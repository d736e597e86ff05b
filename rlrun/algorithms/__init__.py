"""Losses and their training-loop glue from the ``algo`` config group, one module per algorithm
(``ppo``, ``a2c``, ``dqn``, ``c51``, ``sac``, ``discrete_sac``, ``redq``, ``tqc``, ``crossq``,
``ddpg``, ``td3``, and from a dataset ``bc``, ``cql``, ``iql``, ``td3_bc``); the on-policy ones
share ``onpolicy.py``, the off-policy and offline ones ``offpolicy.py``.

``make_algorithm`` returns the TorchRL loss module plus the Trainer hooks that feed it (for PPO:
advantages and minibatches of the collected batch), so ``run.py`` stays a recipe.
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig

from rlrun.algorithms.a2c import make_a2c
from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.bc import make_bc
from rlrun.algorithms.c51 import make_c51
from rlrun.algorithms.cql import make_cql
from rlrun.algorithms.crossq import make_crossq
from rlrun.algorithms.ddpg import make_ddpg
from rlrun.algorithms.discrete_sac import make_discrete_sac
from rlrun.algorithms.dqn import make_dqn
from rlrun.algorithms.iql import make_iql
from rlrun.algorithms.onpolicy import log_prob_error
from rlrun.algorithms.ppo import make_ppo
from rlrun.algorithms.redq import make_redq
from rlrun.algorithms.sac import make_sac
from rlrun.algorithms.td3 import make_td3
from rlrun.algorithms.td3_bc import make_td3_bc
from rlrun.algorithms.tqc import make_tqc
from rlrun.builders.policies import ActorCritic

BUILDERS = {
    "ppo": make_ppo,
    "a2c": make_a2c,
    "dqn": make_dqn,
    "c51": make_c51,
    "sac": make_sac,
    "discrete_sac": make_discrete_sac,
    "redq": make_redq,
    "tqc": make_tqc,
    "crossq": make_crossq,
    "ddpg": make_ddpg,
    "td3": make_td3,
    "bc": make_bc,
    "cql": make_cql,
    "iql": make_iql,
    "td3_bc": make_td3_bc,
}
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
