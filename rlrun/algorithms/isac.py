"""ISAC (``algo=isac``): soft actor-critic for a team of agents with twin Q-networks per agent
that see only that agent's observation and action (TorchRL's ``SACLoss`` over the agents' keys;
``rlrun/builders/team_training.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import SoftActorCriticConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def build(cfg: DictConfig, ctx: Context) -> Training:
    from rlrun.builders.team_training import soft_team_training

    return soft_team_training(cfg, ctx)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.multiagent.make_team_actor_q",
    summary="Independent SAC for a team: each agent's actor and twin Q on its own view",
    schema=SoftActorCriticConfig,
    actions=(BOX,),
    multi_agent=True,
    groups=True,
)
