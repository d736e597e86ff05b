"""IDDPG (``algo=iddpg``): DDPG for a team of agents with a Q-network per agent that sees only
that agent's observation and action, the independent learner MADDPG is compared against
(TorchRL's ``DDPGLoss`` over the agents' keys; ``rlrun/builders/team_training.py``)."""

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
    networks="rlrun.builders.multiagent.make_team_deterministic_actor_q",
    summary="Independent DDPG for a team: each agent's actor and Q-network on its own view",
    schema=GaussianNoiseConfig,
    actions=(BOX,),
    multi_agent=True,
    groups=True,
)
