"""A trained policy rebuilt from its run folder: ``rlrun.load``, and what ``rlrun eval`` and
``rlrun export`` start from.

The run's composed config (``<run>/.hydra/config.yaml``), with the user's overrides on top,
rebuilds env and policy through the functions training used (``rlrun.builders.envs.make_env``,
``rlrun.builders.policies.build_policy``, ``rlrun.run.eval_env_factory``), so the policy is the one
that was trained. Its weights come from a checkpoint verified the way ``resume=`` verifies one
(``find_checkpoint``: SHA-256 checksums) and are read with TorchRL's own ``Checkpoint.load``,
restoring only the ``policy`` component and the training env's state (observation statistics)
from the ``collector`` component (tensors and JSON, never pickled code). The device is decided
by ``rlrun/builders/devices.py``, so a run trained with ``device=cuda`` loads with ``device=cpu``.
"""

from __future__ import annotations

import functools
import pickle
import re
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase, TensorDictSequential
from torch import nn
from torchrl.envs import EnvBase, Transform
from torchrl.envs.transforms import VecNormV2
from torchrl.envs.utils import ExplorationType, set_exploration_type

from rlrun.compat.torchrl import transform_env_step
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import is_run_dir, run_config, run_folders

SIZE_MISMATCH = re.compile(  # torch's load_state_dict message
    r"size mismatch for ([^:]+): copying a param with shape torch.Size\((\[[^\]]*\])\) from "
    r"checkpoint, the shape in current model is torch.Size\((\[[^\]]*\])\)"
)
STEP = re.compile(r"(?:step_)?(\d+)")  # checkpoint=step_200000 (or 200000)


def choose_checkpoint(run_dir: Path, backend: str, name: str | None) -> Path:
    """The checkpoint ``checkpoint=`` names (``None``: the newest intact one; ``best``;
    ``step_N``; a path), its checksums verified (``rlrun.builders.checkpoints.find_checkpoint``)."""
    from rlrun.builders.checkpoints import (
        BEST,
        CHECKPOINT_DIR,
        PREFIX,
        checkpoint_dirs,
        find_checkpoint,
    )

    if backend == "none":
        raise ConfigError(
            f"{run_dir}: this run saved no checkpoints (checkpoint.backend=none); train it with "
            "checkpoint.backend=torch to evaluate or export it."
        )
    folder = run_dir / CHECKPOINT_DIR
    if name is None:
        path = run_dir
    elif name == BEST:
        path = folder / BEST
    elif (step := STEP.fullmatch(name)) is not None:
        path = folder / f"{PREFIX}-{int(step.group(1)):012d}"
    else:
        path = Path(name).expanduser().absolute()
    if name is not None and not path.is_dir():
        saved = [f"step_{int(p.name.removeprefix(f'{PREFIX}-'))}" for p in checkpoint_dirs(folder)]
        saved += [BEST] if (folder / BEST).is_dir() else []
        raise ConfigError(
            f"checkpoint={name}: no such checkpoint in {run_dir}; this run has: "
            f"{', '.join(saved) or 'none'}."
        )
    found = find_checkpoint(path, backend, key="checkpoint")
    if found is None:
        raise ConfigError(
            f"{run_dir}: no checkpoint in {CHECKPOINT_DIR}/ (the run stopped before it saved "
            "one); continue it with rlrun resume=<run> to get one."
        )
    return found


class EnvState:
    """Takes a checkpoint's ``collector`` component and keeps only its env's state (the
    transforms' statistics, e.g. ``env.normalize_observations``'s ``VecNormV2``) for ``env``,
    an env built as the training env was."""

    def __init__(self, env: EnvBase) -> None:
        self.env = env

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.env.load_state_dict(state.get("env_state_dict") or {}, strict=False)


