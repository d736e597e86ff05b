"""Trainer hooks: the ones rlrun always registers (episode statistics, loss logging, LR
annealing) and the ``hooks`` config: TorchRL's built-in hooks by name, user hooks by ``_target_``.

Every metric is logged against collected frames (the Trainer's step), under ``train/...``.
Each hook has ``state_dict``/``load_state_dict`` so a resumed run continues its statistics.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig
from tensordict import TensorDictBase
from torchrl.trainers import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    EarlyStopping,
    LogScalar,
    LogValidationReward,
    LRSchedulerHook,
    RewardNormalizer,
    SelectKeys,
    TargetNetUpdaterHook,
    Trainer,
    TrainerHookBase,
    UpdateWeights,
)

import rlrun
from rlrun.builders.devices import Placement
from rlrun.builders.hook_entries import BUILTIN_NAMES, HOOK_POINTS, HookEntry
from rlrun.builders.teams import group_returns
from rlrun.compat.torchrl import progress_bar, stop_requested
from rlrun.errors import ConfigError, choose


class EpisodeStats(TrainerHookBase):
    """Mean return and length of the episodes that ended in each batch, and frames per second.

    It also keeps what ``summary.json`` reports (last and best return, wall time, frames).
    """

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.return_last: float | None = None
        self.return_best: float | None = None
        self.eval_return_last: float | None = None
        self.wall_time_s = 0.0
        self.first_batch_s: float | None = None
        self._t_last: float | None = None
        self._frames_last = 0
        self._return_now: float | None = None

    def episodes(self, batch: TensorDictBase) -> dict[str, Any] | None:
        done = batch.get(("next", "done"), None)  # none in an offline run's (DatasetFeed)
        now = time.perf_counter()
        frames = self.trainer.collected_frames
        if self._t_last is None:  # first batch: time from the trainer's start
            self._t_last = self._t_start
            self.first_batch_s = time.time() - rlrun.LAUNCHED_AT
        dt = now - self._t_last
        self.wall_time_s += dt
        fps = (frames - self._frames_last) / dt if dt > 0 else math.nan
        self._t_last, self._frames_last = now, frames
        out: dict[str, Any] = {"train/fps": fps, "train/wall_time_s": self.wall_time_s}
        self._return_now = None
        if done is not None and done.any():
            done = done.squeeze(-1)
            returns = batch.get(("next", "episode_reward")).squeeze(-1)[done]
            lengths = batch.get(("next", "step_count")).squeeze(-1)[done]
            self.return_last = self._return_now = returns.float().mean().item()
            self.return_best = max(self.return_best or -math.inf, self.return_last)
            out["train/episode_length"] = lengths.float().mean().item()
            for group, value in group_returns(batch.get("next"), done).items():  # a team's
                out[f"train/{group}/episode_return"] = value
        return out

    def returns(self, batch: TensorDictBase) -> dict[str, Any] | None:
        """Mean return of the batch's finished episodes, also shown on the progress bar."""
        if self._return_now is None:
            return None
        return {"train/episode_return": self._return_now, "log_pbar": True}

    def start_clock(self) -> None:
        self._t_start = time.perf_counter()
        self._frames_last = self.trainer.collected_frames

    def stop_clock(self) -> None:
        """Count the last batch's optimisation time too."""
        if self._t_last is not None:
            self.wall_time_s += time.perf_counter() - self._t_last
            self._t_last = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "return_last": self.return_last,
            "return_best": self.return_best,
            "eval_return_last": self.eval_return_last,
            "wall_time_s": self.wall_time_s,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for key, value in state_dict.items():
            setattr(self, key, value)

    def register(self, trainer: Trainer, name: str = "episode_stats") -> None:
        self.trainer = trainer
        trainer.register_module(name, self)
        trainer.register_op("setup", self.start_clock)
        trainer.register_op("shutdown", self.stop_clock)
        trainer.register_op("pre_steps_log", self.episodes)
        trainer.register_op("pre_steps_log", self.returns)


class LossLog(TrainerHookBase):
    """Log each loss term, averaged over the batch's optimisation steps, as ``train/<key>``."""

    def __call__(self, optim_steps: int, average_losses: TensorDictBase | None) -> dict | None:
        if average_losses is None:
            return None
        out = {f"train/{k}": v.mean().item() for k, v in average_losses.items()}
        out["train/optim_steps"] = optim_steps
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "loss_log") -> None:
        trainer.register_op("post_optim_complete_log", self)


