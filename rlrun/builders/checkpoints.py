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

Every checkpoint folder (both backends, ``checkpoints/best`` too) holds ``checksums.json``: the
size and SHA-256 of each of its files, written into the staging folder before it is renamed into
place, so a checkpoint is either absent or complete with its checksums. ``find_checkpoint``
checks them before anything is loaded and resumes from the newest intact checkpoint, warning
about each damaged newer one; a checkpoint without checksums (an older rlrun's) counts as damaged.

Before a save, the free space is checked against the size of what it writes
(``rlrun/builders/disk.py``): on a full file system the save is refused in one line, where
TorchRL's sparse memmapped files would end the process with SIGBUS.

Loading never runs pickled code: payloads go through ``torch.load(weights_only=True)``, which
refuses anything but tensors and plain containers; rlrun turns that refusal into a ConfigError.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf
from torchrl.checkpoint import Checkpoint, CheckpointError, CheckpointRotation, GlobalRNGState
from torchrl.trainers import Trainer

from rlrun.builders.disk import checkpoint_bytes, free_bytes, reserve, size_text, written
from rlrun.compat.torchrl import last_save, set_last_save, trainer_checkpoint
from rlrun.config import redact_secrets
from rlrun.errors import ConfigError, RunError
from rlrun.folders.checkpoint_files import (
    BEST,
    CHECKPOINT_DIR,
    PREFIX,
    checkpoint_dirs,
    damage,
    find_checkpoint,
    staged,
)

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


class FreshWorkers:
    """The checkpoint component standing in for ``collector=ray``'s collector: nothing of its
    workers is saved (their envs' episodes in progress, their policy copies), so a checkpoint can
    also be taken after a worker died. A resumed run's workers start new episodes and receive
    the restored weights."""

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        pass


def collector_component(cfg: DictConfig) -> dict[str, Any]:
    """What a checkpoint saves as ``collector`` where it is not the collector's own state."""
    return {"collector": FreshWorkers()} if cfg.collector.kind == "ray" else {}


class VerifiedCheckpoint(Checkpoint):
    """TorchRL's ``Checkpoint`` whose folders also hold ``checksums.json``.

    TorchRL saves (its own stage-and-rename) to a hidden folder beside the destination;
    rlrun adds the checksums there and renames it into place (:func:`staged`). Hidden folders
    are seen neither by ``CheckpointRotation`` nor by ``find_checkpoint``.
    """

    def save(self, path: str | Path, **kwargs: Any) -> Path:
        if (kwargs.get("format") or self.format) != "directory":
            raise ValueError("rlrun writes directory checkpoints only (checksums per file).")
        destination = Path(path).expanduser().absolute()  # as TorchRL's own save resolves it
        need = checkpoint_bytes(self.components.values())
        reserve(destination.parent, need, f"checkpoint {destination.name} ({size_text(need)})")
        with staged(destination) as stage:
            super().save(stage, **kwargs)
        return destination


def trainer_checkpoint_kwargs(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Keyword arguments for ``torchrl.trainers.Trainer``: what to save, where and how often.

    Only the ``torch`` backend is driven by the Trainer; ``torchsnapshot`` saves through
    :class:`SnapshotSaver` (a hook), ``none`` saves nothing.
    """
    ckpt = cfg.checkpoint
    if ckpt.backend != "torch":
        return {"save_trainer_interval": NEVER}
    config = composed_config(cfg)
    return {
        "checkpoint": VerifiedCheckpoint(rng=RNGState(), **collector_component(cfg)),
        "checkpoint_rotation": CheckpointRotation(
            run_dir / CHECKPOINT_DIR, keep_last=ckpt.keep, prefix=PREFIX
        ),
        "checkpoint_metadata": lambda trainer: {"config": config},
        # the Trainer saves when *more than* the interval passed; rlrun means "at least"
        "save_trainer_interval": ckpt.every_frames - 1 if ckpt.every_frames else NEVER,
    }


def checkpoint_components(trainer: Trainer) -> dict[str, Any]:
    """Everything a checkpoint restores, by name: the Trainer's own set plus the RNG state."""
    components = dict(trainer_checkpoint(trainer).components)
    components.setdefault("rng", RNGState())
    return components


class SnapshotSaver:
    """``checkpoint.backend=torchsnapshot``: ``torchsnapshot.Snapshot`` of the Trainer's
    components every ``every_frames`` frames (a ``post_steps`` hook), at the end of the run and
    when it is stopped (a ``shutdown`` hook: the Trainer runs those before it shuts the
    collector down, whose state cannot be read afterwards)."""

    def __init__(self, cfg: DictConfig, run_dir: Path) -> None:
        import torchsnapshot  # installed: checked before the run (rlrun/validation.py)

        self.torchsnapshot = torchsnapshot
        logging.getLogger("torchsnapshot").setLevel(logging.WARNING)
        self.config = composed_config(cfg)
        self.collector = collector_component(cfg)
        self.every = cfg.checkpoint.every_frames or NEVER
        self.keep = cfg.checkpoint.keep
        self.directory = run_dir / CHECKPOINT_DIR
        self.trainer: Trainer | None = None
        self.last_saved = -1

    def app_state(self) -> dict[str, Any]:
        components = {**checkpoint_components(self.trainer), **self.collector}
        return {k.replace(".", "__"): v for k, v in components.items()}

    def save(self) -> Path:
        """Take a snapshot in a staging folder, add its checksums, rename it into place, drop
        the oldest."""
        frames = int(self.trainer.collected_frames)
        destination = self.directory / f"{PREFIX}-{frames:012d}"
        self.directory.mkdir(parents=True, exist_ok=True)
        need = checkpoint_bytes(checkpoint_components(self.trainer).values())
        reserve(self.directory, need, f"checkpoint {destination.name} ({size_text(need)})")
        with staged(destination) as stage:
            self.torchsnapshot.Snapshot.take(str(stage), app_state=self.app_state())
            (stage / "config.json").write_text(json.dumps(self.config, indent=1))
        for old in checkpoint_dirs(self.directory)[: -self.keep]:
            shutil.rmtree(old)
        self.last_saved = frames
        return destination

    def maybe_save(self) -> None:
        frames = self.trainer.collected_frames
        if frames - max(self.last_saved, last_save(self.trainer)) >= self.every:
            set_last_save(self.trainer, frames)
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
        trainer.register_op("shutdown", self.save_final)


def save_now(trainer: Trainer, saver: SnapshotSaver | None) -> bool:
    """Checkpoint the run as it is after its last complete batch (a run stopped by a failure
    outside its loop); False when the run saves no checkpoints (``checkpoint.backend=none``)."""
    if saver is not None:
        saver.save_final()
        return True
    if trainer.checkpoint is None:
        return False
    trainer.save_trainer(force_save=True)
    return True


def disk_full(err: BaseException, run_dir: Path, backend: str, resume: Path) -> RunError:
    """The one line a run stopped by a full file system ends with: where, how much is free,
    what it was writing, and the checkpoint ``rlrun resume=`` continues from."""
    try:
        intact = find_checkpoint(run_dir, backend) if backend != "none" else None
    except ConfigError:
        intact = None
    newest = f"the newest intact checkpoint is {intact}" if intact else "no checkpoint yet"
    todo = f"rlrun resume={resume}" if intact else "start it again in a new folder"
    return RunError(
        f"no space left in {run_dir} ({size_text(free_bytes(run_dir))} free) while writing "
        f"{written(err, run_dir)}; {newest}. Free some space, then {todo}."
    )


READ_ATTEMPTS = 5  # a training run may rotate the chosen checkpoint away this many times


@contextmanager
def held_for_reading(choose: Callable[[], Path], backend: str) -> Iterator[tuple[Path, Path]]:
    """The checkpoint ``choose()`` picks, held while a reader (``rlrun eval``, ``export``,
    ``rlrun.load``) loads it, though its run may still be training and rotate it away: its files
    hard-linked into a hidden folder beside it (no copy, and hidden folders are never rotated),
    their checksums verified there. Yields the checkpoint and its held copy; picks again when the
    checkpoint went before it was held. The reader never takes the run's lock."""
    for _ in range(READ_ATTEMPTS):
        path = choose()
        reader = Path(tempfile.mkdtemp(prefix=".read-", dir=path.parent))
        held = reader / path.name  # what errors name: the checkpoint's own name
        try:
            for file in sorted(path.rglob("*")):
                if file.is_file():
                    (held / file.relative_to(path)).parent.mkdir(parents=True, exist_ok=True)
                    os.link(file, held / file.relative_to(path))
            intact = damage(held, backend) is None
        except FileNotFoundError:  # rotated away while linked
            intact = False
        try:
            if intact:
                yield path, held
                return
        finally:
            shutil.rmtree(reader, ignore_errors=True)
    raise RunError(
        f"{path.parent}: each newest checkpoint was replaced before it could be read "
        f"({READ_ATTEMPTS} times); try again, or name one with checkpoint=best."
    )


def load_checkpoint(trainer: Trainer, path: Path, saver: SnapshotSaver | None) -> None:
    """Restore every component from ``path`` (as ``find_checkpoint`` verified it); refuse
    payloads that would run code on load."""
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


def saved_config(path: Path) -> dict[str, Any]:
    """The composed config checkpoint ``path`` was saved with: its manifest's, or its run
    folder's (``checkpoints/best`` carries none); empty if neither is readable."""
    try:
        return json.loads((path / "manifest.json").read_text())["metadata"]["config"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    for run_dir in (path.parent.parent, path.parent):
        config = run_dir / ".hydra" / "config.yaml"
        if config.is_file():
            return OmegaConf.to_container(OmegaConf.load(config), resolve=False)
    return {}


def network_differences(saved: dict[str, Any], cfg: DictConfig) -> list[str]:
    """``algo.name`` and the ``policy.*`` keys whose values differ between a saved config and
    ``cfg``, as ``key is A there, B here``: what makes two runs' networks differ."""
    here = OmegaConf.to_container(cfg, resolve=True)
    keys = ["algo.name", *(f"policy.{k}" for k in {**here["policy"], **saved.get("policy", {})})]
    differences = []
    for key in keys:
        group, name = key.split(".", 1)
        there, mine = saved.get(group, {}).get(name), here[group].get(name)
        if there != mine:
            differences.append(f"{key} is {_shown(there)} there, {_shown(mine)} here")
    return differences


def _shown(value: Any) -> str:
    """A config value as the command line writes it (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) or value is None else str(value)


def load_networks(trainer: Trainer, path: Path, cfg: DictConfig) -> None:
    """``init_from``: the loss module of checkpoint ``path`` (actor, critics, their targets,
    a learned temperature) into this run's, then to the collector's policy; optimiser, buffer
    and counters start fresh. Refused in one line naming the algo and policy keys that differ
    (e.g. ``policy.state_dependent_std``, whose default an algorithm's preset may have
    changed since the other run)."""
    try:
        VerifiedCheckpoint(loss_module=trainer.loss_module).load(path, components=["loss_module"])
    except (pickle.UnpicklingError, CheckpointError, RuntimeError, KeyError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        differences = network_differences(saved_config(path), cfg)
        why = "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")
        fix = f"{why} (give this run the same)" if differences else first
        raise ConfigError(
            f"init_from={path}: its networks do not fit this run's (same algo= and policy "
            f"keys needed): {fix}"
        ) from None
    trainer.collector.update_policy_weights_()


def save_best(trainer: Trainer, run_dir: Path, eval_return: float) -> None:
    """Keep ``checkpoints/best``: a copy of the run at its best evaluation return (atomic,
    with checksums)."""
    if trainer.checkpoint is None:
        return
    trainer.checkpoint.save(
        run_dir / CHECKPOINT_DIR / BEST,
        metadata={"eval_return": eval_return, "collected_frames": trainer.collected_frames},
    )