def load_weights(
    actor: nn.Module, env: EnvBase, path: Path, backend: str, device: torch.device
) -> None:
    """Restore the checkpoint's ``policy`` component (the Trainer saves the loss's actor there)
    into ``actor`` and its collector's env state into ``env``, nothing else; a checkpoint whose
    shapes differ is refused in one line."""
    from torchrl.checkpoint import Checkpoint, CheckpointError

    parts = {"policy": actor, "collector": EnvState(env)}
    try:
        if backend == "torchsnapshot":
            import torchsnapshot

            torchsnapshot.Snapshot(str(path)).restore(app_state=parts)
            actor.to(device)
        else:
            Checkpoint(**parts).load(path, map_location=device)
    except (CheckpointError, RuntimeError, pickle.UnpicklingError) as err:
        text = str(err.__cause__ or err).strip() or type(err).__name__
        if "Error(s) in loading state_dict" not in text:
            first = text.splitlines()[0]
            raise ConfigError(f"{path}: not a loadable policy checkpoint: {first}") from None
        detail = text.splitlines()[-1].strip().rstrip(".")
        mismatch = SIZE_MISMATCH.search(text)
        if mismatch is not None:
            name, saved, built = mismatch.groups()
            detail = f"{name} is {saved} there, {built} here"
        raise ConfigError(
            f"the policy built from this config does not fit {path.name}: {detail}; drop the "
            "overrides that change the observation, the action or the network (env.id, "
            "env.obs_mask, policy.*)."
        ) from None


def frames_of(checkpoint: Path) -> int | None:
    """The frames a checkpoint was saved at (its manifest, or its folder name)."""
    from torchrl.checkpoint import Checkpoint, CheckpointError

    try:
        frames = Checkpoint.manifest(checkpoint).get("metadata", {}).get("collected_frames")
    except (OSError, CheckpointError):  # a torchsnapshot folder has no TorchRL manifest
        frames = None
    digits = re.search(r"(\d+)$", checkpoint.name)
    if frames is None and digits is not None:
        frames = int(digits.group(1))
    return frames


@dataclass
class Trained:
    """A run's policy with its trained weights, and the env it acts in."""

    run_dir: Path
    cfg: DictConfig
    ac: Any  # rlrun.builders.policies.ActorCritic
    checkpoint: Path
    frames: int | None
    device: torch.device
    make_env: Callable[..., EnvBase]  # rlrun.run.eval_env_factory: (pixels, num_envs) -> env
    policy: TensorDictModuleBase  # the eval-phase actor, acting on a CPU env's TensorDicts
    observation_stats: VecNormV2 | None  # env.normalize_observations: the checkpoint's statistics


def load_trained(
    run_dir: Path,
    overrides: Sequence[str] = (),
    checkpoint: str | None = None,
    device: str | None = None,
) -> Trained:
    """Rebuild ``run_dir``'s env and policy (``overrides`` on its saved config) and load the
    weights of ``checkpoint`` (default: the newest intact one) on ``device`` (default: the
    run's own)."""
    return rebuild(run_dir, run_config(run_dir, overrides, device), checkpoint)


@contextmanager
def keys_of_newer_rlrun(run_dir: Path) -> Iterator[None]:
    """A run saved by an older rlrun lacks the keys added since: name the one that is missing
    and how to give it, instead of a traceback."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    try:
        yield
    except (ConfigAttributeError, ConfigKeyError) as err:
        key = getattr(err, "full_key", None) or str(err).splitlines()[0]
        raise ConfigError(
            f"{run_dir}: its saved config has no {key} (saved by an older rlrun); give it on the "
            f"command line: +{key}=<value> (its default is in rlrun/conf/)."
        ) from None


def rebuild(run_dir: Path, cfg: DictConfig, checkpoint: str | None) -> Trained:
    """:func:`load_trained` from the run's final config (``rlrun.folders.run_dirs.run_config``)."""
    from rlrun.run import quiet_torchrl

    quiet_torchrl()
    warnings.filterwarnings("ignore", message="Support of VecNormV2 for containers")  # batched envs
    with keys_of_newer_rlrun(run_dir):
        return _rebuild(run_dir, cfg, checkpoint)