class LinearLRAnnealing(TrainerHookBase):
    """Decay every param group's learning rate linearly to 0 over ``total_frames``."""

    def __init__(self, optimizer: torch.optim.Optimizer, total_frames: int) -> None:
        self.optimizer = optimizer
        self.total_frames = total_frames
        self.base_lrs = [float(g["lr"]) for g in optimizer.param_groups]
        self.trainer: Trainer | None = None

    def __call__(self) -> None:
        frac = max(0.0, 1.0 - self.trainer.collected_frames / self.total_frames)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            if isinstance(group["lr"], torch.Tensor):  # read by a captured step: keep the tensor
                group["lr"].fill_(base * frac)
            else:
                group["lr"] = base * frac

    def log(self, batch: TensorDictBase) -> dict[str, Any]:
        return {"train/lr": float(self.optimizer.param_groups[0]["lr"])}

    def state_dict(self) -> dict[str, Any]:
        return {"base_lrs": self.base_lrs}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.base_lrs = state_dict["base_lrs"]

    def register(self, trainer: Trainer, name: str = "lr_annealing") -> None:
        self.trainer = trainer
        trainer.register_module(name, self)
        trainer.register_op("post_steps", self)
        trainer.register_op("post_steps_log", self.log)


# --- Hooks from the ``hooks`` config: built-ins by name, user classes by ``_target_`` ---------


@dataclass
class HookContext:
    """What a built-in hook may need from the run being assembled."""

    trainer: Trainer
    cfg: DictConfig
    optimizer: torch.optim.Optimizer
    policy: Any  # the evaluation policy (the actor, acting on a CPU env's data)
    make_env: Callable[[], Any]  # a fresh env, e.g. for validation rollouts
    run_dir: Path  # the run folder (memmap replay storage)
    where: Placement  # the run's devices


def _replay_buffer(ctx: HookContext) -> TrainerHookBase:
    """The ``replay_buffer`` group's buffer (sampler, storage, transforms, pinning), as a hook.

    Off-policy algorithms register that buffer themselves; a second one would fill unread.
    """
    from rlrun.builders.buffers import make_replay_buffer, make_replay_buffer_hook

    if ctx.trainer.replay_buffer is not None:
        raise ConfigError(
            f"hooks.replay_buffer: algo={ctx.cfg.algo.name} already trains from the replay "
            "buffer of the replay_buffer group; drop replay_buffer from hooks."
        )
    buffer = make_replay_buffer(ctx.cfg.replay_buffer, ctx.run_dir, ctx.where, ctx.cfg.env.atari)
    return make_replay_buffer_hook(buffer, ctx.where)


def _target_updater(ctx: HookContext, kind: str = "soft", **kw: Any) -> TrainerHookBase:
    from torchrl.objectives import HardUpdate, SoftUpdate

    updater = {"soft": SoftUpdate, "hard": HardUpdate}[
        choose("hooks.target_updater.kind", kind, ("soft", "hard"))
    ]
    return TargetNetUpdaterHook(updater(ctx.trainer.loss_module, **kw))


def _lr_scheduler(ctx: HookContext, scheduler: dict, interval: str = "batch") -> TrainerHookBase:
    return LRSchedulerHook(instantiate(scheduler, optimizer=ctx.optimizer), interval=interval)


def _log_validation_reward(ctx: HookContext, **kw: Any) -> TrainerHookBase:
    from torchrl.envs.utils import ExplorationType

    kw.setdefault("record_interval", 1)
    kw.setdefault("record_frames", 1000)
    return LogValidationReward(
        policy_exploration=ctx.policy,
        environment=ctx.make_env(),
        exploration_type=ExplorationType.DETERMINISTIC,
        **kw,
    )


def _nested(key: str | list[str]) -> str | tuple[str, ...]:
    """YAML writes a nested key as a list; TensorDict wants a tuple."""
    return key if isinstance(key, str) else tuple(key)


# name -> factory(ctx, **options from YAML). Each hook registers itself at its own points.
BUILTIN_HOOKS: dict[str, Callable[..., TrainerHookBase]] = {
    "log_scalar": lambda ctx, key="reward", **kw: LogScalar(_nested(key), **kw),
    "count_frames_log": lambda ctx, **kw: CountFramesLog(frame_skip=1, **kw),
    "reward_normalizer": lambda ctx, **kw: RewardNormalizer(**kw),
    "batch_subsampler": lambda ctx, **kw: BatchSubSampler(**kw),
    "select_keys": lambda ctx, keys: SelectKeys(list(keys)),
    "clear_cuda_cache": lambda ctx, interval=1: ClearCudaCache(interval),
    "update_weights": lambda ctx, **kw: UpdateWeights(ctx.trainer.collector, **kw),
    "log_validation_reward": _log_validation_reward,
    "replay_buffer": _replay_buffer,
    "target_updater": _target_updater,
    "lr_scheduler": _lr_scheduler,
    "early_stopping": lambda ctx, **kw: EarlyStopping(**kw),
}
if set(BUILTIN_HOOKS) != set(BUILTIN_NAMES):  # the names the light check knows, one list
    raise ImportError(f"rlrun.builders.hook_entries.BUILTIN_NAMES != {sorted(BUILTIN_HOOKS)}")


