"""MADDPG (``algo=maddpg``): DDPG for a team of agents, each acting deterministically on its own
observation, with a Q-network per agent that sees the whole team's observations and actions
(Lowe et al. 2017; TorchRL's ``DDPGLoss`` over the agents' keys). Continuous actions; each
agent explores with Gaussian noise. ``algo=iddpg`` differs in its critic only
(``rlrun/builders/team_training.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import GaussianNoiseConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def build(cfg: DictConfig, ctx: Context) -> Training:
    from rlrun.builders.team_training import deterministic_team_training

    return deterministic_team_training(cfg, ctx)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.multiagent.make_team_deterministic_actor_centralised_q",
    summary="Multi-agent DDPG: deterministic actors, Q-networks on the whole team (env=vmas)",
    schema=GaussianNoiseConfig,
    actions=(BOX,),
    multi_agent=True,
    groups=True,
)
