"""VDN (``algo=vdn``): the team's value is the sum of its agents' Q-values, each from the
agent's own observation (Sunehag et al. 2017; TorchRL's ``VDNMixer`` and ``QMixerLoss``).
Discrete actions (``env.kwargs.continuous_actions=false`` for VMAS);
``rlrun/builders/team_training.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import DISCRETE, Algorithm
from rlrun.config import MixedValueConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def build(cfg: DictConfig, ctx: Context) -> Training:
    from torchrl.modules import VDNMixer

    from rlrun.builders.multiagent import agents_and_width
    from rlrun.builders.team_training import mixed_value_training

    def mixer(group: str) -> tuple[VDNMixer, list]:
        n_agents, _ = agents_and_width(ctx.observation_spec, group)
        return VDNMixer(n_agents, device=ctx.device), [(group, "chosen_action_value")]

    return mixed_value_training(cfg, ctx, mixer)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.multiagent.make_team_qvalue_actor",
    summary="VDN: the team's value as the sum of its agents' Q-values",
    schema=MixedValueConfig,
    actions=(DISCRETE,),
    multi_agent=True,
    groups=True,
)