def _rebuild(run_dir: Path, cfg: DictConfig, checkpoint: str | None) -> Trained:
    from rlrun.algorithms import policy_config
    from rlrun.builders.checkpoints import held_for_reading
    from rlrun.builders.devices import on_device, placement
    from rlrun.builders.env_ids import import_env_modules
    from rlrun.builders.envs import action_spec, make_env
    from rlrun.builders.policies import build_policy
    from rlrun.run import eval_env_factory
    from rlrun.validation import check_env

    where = placement(cfg)  # the one device rule (rlrun/builders/devices.py)
    import_env_modules(cfg.env.imports)  # the run's own gymnasium ids, registered here too
    check_env(cfg)  # the env exists and fits the algorithm; eval.video against its render modes
    backend = cfg.checkpoint.backend
    # held as it is read: the run may be training still, and rotating its checkpoints
    choose = functools.partial(choose_checkpoint, run_dir, backend, checkpoint)
    with held_for_reading(choose, backend) as (path, held):
        train_env = make_env(cfg.env, num_envs=1)  # the training env's transforms, their state
        try:
            device, actions = where.eval_policy, action_spec(train_env)
            policy = policy_config(cfg)  # null _target_: the algorithm's own networks
            ac = build_policy(policy, train_env.observation_spec, actions, device)
            load_weights(ac.actor, train_env, held, backend, device)
            frames = frames_of(held)
        finally:  # a ParallelEnv (env.parallel=true) read for its specs has no workers to close
            train_env.close(raise_if_closed=False)
    ac.actor.eval()
    policy = on_device(ac.rollout_policy("eval"), where.eval_policy)
    stats = next((t for t in train_env.transform if isinstance(t, VecNormV2)), None)
    make = eval_env_factory(cfg, ac, stats)  # normalised with the checkpoint's statistics
    return Trained(run_dir, cfg, ac, path, frames, device, make, policy, stats)


class FrozenObservationNorm(Transform):
    """``(observation - loc) / scale`` with the numbers as buffers: the checkpoint's running
    statistics as constants of an exported graph (TorchRL's ``VecNormV2`` recomputes them from
    its running sums with ``_foreach`` ops ONNX lacks; ``ObservationNorm`` branches on a tensor
    flag, which ``torch.export`` cannot capture)."""

    def __init__(self, loc: torch.Tensor, scale: torch.Tensor, key: str) -> None:
        super().__init__(in_keys=[key], out_keys=[key])
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale)

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return (observation - self.loc) / self.scale


def observation_pipeline(trained: Trained, env: EnvBase) -> list[Transform]:
    """The env transforms that turn a raw observation into the policy's input (e.g.
    ``env.obs_mask``'s ``ObservationMask``): those before the policy's own transforms (primers,
    ``InitTracker``) that write a key the actor reads. Cloned, to run outside the env; the
    normalisation by running statistics (``env.normalize_observations``) becomes
    :class:`FrozenObservationNorm` of the checkpoint's statistics."""
    from rlrun.builders.envs import SharedObservationNorm

    own = len(trained.ac.env_transforms())
    transforms = list(env.transform)[: len(env.transform) - own]
    reads = set(trained.ac.actor.in_keys)
    pipeline = []
    for transform in (t for t in transforms if reads & set(t.out_keys)):
        if isinstance(transform, SharedObservationNorm):
            (key,) = transform.in_keys
            stats = trained.observation_stats
            loc, scale = stats.loc.get(key).clone(), stats.scale.get(key).clone()
            transform = FrozenObservationNorm(loc, scale, key)
        pipeline.append(transform.clone())
    return pipeline


class EnvStep(TensorDictModuleBase):
    """An env transform as a TensorDict module doing what it does to each step's observation in
    the env (``_call``); ``Transform.forward`` is TorchRL's replay-buffer path, which a transform
    of one's own may leave out or make different."""

    def __init__(self, transform: Transform) -> None:
        super().__init__()
        self.transform = transform
        self.in_keys = list(transform.in_keys)
        self.out_keys = list(transform.out_keys)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return transform_env_step(self.transform, tensordict)


def key_name(key: str | tuple[str, ...]) -> str:
    """A TensorDict key as a tensor's name (``("next", "actor_h")`` -> ``next_actor_h``)."""
    return key if isinstance(key, str) else "_".join(key)


