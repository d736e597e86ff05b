"""A team of agents as one env: its groups of agents (``env.group_map``: by default one,
``agents``), and the team's reward, step count and returns beside the agents' own.

Beside each agent's reward the env writes the team's, ``reward``: the agents' mean, so that the
team return (``episode_reward``) is the mean of the agents' returns, the figure BenchMARL logs as
``episode_reward_mean``. Episode statistics, evaluation and reports read it as they read a
single agent's return; the losses train on the agents' own rewards.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey
from torchrl.data import Composite, TensorSpec, Unbounded
from torchrl.envs import EnvBase, RewardSum, StepCounter, Transform

from rlrun.builders.action_masks import MASK_KEY, ResetOnlyWhatResets

AGENTS = "agents"  # the group of env.group_map=all_in_one (the default): every agent in one
GROUP_MAPS = {"all_in_one": "ALL_IN_ONE_GROUP", "one_per_agent": "ONE_GROUP_PER_AGENT"}


def group_map(name: str) -> Any:
    """TorchRL's group map for ``env.group_map``: ``by_type`` is the env library's own default
    (TorchRL groups agents by their name's prefix: ``speaker_0`` into ``speaker``)."""
    from torchrl.envs.utils import MarlGroupMapType

    return getattr(MarlGroupMapType, GROUP_MAPS[name]) if name in GROUP_MAPS else None


def groups(observation_spec: Composite) -> list[str]:
    """The team's groups, in the env's order: the entries that hold their agents' observations."""
    return [
        key
        for key, spec in observation_spec.items()
        if isinstance(spec, Composite) and "observation" in spec.keys()
    ]


def group_actions(action_spec: TensorSpec, group: str) -> TensorSpec:
    """``group``'s action spec: the env's action spec is the group's where the team is one
    group, every group's (a ``Composite``) where it is several (``rlrun/builders/envs.py``)."""
    return action_spec[group, "action"] if isinstance(action_spec, Composite) else action_spec


def group_returns(after: TensorDictBase, done: torch.Tensor) -> dict[str, float]:
    """Each group's return (the mean over its agents) in the episodes that ended where ``done``
    (``[*batch]``), from the ``next`` entries ``after``; empty for a one-agent env."""
    out = {}
    for group, entry in after.items():
        if is_tensor_collection(entry) and "episode_reward" in entry.keys():
            per_agent = entry.get("episode_reward").mean(-2).squeeze(-1)
            out[group] = per_agent[done].float().mean().item()
    return out


class TeamReward(Transform):
    """``reward``: the mean over agents (and over groups) of the groups' rewards ``in_keys``
    (each ``[*batch, n_agents, 1]``), the team's reward ``[*batch, 1]``."""

    def __init__(self, group_rewards: Sequence[NestedKey]) -> None:
        super().__init__(in_keys=list(group_rewards), out_keys=["reward"])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        per_group = [next_tensordict.get(key).mean(-2) for key in self.in_keys]
        next_tensordict.set("reward", torch.stack(per_group).mean(0))
        return next_tensordict

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        group = reward_spec[self.in_keys[0]]
        shape = (*reward_spec.shape, 1)
        reward_spec["reward"] = Unbounded(shape=shape, dtype=group.dtype, device=group.device)
        return reward_spec


def team_transforms(env: EnvBase) -> list[Transform]:
    """The team's reward, step count and return (``episode_reward``), each group's per-agent
    returns (``("agents", "episode_reward")``), and, for a group whose observations carry an
    ``action_mask`` (a turn-based game's: ``rlrun/builders/turns.py``), its mask on its action
    spec: random actions (an off-policy run's first frames) stay legal in every env of the
    batch."""
    rewards = list(env.reward_keys)
    masks = [
        ResetOnlyWhatResets(action_key=(group, "action"), mask_key=(group, MASK_KEY))
        for group in groups(env.observation_spec)
        if MASK_KEY in env.observation_spec[group].keys()
    ]
    return [*masks, TeamReward(rewards), StepCounter(), RewardSum(in_keys=["reward", *rewards])]
