"""``env.backend=envpool``: envpool's C++ thread pool through TorchRL's ``MultiThreadedEnv``.

``make_envpool_env(cfg, num_envs)`` returns an env with batch size ``[num_envs]`` whose keys mean
what the gymnasium backend's mean:

- ``observation``: Atari ``uint8 [N, frame_stack, screen_size, screen_size]`` (grey, max-pooled
  over the last two of ``frame_skip`` frames, INTER_AREA resize, up to ``noop_max`` no-ops at
  reset, no fire reset: gymnasium's ``AtariPreprocessing`` + ``FrameStackObservation``); MuJoCo
  float64 ``[N, obs_dim]``.
- ``action``: ``Categorical`` int64 ``[N]`` (Atari) or ``Bounded`` float32 ``[N, act_dim]``
  (MuJoCo; float32 as in gymnasium, though envpool declares float64).
- ``reward`` float32 and ``done``/``terminated``/``truncated`` bool, all ``[N, 1]`` like
  ``GymWrapper``'s; ``terminated`` is game over, ``truncated`` the time limit
  (``max_episode_steps`` counts agent steps, i.e. after frame skipping).
- Atari only: ``lives`` int64 ``[N, 1]`` (envpool's ``info["lives"]``) after reset and every step.

``env.set_seed(seed)`` rebuilds the pool (envpool takes seeds only at construction) with
per-env seeds drawn from ``numpy.random.SeedSequence(seed)``; call ``reset`` after it.

Envpool's own episodic life and reward clipping stay off: rlrun applies those as TorchRL
transforms on the training env only, so that logged returns are whole games' true scores.

Autoreset. Envpool resets a finished env on the *next* step: that step ignores the action and
returns the reset observation with reward 0 and done False, and envpool 1.2.5 has no other mode
(its gymnasium class declares ``AutoresetMode.NEXT_STEP`` only). TorchRL's
``MultiThreadedEnvWrapper.step_and_maybe_reset`` relies on that: it zeroes the done flags and
calls no reset, so a bare env's rollout records one bogus transition per episode (final
observation -> reset observation, reward 0, not done: a wrong bootstrap across episodes).
Wrapped in a ``TransformedEnv`` that override is never called (``TransformedEnv`` uses
``EnvBase.step_and_maybe_reset``, which resets finished envs through ``_reset``), so
``StepCounter``/``RewardSum`` reset correctly there. Here the override is dropped in both cases:
finished envs are reset at once with envpool's partial ``reset(env_ids)`` (which works in sync
mode and clears envpool's pending autoreset), so every recorded transition is a real one, the
done step carries the true last observation, and the next step acts on the new episode's first
observation, exactly as with gymnasium envs whose autoreset is off. The cost is one extra
round trip through the pool for the finished envs, once per episode.
"""

from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, MultiThreadedEnv

from rlrun.compat.torchrl import envpool_gym_specs
from rlrun.errors import ConfigError


