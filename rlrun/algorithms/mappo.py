"""MAPPO (``algo=mappo``): clipped PPO for a team of agents, each acting on its own observation,
with a critic that sees the whole team's (Yu et al. 2022; TorchRL's ``MAPPOLoss``).

PPO's data flow for a team (``rlrun/builders/team_training.py``): advantages per agent over each
fresh batch, then minibatches of it. ``algo=ippo`` differs in its critic only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data
from rlrun.algorithms.minibatches import check_minibatches
from rlrun.config import ClipPPOConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def build(cfg: DictConfig, ctx: Context) -> Training:
    from rlrun.builders.team_training import clipped_team_training

    return clipped_team_training(cfg, ctx)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.multiagent.make_centralised_critic",
    summary="Multi-agent PPO: decentralised actors, a centralised critic (env=vmas)",
    schema=ClipPPOConfig,
    data=Data.ON_POLICY,
    multi_agent=True,
    groups=True,
    check=check_minibatches,
)
