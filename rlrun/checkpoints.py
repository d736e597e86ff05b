"""Checkpoints from the ``checkpoint`` config group: save, rotate, find and load them safely.

Both backends save the components the Trainer itself registers on a ``torchrl.checkpoint``
``Checkpoint`` (policy, loss module with critic and target networks, optimizer, collector counters,
replay buffer, ``register_module``'d hooks, trainer counters), plus the global RNG state and the
composed config:

- ``torch``: ``torchrl.checkpoint.Checkpoint`` with ``CheckpointRotation``, driven by the Trainer.
  Its default payload is tensors + a JSON schema (no pickle), written to a staging folder and
  renamed into place, so a crash mid-save leaves the previous checkpoint untouched.
- ``torchsnapshot``: the same components through ``torchsnapshot.Snapshot`` (optional extra),
  written to a staging folder and renamed into place the same way, rotated by rlrun.

Loading never runs pickled code: payloads go through ``torch.load(weights_only=True)``, which
refuses anything but tensors and plain containers; rlrun turns that refusal into a ConfigError.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torchrl.checkpoint import Checkpoint, CheckpointError, CheckpointRotation, GlobalRNGState
from torchrl.trainers import Trainer

from rlrun.errors import ConfigError, choose
from rlrun.loggers import redact_secrets

BACKENDS = ("torch", "torchsnapshot", "none")
CHECKPOINT_DIR = "checkpoints"
PREFIX = "checkpoint"
BEST = "best"
NEVER = 2**62
log = logging.getLogger(__name__)


def composed_config(cfg: DictConfig) -> dict[str, Any]:
    """The run's config as plain JSON values, secrets removed (stored in each manifest)."""
    return redact_secrets(OmegaConf.to_container(cfg, resolve=True))


class RNGState(GlobalRNGState):
    """TorchRL's global RNG state, restorable on another kind of machine.

    A run saved on a GPU holds the CUDA generators' state; resumed with ``device=cpu`` where no
    CUDA exists, TorchRL refuses ("CUDA RNG state but CUDA is unavailable"). The CPU, NumPy and
    Python generators are restored as saved; accelerator generators only where this process
    has the same ones (otherwise they keep the seed's state, which is logged).
    """

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        state = dict(state_dict)
        cuda = state.get("torch_cuda")
        if cuda is not None and len(cuda) != torch.cuda.device_count():
            log.info(
                "checkpoint holds the RNG state of %d CUDA device(s), this process sees %d: "
                "CUDA generators keep their seeded state",
                len(cuda),
                torch.cuda.device_count(),
            )
            del state["torch_cuda"]
        super().load_state_dict(state)


