"""MASAC (``algo=masac``): soft actor-critic for a team of agents, each with a TanhNormal actor
on its own observation, twin Q-networks per agent that see the whole team's observations and
actions, and one learned entropy temperature (TorchRL's ``SACLoss`` over the agents' keys, as in
its multi-agent recipe and BenchMARL). Continuous actions. ``algo=isac`` differs in its critic
only (``rlrun/builders/team_training.py``)."""

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
    networks="rlrun.builders.multiagent.make_team_stochastic_actor_centralised_q",
    summary="Multi-agent SAC: TanhNormal actors, twin Q-networks on the whole team (env=vmas)",
    schema=SoftActorCriticConfig,
    actions=(BOX,),
    multi_agent=True,
    groups=True,
)
