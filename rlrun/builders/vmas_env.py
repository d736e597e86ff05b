"""``env.backend=vmas``: a VMAS multi-agent scenario through TorchRL's ``VmasEnv``.

All ``env.num_envs`` envs are one batched torch simulation (VMAS steps them together, on the
CPU like every rlrun env: ``rlrun/builders/devices.py``). The agents form one group, ``agents``
(TorchRL's ``MarlGroupMapType.ALL_IN_ONE_GROUP``): their keys are ``("agents", "observation")``,
``("agents", "action")`` and ``("agents", "reward")`` of shape ``[num_envs, n_agents, ...]``;
``done`` is the team's, ``[num_envs, 1]``.

Beside each agent's reward the env writes the team's, ``reward``: the agents' mean, so that the
team return (``episode_reward``) is the mean of the agents' returns, the figure BenchMARL logs as
``episode_reward_mean``. Episode statistics, evaluation and reports read it as they read a
single agent's return; the losses train on the agents' own rewards.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, RewardSum, StepCounter, Transform
from torchrl.envs.utils import MarlGroupMapType

from rlrun.builders.env_ids import check_vmas_scenario

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


def make_vmas_env(cfg: DictConfig, num_envs: int) -> EnvBase:
    """VMAS scenario ``env.id`` with ``num_envs`` envs, episodes cut at ``env.max_episode_steps``
    (null: the scenario's own end), ``env.kwargs`` to ``VmasEnv`` (``continuous_actions`` and
    the scenario's keys, e.g. ``n_agents``)."""
    from torchrl.envs.libs.vmas import VmasEnv

    check_vmas_scenario(cfg.id)
    kwargs = OmegaConf.to_container(cfg.kwargs, resolve=True) or {}
    return VmasEnv(
        cfg.id,
        num_envs=num_envs,
        max_steps=cfg.max_episode_steps,
        device="cpu",
        group_map=MarlGroupMapType.ALL_IN_ONE_GROUP,
        **kwargs,
    )


def team_transforms(env: EnvBase) -> list[Transform]:
    """The team's reward, step count and return (``episode_reward``), and each group's
    per-agent returns (``("agents", "episode_reward")``)."""
    rewards = list(env.reward_keys)
    return [TeamReward(rewards), StepCounter(), RewardSum(in_keys=["reward", *rewards])]
