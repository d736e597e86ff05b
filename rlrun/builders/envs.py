"""Environments from the ``env`` config group: gymnasium envs wrapped by TorchRL, on the CPU
(``rlrun/builders/devices.py`` says why; the collector moves their data to the policy's device).

Every env gets ``StepCounter`` and ``RewardSum`` so the trainer can report episode returns and
lengths; ``obs_mask`` hides observation entries (``cartpole_masked``); ``transforms`` appends any
TorchRL transform by ``_target_``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence

import gymnasium
import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torchrl.data import Composite, TensorSpec
from torchrl.envs import (
    Compose,
    DoubleToFloat,
    EnvBase,
    GymEnv,
    GymWrapper,
    ObservationTransform,
    ParallelEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    Transform,
    TransformedEnv,
)
from torchrl.envs.transforms import VecNormV2

import rlrun.compat.tensordict  # noqa: F401  (a speed fix, applied on import)
from rlrun.builders import atari
from rlrun.builders.env_ids import check_env_id, import_env_modules
from rlrun.builders.pettingzoo_env import make_pettingzoo_env
from rlrun.builders.teams import team_transforms
from rlrun.builders.vmas_env import make_vmas_env
from rlrun.config import MULTI_AGENT_BACKENDS

# MuJoCo renders (eval.video) through EGL, which needs no display; MUJOCO_GL set by the user wins.
os.environ.setdefault("MUJOCO_GL", "egl")


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


def _single_gym_env(
    env_id: str, kwargs: dict, atari_cfg: DictConfig | None = None, imports: Sequence[str] = ()
) -> EnvBase:
    import_env_modules(imports)  # a spawned ParallelEnv worker registers the id too
    # No device: gymnasium's arrays become CPU tensors anyway, and with ``device="cpu"`` TorchRL
    # walks every step's and reset's tensordict through ``.to("cpu")`` (about 0.25 ms per step
    # at 8 envs). The collector moves data to the policy's device (rlrun/builders/devices.py).
    if atari_cfg is None:
        return GymEnv(env_id, **kwargs)
    kwargs = dict(kwargs)
    pixels = kwargs.pop("from_pixels", False)  # eval.video: the game screen, beside the stack
    kwargs.pop("pixels_only", None)
    max_steps = kwargs.pop("max_episode_steps", None)
    env = gymnasium.make(
        env_id,
        render_mode="rgb_array" if pixels else None,
        **atari.make_kwargs(atari_cfg),
        **kwargs,
    )
    for wrap in atari.wrappers(atari_cfg, max_steps):
        env = wrap(env)
    return atari.read_lives(GymWrapper(env, from_pixels=pixels, pixels_only=False))


def _base_env(cfg: DictConfig, num_envs: int, start_method: str) -> EnvBase:
    if cfg.backend == "envpool":
        from rlrun.builders.envpool_env import make_envpool_env

        return make_envpool_env(cfg, num_envs)
    if cfg.backend == "vmas":
        return make_vmas_env(cfg, num_envs)
    if cfg.backend == "pettingzoo":
        return make_pettingzoo_env(cfg, num_envs, start_method)
    kwargs = OmegaConf.to_container(cfg.kwargs, resolve=True) or {}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    make_one = functools.partial(_single_gym_env, cfg.id, kwargs, cfg.atari, list(cfg.imports))
    if cfg.parallel:
        return ParallelEnv(num_envs, make_one, mp_start_method=start_method)
    if cfg.backend == "gym_vector":
        # Autoreset off: TorchRL resets finished sub-envs itself (a masked ``reset``), so the
        # true last observation comes straight from ``step``. With gymnasium's autoreset,
        # GymWrapper parses ``info["final_obs"]`` env by env on every step, which made the
        # step 1.6x slower at 128 envs.
        wrappers = None
        if cfg.atari is not None:  # preprocessing per sub-env; time limit in agent steps
            wrappers = atari.wrappers(cfg.atari, kwargs.pop("max_episode_steps", None))
            kwargs.update(atari.make_kwargs(cfg.atari))
        vec = gymnasium.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.DISABLED},
            wrappers=wrappers,
            **kwargs,
        )
        return GymWrapper(vec) if cfg.atari is None else atari.read_lives(GymWrapper(vec))
    return make_one() if num_envs == 1 else SerialEnv(num_envs, make_one)


class SharedObservationNorm(Transform):
    """Normalise observations with another env's running statistics (a ``VecNormV2``), never
    updating them: an evaluation env sees what the training env has learnt so far, including
    statistics a resumed run loaded from its checkpoint."""

    def __init__(self, source: VecNormV2) -> None:
        super().__init__(in_keys=list(source.in_keys), out_keys=list(source.out_keys))
        self._source = [source]  # a plain reference: not a submodule, not saved twice

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        loc, scale = self._source[0].loc, self._source[0].scale
        for key, out in zip(self.in_keys, self.out_keys, strict=True):
            value = next_tensordict.get(key)
            next_tensordict.set(out, (value - loc.get(key)) / scale.get(key))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        return self._call(tensordict_reset)


def observation_norm(stats: VecNormV2 | None) -> Transform:
    """``env.normalize_observations``: running mean and std of the observation (TorchRL's
    ``VecNormV2``, saved in checkpoints with the collector's env); with ``stats``, those of
    another env, read only."""
    if stats is not None:
        return SharedObservationNorm(stats)
    return VecNormV2(in_keys=["observation"], decay=0.99999, eps=1e-8, reduce_batch_dims=True)


def _one_agent_transforms(
    cfg: DictConfig, env: EnvBase, observation_stats: VecNormV2 | None, training: bool
) -> list[Transform]:
    """Step count and episode return, float32 observations, ``env.obs_mask``,
    ``env.normalize_observations`` and the Atari training transforms."""
    transforms = [StepCounter(), RewardSum()]
    if env.observation_spec["observation"].dtype == torch.float64:  # MuJoCo: float32 for the nets
        transforms.append(DoubleToFloat(in_keys=["observation"]))
    if cfg.obs_mask is not None:
        transforms.append(ObservationMask(cfg.obs_mask))
    if cfg.normalize_observations:
        transforms.append(observation_norm(observation_stats))
    if cfg.atari is not None and training:
        transforms += atari.training_transforms(cfg.atari)
    return transforms


def policy_keys(env: EnvBase) -> tuple[NestedKey, NestedKey]:
    """The observation a policy reads and the action it writes: ``observation`` and ``action``,
    or a team's ``("agents", "observation")`` and ``("agents", "action")``."""
    return observation_key(env.action_key), env.action_key


def observation_key(action: NestedKey) -> NestedKey:
    """The observation the policy reads to write ``action``: its group's, for a team."""
    group = action[:-1] if isinstance(action, tuple) else ()
    return (*group, "observation") if group else "observation"


def action_spec(env: EnvBase) -> TensorSpec:
    """The spec of what the policy writes: ``action``, or a multi-agent env's
    ``("agents", "action")`` (``[*batch, n_agents, ...]``), or, for a team of several groups,
    every group's (``Composite``: ``(group, "action")`` each)."""
    if len(env.action_keys) > 1:
        return env.full_action_spec
    return env.full_action_spec[env.action_key]


def make_env(
    cfg: DictConfig,
    num_envs: int | None = None,
    seed: int | None = None,
    start_method: str = "fork",
    observation_stats: VecNormV2 | None = None,
    training: bool = True,
) -> TransformedEnv:
    """Build the (batched) env on the CPU: gymnasium env(s) + step counter, episode return and
    transforms. ``start_method``: ParallelEnv workers' (``Placement.env_start_method``);
    ``observation_stats``: normalise with the training env's statistics (evaluation);
    ``training``: false for an evaluation env (Atari: no episodic life, no reward clipping)."""
    import_env_modules(cfg.imports)  # your gymnasium ids (env.imports), in this process too
    if cfg.backend in MULTI_AGENT_BACKENDS:  # a team of agents (rlrun/builders/teams.py)
        env = _base_env(cfg, num_envs or cfg.num_envs, start_method)
        transforms = team_transforms(env)  # the team's reward, step count and returns
    else:
        check_env_id(cfg.id)
        env = _base_env(cfg, num_envs or cfg.num_envs, start_method)
        transforms = _one_agent_transforms(cfg, env, observation_stats, training)
    transforms += [instantiate(t) for t in cfg.transforms]
    env = TransformedEnv(env, Compose(*transforms))
    if seed is not None:
        env.set_seed(seed)
    return env
