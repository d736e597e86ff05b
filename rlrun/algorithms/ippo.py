"""IPPO (``algo=ippo``): clipped PPO for a team of agents with a critic per agent that sees only
that agent's observation (de Witt et al. 2020), the independent learner MAPPO is compared
against (``rlrun/builders/team_training.py``)."""

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
    networks="rlrun.builders.multiagent.make_team_actor_critic",
    summary="Independent PPO for a team: each agent's actor and critic on its own observation",
    schema=ClipPPOConfig,
    data=Data.ON_POLICY,
    multi_agent=True,
    groups=True,
    check=check_minibatches,
)
