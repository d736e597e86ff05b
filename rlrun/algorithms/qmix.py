"""QMIX (``algo=qmix``): each agent's Q-values from its own observation, mixed by a network
that reads the whole team's observations into the team's value, monotone in each agent's
(Rashid et al. 2018; TorchRL's ``QMixer`` and ``QMixerLoss``). Discrete actions
(``env.kwargs.continuous_actions=false`` for VMAS); ``rlrun/builders/team_training.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import DISCRETE, Algorithm
from rlrun.config import MixedValueConfig, ranged

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class QMixConfig(MixedValueConfig):
    """QMIX's keys (``conf/algo/qmix.yaml``)."""

    mixing_embed_dim: int = ranged(1)


def build(cfg: DictConfig, ctx: Context) -> Training:
    from torchrl.modules import QMixer

    from rlrun.builders.multiagent import agents_and_width
    from rlrun.builders.team_training import mixed_value_training

    def mixer(group: str) -> tuple[QMixer, list]:  # the state: every agent's of the group
        n_agents, width = agents_and_width(ctx.observation_spec, group)
        net = QMixer((n_agents, width), cfg.mixing_embed_dim, n_agents, device=ctx.device)
        return net, [(group, "chosen_action_value"), (group, "observation")]

    return mixed_value_training(cfg, ctx, mixer)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.multiagent.make_team_qvalue_actor",
    summary="QMIX: agents' Q-values mixed monotonically by a network of the team's state",
    schema=QMixConfig,
    actions=(DISCRETE,),
    multi_agent=True,
    groups=True,
)
