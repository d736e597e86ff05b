"""Environments from the ``env`` config group: gymnasium envs wrapped by TorchRL, on the CPU
(``rlrun/devices.py`` says why; the collector moves their data to the policy's device).

Every env gets ``StepCounter`` and ``RewardSum`` so the trainer can report episode returns and
lengths; ``obs_mask`` hides observation entries (``cartpole_masked``); ``transforms`` appends any
TorchRL transform by ``_target_``.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Sequence

import gymnasium
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torchrl.data import Composite
from torchrl.envs import (
    Compose,
    EnvBase,
    GymEnv,
    GymWrapper,
    ObservationTransform,
    ParallelEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)

from rlrun.errors import ConfigError


class ObservationMask(ObservationTransform):
    """Keep only the given indices of the last dimension of an observation (a POMDP maker)."""

    def __init__(self, indices: Sequence[int], in_keys: Sequence[str] = ("observation",)) -> None:
        super().__init__(in_keys=list(in_keys), out_keys=list(in_keys))
        self.register_buffer("indices", torch.as_tensor(list(indices), dtype=torch.long))

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.index_select(-1, self.indices.to(obs.device))

    def _reset(self, tensordict, tensordict_reset):
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for key in self.in_keys:
            spec = observation_spec[key]
            low = spec.space.low.index_select(-1, self.indices)
            high = spec.space.high.index_select(-1, self.indices)
            observation_spec[key] = spec.__class__(
                low=low, high=high, shape=low.shape, dtype=spec.dtype, device=spec.device
            )
        return observation_spec


def check_env_id(env_id: str) -> None:
    """Fail with the nearest registered ids when gymnasium does not know ``env_id``."""
    if env_id in gymnasium.envs.registry:
        return
    near = difflib.get_close_matches(env_id, list(gymnasium.envs.registry), n=3, cutoff=0.5)
    hint = f" Nearest ids: {', '.join(near)}." if near else ""
    raise ConfigError(f"env.id={env_id} is not a registered gymnasium env.{hint}")


def _single_gym_env(env_id: str, kwargs: dict) -> EnvBase:
    # No device: gymnasium's arrays become CPU tensors anyway, and with ``device="cpu"`` TorchRL
    # walks every step's and reset's tensordict through ``.to("cpu")`` (about 0.25 ms per step
    # at 8 envs). The collector moves data to the policy's device (rlrun/devices.py).
    return GymEnv(env_id, **kwargs)


def _base_env(cfg: DictConfig, num_envs: int, start_method: str) -> EnvBase:
    kwargs = OmegaConf.to_container(cfg.kwargs, resolve=True) or {}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    make_one = functools.partial(_single_gym_env, cfg.id, kwargs)
    if cfg.parallel:
        return ParallelEnv(num_envs, make_one, mp_start_method=start_method)
    if cfg.backend == "gym_vector":
        # Autoreset off: TorchRL resets finished sub-envs itself (a masked ``reset``), so the
        # true last observation comes straight from ``step``. With gymnasium's autoreset,
        # GymWrapper parses ``info["final_obs"]`` env by env on every step, which made the
        # step 1.6x slower at 128 envs.
        vec = gymnasium.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED},
            **kwargs,
        )
        return GymWrapper(vec)
    return make_one() if num_envs == 1 else SerialEnv(num_envs, make_one)


def make_env(
    cfg: DictConfig,
    num_envs: int | None = None,
    seed: int | None = None,
    start_method: str = "fork",
) -> TransformedEnv:
    """Build the (batched) env on the CPU: gymnasium env(s) + step counter, episode return and
    transforms. ``start_method``: ParallelEnv workers' (``Placement.env_start_method``)."""
    check_env_id(cfg.id)
    env = _base_env(cfg, num_envs or cfg.num_envs, start_method)
    transforms = [StepCounter(), RewardSum()]
    if cfg.obs_mask is not None:
        transforms.append(ObservationMask(cfg.obs_mask))
    transforms += [instantiate(t) for t in cfg.transforms]
    env = TransformedEnv(env, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env
