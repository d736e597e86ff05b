"""``env.backend=vmas``: a VMAS multi-agent scenario through TorchRL's ``VmasEnv``.

All ``env.num_envs`` envs are one batched torch simulation (VMAS steps them together, on the
CPU like every rlrun env: ``rlrun/builders/devices.py``). The agents form one group, ``agents``
(``env.group_map=all_in_one``; ``by_type``: a group per agent type): their keys are
``("agents", "observation")``, ``("agents", "action")`` and ``("agents", "reward")`` of shape
``[num_envs, n_agents, ...]``; ``done`` is the team's, ``[num_envs, 1]``. The team's reward
beside the agents' rewards: ``rlrun/builders/teams.py``.
"""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf
from torchrl.envs import EnvBase

from rlrun.builders.env_ids import check_vmas_scenario
from rlrun.builders.teams import group_map


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
        group_map=group_map(cfg.group_map),
        **kwargs,
    )