class TensorPolicy(nn.Module):
    """The deterministic actor on plain tensors, from a raw observation (the env's observation
    transforms built in) to the action: ``action = policy(observation)``. An actor that honours
    the env's action mask takes it next, ``policy(observation, action_mask)``. A recurrent actor
    takes and returns its state explicitly, ``action, *state = policy(observation, *state,
    is_init)`` (``input_names`` and ``output_names`` list them; ``is_init`` true on an
    episode's first step resets the state). A team of several groups takes each group's
    observation and gives each group's action, in the env's order. This is the module
    ``rlrun export`` writes."""

    def __init__(self, trained: Trained) -> None:
        super().__init__()
        from rlrun.builders.action_masks import MASK_KEY
        from rlrun.builders.envs import observation_key

        env = trained.make_env()
        try:
            pipeline = observation_pipeline(trained, env)
            actions = list(env.action_keys)  # a team's: ("agents", "action"), or one per group
        finally:
            env.close()
        actor = trained.ac.rollout_policy("eval")
        steps = [EnvStep(t) for t in pipeline]
        module = TensorDictSequential(*steps, actor)
        state = [k for k in module.in_keys if ("next", k) in module.out_keys]
        # a masked actor reads the env's mask (a team's: each group's, beside its observation)
        masks = [k for k in module.in_keys if (k[-1] if isinstance(k, tuple) else k) == MASK_KEY]
        observations = [observation_key(action) for action in actions]
        resets = [k for k in module.in_keys if k == "is_init"]
        self.in_keys = [*observations, *masks, *state, *resets]
        self.out_keys = [*actions, *(("next", k) for k in state)]
        self.module = TensorDictSequential(*steps, actor, selected_out_keys=self.out_keys)
        self.module.to(trained.device)
        self.pipeline = pipeline  # the env's observation transforms, built in
        self.input_names = [key_name(k) for k in self.in_keys]
        self.mask_names = [key_name(k) for k in masks]
        self.output_names = [key_name(k) for k in self.out_keys]
        self.recurrent = bool(state)
        self.groups = len(actions)  # the first inputs and outputs: each group's, in order

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        if len(tensors) != len(self.in_keys):
            raise TypeError(f"this policy takes {', '.join(self.input_names)}")
        td = TensorDict(batch_size=tensors[0].shape[:1])
        for key, tensor in zip(self.in_keys, tensors, strict=True):
            td.set(key, tensor)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            out = self.module(td)
        values = tuple(out.get(k) for k in self.out_keys)
        return values if len(values) > 1 else values[0]


class TrainedPolicy(nn.Module):
    """What ``rlrun.load`` returns: the trained policy, acting deterministically.

    ``policy(td)``: a TensorDict from ``policy.make_env()`` (or any with the same keys) gets
    its ``action`` written, as during evaluation (recurrent state in the TensorDict).
    ``policy(observation)``: a batch of raw observations ``[batch, *obs_shape]`` on ``device``
    gives a batch of actions (``TensorPolicy``; a masked policy takes the env's
    ``action_mask`` next, a recurrent policy takes and returns its state). ``config``,
    ``checkpoint`` and ``frames`` say what was loaded.
    """

    def __init__(self, trained: Trained) -> None:
        super().__init__()
        self.td_policy = trained.policy
        self.tensor_policy = TensorPolicy(trained)
        self.make_env = trained.make_env
        self.config = trained.cfg
        self.checkpoint = trained.checkpoint
        self.frames = trained.frames

    def forward(self, data: TensorDictBase | torch.Tensor, *state: torch.Tensor) -> Any:
        if isinstance(data, TensorDictBase):
            with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
                return self.td_policy(data)
        with torch.no_grad():
            return self.tensor_policy(data, *state)


def load(run_dir: str | Path, checkpoint: str | None = None, device: str = "cpu") -> TrainedPolicy:
    """``rlrun.load``: the trained policy of a run folder, on ``device`` (``cpu`` by default,
    whatever the run trained on). ``checkpoint``: ``None`` (the newest intact one), ``"best"``,
    ``"step_N"`` or a checkpoint folder."""
    path = Path(run_dir).expanduser().absolute()
    if not is_run_dir(path):
        jobs = run_folders(path, "load")  # refused unless a sweep folder
        raise ConfigError(f"rlrun.load: {path} is a sweep; load one of its {len(jobs)} jobs.")
    return TrainedPolicy(load_trained(path, checkpoint=checkpoint, device=device))
