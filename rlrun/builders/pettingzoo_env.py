"""``env.backend=pettingzoo``: a PettingZoo parallel env (MPE's ``simple_spread``, ...) through
TorchRL's ``PettingZooWrapper``, as a team of agents (``rlrun/builders/teams.py`` says what a
team's keys are).

``env.id`` is the module that makes it, as PettingZoo names it (``mpe2.simple_spread_v3``: its
``parallel_env(**env.kwargs)``; a turn-based game's ``env(**env.kwargs)``, played against
``env.opponents``: ``rlrun/builders/turns.py``). The agents form one group, ``agents``, or the
groups ``env.group_map`` names (``rlrun/builders/teams.py``); the env's global state, where it
defines one, is kept beside them (``state``). PettingZoo steps one env at a time:
``env.num_envs`` of them run one after the other (TorchRL's ``SerialEnv``), or in worker
processes with ``env.parallel``.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torchrl.envs import EnvBase, ParallelEnv, SerialEnv

from rlrun.builders.teams import group_map


def _one_env(
    module: str, kwargs: dict[str, Any], groups: str, opponents: dict[str, str]
) -> EnvBase:
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    found = importlib.import_module(module)
    if hasattr(found, "parallel_env"):
        parallel_env = found.parallel_env(**kwargs)
    else:  # a turn-based game (rlrun/builders/turns.py)
        from rlrun.builders.turns import AgainstOpponents

        parallel_env = AgainstOpponents(found.env(**kwargs), opponents, module)
    return PettingZooWrapper(
        parallel_env,
        group_map=group_map(groups),
        return_state=_has_state(parallel_env),
    )


def _has_state(parallel_env: Any) -> bool:
    """Whether the env defines the global ``state()`` (MPE does; PettingZoo's base class
    raises NotImplementedError, which an env of your own may leave as is)."""
    from pettingzoo.utils.env import ParallelEnv as Base

    unwrapped = getattr(parallel_env, "unwrapped", parallel_env)
    return type(unwrapped).state is not Base.state


def make_pettingzoo_env(cfg: DictConfig, num_envs: int, start_method: str) -> EnvBase:
    """``num_envs`` envs of PettingZoo module ``env.id``, one after the other or (``env.parallel``)
    in worker processes."""
    kwargs = OmegaConf.to_container(cfg.kwargs, resolve=True) or {}
    opponents = OmegaConf.to_container(cfg.opponents, resolve=True) or {}
    make_one = functools.partial(_one_env, cfg.id, kwargs, cfg.group_map, opponents)
    if num_envs == 1:
        return make_one()
    if cfg.parallel:
        return ParallelEnv(num_envs, make_one, mp_start_method=start_method)
    return SerialEnv(num_envs, make_one)