def _user_hook(entry: HookEntry) -> Any:
    try:
        return instantiate(entry.options, _convert_="all")
    except InstantiationException as err:
        cause = err.__cause__  # what the class itself raised, when it got that far
        why = f"{type(cause).__name__}: {cause}" if cause else str(err).splitlines()[0]
        raise ConfigError(
            f"hooks.{entry.name}._target_={entry.options['_target_']} could not be built: "
            f"{why.split(', set env var')[0]}"
        ) from None


def register_config_hooks(entries: list[HookEntry], ctx: HookContext) -> None:
    """Build every hook of the ``hooks`` mapping, in order, and register it on the Trainer.

    A user's object is called at each of its points; its ``state_dict`` (when it has one) goes
    into checkpoints. Built-ins register themselves at TorchRL's own points.
    """
    trainer = ctx.trainer
    for entry in entries:
        if entry.builtin is not None:
            try:
                hook = BUILTIN_HOOKS[entry.builtin](ctx, **entry.options)
            except TypeError as err:
                raise ConfigError(
                    f"hooks.{entry.name}: bad options {sorted(entry.options)} "
                    f"for {entry.builtin}: {err}"
                ) from None
            hook.register(trainer, entry.name)
            continue
        hook = _user_hook(entry)
        if not entry.points:
            if not callable(getattr(hook, "register", None)):
                raise ConfigError(
                    f"hooks.{entry.name}.at is missing; set it to one of: {', '.join(HOOK_POINTS)}."
                )
            hook.register(trainer, entry.name)
            continue
        if has_state(hook):
            trainer.register_module(entry.name, hook)
        for point in entry.points:
            trainer.register_op(point, hook)


def has_state(hook: Any) -> bool:
    """Whether a checkpoint can save ``hook``: it has ``state_dict`` and ``load_state_dict``
    (or ``dump`` and ``load``), what TorchRL's ``Checkpoint`` calls."""

    def has(*names: str) -> bool:
        return all(callable(getattr(hook, name, None)) for name in names)

    return has("state_dict", "load_state_dict") or has("dump", "load")


def continue_progress_bar(trainer: Trainer) -> None:
    """A resumed run's progress bar starts at the restored frame count, not at 0 (TorchRL's
    ``train`` always opens it at 0)."""

    def advance() -> None:
        if trainer.progress_bar and trainer.collected_frames:
            progress_bar(trainer).update(trainer.collected_frames)

    trainer.register_op("setup", advance)


STOP_GRACE_S = 10.0  # how long a stop lets the batch end on its own: a short one ends exactly


class StopWithinBatch(TrainerHookBase):
    """A stop asked for mid-batch (SIGTERM, Ctrl-C, a scheduler's pre-emption signal) waits
    :data:`STOP_GRACE_S` for the batch to end on its own, then ends its optimisation at the next
    step: TorchRL's Trainer leaves its step loop when a ``process_optim_batch`` hook raises
    ``StopIteration``, runs the batch's ``post_steps`` hooks (the NaN check, the weights to the
    collector) and saves its checkpoint as it stops. Without it a stop waited for the whole
    batch: 20,000 steps of a REDQ batch, minutes of an offline CQL one, past a scheduler's 30 s.
    A batch that ends within the grace period stops as before, so its resume is exact.
    Registered first, so no minibatch is drawn after the stop; not with Ray learners, whose
    batch runs on the learners (TorchRL refuses ``process_optim_batch`` hooks there)."""

    def __init__(self, trainer: Trainer, grace_s: float = STOP_GRACE_S) -> None:
        self.trainer = trainer
        self.grace_s = grace_s
        self.seen: float | None = None  # when the requested stop was first seen

    def overdue(self) -> bool:
        """Whether a requested stop has waited its grace period: the batch's remaining steps,
        and an evaluation in progress (``rlrun/builders/evaluation.py``), are then dropped."""
        if not stop_requested(self.trainer):
            return False
        now = time.monotonic()
        if self.seen is None:
            self.seen = now
        return now - self.seen >= self.grace_s

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        if self.overdue():
            raise StopIteration
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "stop_within_batch") -> None:
        trainer.register_op("process_optim_batch", self)