def trainer_checkpoint_kwargs(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Keyword arguments for ``torchrl.trainers.Trainer``: what to save, where and how often.

    Only the ``torch`` backend is driven by the Trainer; ``torchsnapshot`` saves through
    :class:`SnapshotSaver` (a hook), ``none`` saves nothing.
    """
    ckpt = cfg.checkpoint
    backend = choose("checkpoint.backend", ckpt.backend, BACKENDS)
    if ckpt.keep < 1:
        raise ConfigError(f"checkpoint.keep={ckpt.keep} must be at least 1.")
    if backend != "torch":
        return {"save_trainer_interval": NEVER}
    config = composed_config(cfg)
    return {
        "checkpoint": Checkpoint(rng=RNGState()),
        "checkpoint_rotation": CheckpointRotation(
            run_dir / CHECKPOINT_DIR, keep_last=ckpt.keep, prefix=PREFIX
        ),
        "checkpoint_metadata": lambda trainer: {"config": config},
        # the Trainer saves when *more than* the interval passed; rlrun means "at least"
        "save_trainer_interval": ckpt.every_frames - 1 if ckpt.every_frames else NEVER,
    }


def checkpoint_components(trainer: Trainer) -> dict[str, Any]:
    """Everything a checkpoint restores, by name: the Trainer's own set plus the RNG state."""
    checkpoint = trainer.checkpoint or trainer._sync_checkpoint_components(Checkpoint())
    components = dict(checkpoint.components)
    components.setdefault("rng", RNGState())
    return components


class SnapshotSaver:
    """``checkpoint.backend=torchsnapshot``: ``torchsnapshot.Snapshot`` of the Trainer's
    components every ``every_frames`` frames, at the end of the run and when it is stopped."""

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        try:
            import torchsnapshot
        except ImportError:
            raise ConfigError(
                "checkpoint.backend=torchsnapshot needs the torchsnapshot package: "
                "pip install 'rlrun[torchsnapshot]' (or use checkpoint.backend=torch)."
            ) from None
        self.torchsnapshot = torchsnapshot
        logging.getLogger("torchsnapshot").setLevel(logging.WARNING)
        self.config = composed_config(cfg)
        self.every = cfg.checkpoint.every_frames or NEVER
        self.keep = cfg.checkpoint.keep
        self.directory = run_dir / CHECKPOINT_DIR
        self.trainer: Trainer | None = None
        self.last_saved = -1

    def app_state(self) -> dict[str, Any]:
        return {k.replace(".", "__"): v for k, v in checkpoint_components(self.trainer).items()}

    def save(self) -> Path:
        """Take a snapshot in a staging folder, rename it into place, drop the oldest."""
        frames = int(self.trainer.collected_frames)
        destination = self.directory / f"{PREFIX}-{frames:012d}"
        stage = self.directory / f".{destination.name}.stage-{uuid.uuid4().hex}"
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self.torchsnapshot.Snapshot.take(str(stage), app_state=self.app_state())
            (stage / "config.json").write_text(json.dumps(self.config, indent=1))
            if destination.exists():
                shutil.rmtree(destination)
            os.replace(stage, destination)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        for old in snapshot_dirs(self.directory)[: -self.keep]:
            shutil.rmtree(old)
        self.last_saved = frames
        return destination

    def maybe_save(self) -> None:
        frames = self.trainer.collected_frames
        if frames - max(self.last_saved, self.trainer._last_save) >= self.every:
            self.trainer._last_save = frames
            self.save()

    def save_final(self) -> None:
        """End of the run or a stop: save unless this frame count is already saved."""
        if self.trainer.collected_frames != self.last_saved:
            self.save()

    def load(self, path: Path) -> None:
        self.torchsnapshot.Snapshot(str(path)).restore(app_state=self.app_state())
        self.last_saved = self.trainer.collected_frames
        self.trainer.collector.update_policy_weights_()

    def register(self, trainer: Trainer) -> None:
        self.trainer = trainer
        trainer.register_op("post_steps", self.maybe_save)


def snapshot_dirs(directory: Path) -> list[Path]:
    """Finished torchsnapshot checkpoints (staging folders excluded), oldest first."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f"{PREFIX}-*") if (p / ".snapshot_metadata").is_file())


def find_checkpoint(path: Path, backend: str) -> Path | None:
    """``path`` may be a checkpoint or a run folder; in a run folder, its latest checkpoint."""
    if (path / CHECKPOINT_DIR).is_dir():
        path = path / CHECKPOINT_DIR
    if Checkpoint.is_checkpoint(path) or (path / ".snapshot_metadata").is_file():
        return path
    if backend == "torchsnapshot":
        found = snapshot_dirs(path)
        return found[-1] if found else None
    return CheckpointRotation(path, keep_last=1, prefix=PREFIX).latest()


def load_checkpoint(trainer: Trainer, path: Path, saver: SnapshotSaver | None) -> None:
    """Restore every component from ``path``; refuse payloads that would run code on load."""
    try:
        if saver is not None:
            saver.load(path)
        else:
            trainer.load_from_file(path)
    except (pickle.UnpicklingError, CheckpointError) as err:
        cause: BaseException | None = err
        while cause is not None and not isinstance(cause, pickle.UnpicklingError):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise ConfigError(f"resume={path}: not a loadable checkpoint: {err}") from None
        raise ConfigError(
            f"resume={path}: refused to load this checkpoint: it holds pickled objects that "
            "would run code on load (torch.load with weights_only=True rejected them). "
            "Only load checkpoints you trust; rlrun writes tensor-only ones."
        ) from None


def save_best(trainer: Trainer, run_dir: Path, eval_return: float) -> None:
    """Keep ``checkpoints/best``: a copy of the run at its best evaluation return (atomic)."""
    if trainer.checkpoint is None:
        return
    trainer.checkpoint.save(
        run_dir / CHECKPOINT_DIR / BEST,
        metadata={"eval_return": eval_return, "collected_frames": trainer.collected_frames},
    )