class _EnvPoolEnv(MultiThreadedEnv):
    """TorchRL's ``MultiThreadedEnv`` with what 0.14.1 gets wrong for envpool 1.2.5 fixed.

    ``_build_env``, ``_make_specs``, ``_reset``, ``_step``, ``_set_seed`` and ``self._env`` are
    what TorchRL documents for an env wrapper to define and use (``EnvBase``'s and
    ``_EnvWrapper``'s abstract methods, the wrapped env), not private members; the private ones
    it needs are in ``rlrun/compat/torchrl.py``."""

    def __init__(self, num_workers: int, env_name: str, *, atari: bool, **kwargs: Any) -> None:
        self._atari = atari  # read by _make_specs, which the constructor calls
        super().__init__(num_workers, env_name, **kwargs)

    # envpool 1.2.5 knows env_type "gymnasium" and "dm", not the stock "gym".
    def _build_env(self, env_name: str, num_workers: int, create_env_kwargs: dict | None) -> Any:
        import envpool

        kwargs = dict(create_env_kwargs or {})
        env = envpool.make(env_name, env_type="gymnasium", num_envs=num_workers, **kwargs)
        return env

    # Stock specs convert under set_gym_backend("gym") (the legacy package); also adds lives,
    # GymWrapper's [N, 1] reward/done shapes and gymnasium's float32 MuJoCo actions.
    def _make_specs(self, env: Any) -> None:
        from torchrl.envs.libs.gym import set_gym_backend

        n = self.num_workers
        with set_gym_backend("gymnasium"):
            action_spec, observation_spec = envpool_gym_specs(self)
        if action_spec.dtype == torch.float64:  # envpool casts actions to its float64 itself
            action_spec = action_spec.to(torch.float32)
        self.action_spec = action_spec
        if self._atari:
            observation_spec["lives"] = Unbounded(shape=(n, 1), dtype=torch.int64)
        self.observation_spec = observation_spec
        self.reward_spec = Unbounded(shape=(n, 1), dtype=torch.float32)
        flag = Categorical(2, shape=(n, 1), dtype=torch.bool)
        self.done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(n,)
        )

    # Stock reset needs treevalue and indexes with the [N, 1] mask; partial reset by env ids.
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is None or mask.all():
            obs, info = self._env.reset()
            self.obs = TensorDict(self._read(obs, info), batch_size=self.batch_size)
        else:
            ids = mask.reshape(self.batch_size).nonzero().squeeze(-1)
            obs, info = self._env.reset(ids.numpy().astype(np.int32))
            self.obs = self.obs.clone()  # the last step's output shares these tensors
            self.obs[ids] = TensorDict(self._read(obs, info), batch_size=ids.shape)
        out = self.obs.clone()
        out.update(self.full_done_spec.zero())
        return out

    # Stock step output needs treevalue; this adds lives and the [N, 1] shapes.
    @torch.no_grad()
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get(self.action_key).cpu()  # envpool takes numpy actions
        obs, reward, terminated, truncated, info = self._env.step(action.numpy())
        n = self.num_workers
        self.obs = TensorDict(self._read(obs, info), batch_size=self.batch_size)
        out = self.obs.clone(False)
        terminated = torch.as_tensor(terminated).view(n, 1)
        truncated = torch.as_tensor(truncated).view(n, 1)
        out["reward"] = torch.as_tensor(reward).view(n, 1)
        out["terminated"], out["truncated"] = terminated, truncated
        out["done"] = terminated | truncated
        return out

    # The stock override skips resets (next-step autoreset); see the module docstring.
    step_and_maybe_reset = EnvBase.step_and_maybe_reset

    # envpool seeds env i with seed + i (runs seeded s and s + 1 would share all but one env's
    # stream): rebuild the pool (the stock way) with independent per-env seeds instead.
    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            seeds = np.random.SeedSequence(seed).generate_state(self.num_workers) >> 1  # int32
            super()._set_seed([int(s) for s in seeds])

    def _read(self, obs: Any, info: dict) -> dict[str, torch.Tensor]:
        """Observation entries (and lives) of one envpool reset or step, as tensors."""
        if isinstance(obs, dict):
            out = {key: torch.as_tensor(value) for key, value in obs.items()}
        else:
            out = {"observation": torch.as_tensor(obs)}
        if self._atari:
            out["lives"] = torch.as_tensor(info["lives"], dtype=torch.int64).unsqueeze(-1)
        return out


def _atari_kwargs(atari: DictConfig) -> dict[str, Any]:
    """envpool's options for gymnasium's AtariPreprocessing + FrameStackObservation."""
    return {
        "stack_num": atari.frame_stack,
        "frame_skip": atari.frame_skip,
        "noop_max": atari.noop_max,
        "img_height": atari.screen_size,
        "img_width": atari.screen_size,
        "gray_scale": True,
        "repeat_action_probability": float(atari.repeat_action_probability),
        "use_fire_reset": False,
        "episodic_life": False,  # done by a TorchRL transform on the training env only
        "reward_clip": False,  # likewise
    }


def envpool_task(cfg: DictConfig) -> tuple[str, bool]:
    """envpool's name for ``cfg.id`` and whether it is an Atari game; a one-line ConfigError for
    an id envpool does not have, or ``env.atari`` that does not fit it (also run by
    ``rlrun/validation.py``, before anything is built)."""
    try:
        import envpool
        from envpool.registration import registry
    except ImportError:
        raise ConfigError(
            "env.backend=envpool needs envpool: pip install 'rlrun[envpool]'"
        ) from None
    name = cfg.id.removeprefix("ALE/")
    if name not in registry.specs:
        near = difflib.get_close_matches(name, envpool.list_all_envs(), n=3, cutoff=0.5)
        hint = f" Nearest envpool ids: {', '.join(near)}." if near else ""
        raise ConfigError(f"env.id={cfg.id} is not an envpool task (env.backend=envpool).{hint}")
    is_atari = registry.specs[name][0] == "envpool.atari"
    if is_atari and cfg.atari is None:
        raise ConfigError(f"env.id={cfg.id} is an Atari game: env.backend=envpool needs env.atari.")
    if cfg.atari is not None and not is_atari:
        raise ConfigError(f"env.id={cfg.id} is not an Atari game: set env.atari=null.")
    return name, is_atari


def make_envpool_env(cfg: DictConfig, num_envs: int) -> EnvBase:
    """``num_envs`` copies of ``cfg.id`` (the run's ``env`` node) in one envpool, with
    ``env.atari``'s preprocessing, ``env.num_threads`` and ``env.max_episode_steps``."""
    _, is_atari = envpool_task(cfg)
    kwargs = _atari_kwargs(cfg.atari) if is_atari else {}
    if cfg.num_threads is not None:
        kwargs["num_threads"] = int(cfg.num_threads)
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = int(cfg.max_episode_steps)
    return _EnvPoolEnv(num_envs, cfg.id, atari=is_atari, create_env_kwargs=kwargs)
