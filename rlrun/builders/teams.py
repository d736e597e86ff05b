"""A team of agents as one env: the group every rlrun multi-agent env puts its agents in
(``agents``), and the team's reward, step count and returns beside the agents' own.

Beside each agent's reward the env writes the team's, ``reward``: the agents' mean, so that the
team return (``episode_reward``) is the mean of the agents' returns, the figure BenchMARL logs as
``episode_reward_mean``. Episode statistics, evaluation and reports read it as they read a
single agent's return; the losses train on the agents' own rewards.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, RewardSum, StepCounter, Transform

AGENTS = "agents"  # the one group every rlrun multi-agent env puts its agents in


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
    """The team's reward, step count and return (``episode_reward``), and each group's
    per-agent returns (``("agents", "episode_reward")``)."""
    rewards = list(env.reward_keys)
    return [TeamReward(rewards), StepCounter(), RewardSum(in_keys=["reward", *rewards])]
