"""Checkpoint folders on disk: their names, their checksums, and which one ``resume=`` finds.

A checkpoint is a folder ``checkpoints/checkpoint-<frames>`` (or ``checkpoints/best``) whose
``checksums.json`` lists the size and SHA-256 of every other file in it. It is written into a
hidden staging folder and renamed into place with its checksums (:func:`staged`), so a folder
under a checkpoint's name is complete; :func:`find_checkpoint` verifies them before anything is
loaded. Nothing here imports torch: the console script finds and checks checkpoints before a run
is built (``resume=``, ``rlrun eval``); ``rlrun/builders/checkpoints.py`` saves and loads them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlrun import __version__
from rlrun.errors import ConfigError

CHECKPOINT_DIR = "checkpoints"
PREFIX = "checkpoint"
BEST = "best"
CHECKSUMS = "checksums.json"
NAME = re.compile(rf"{PREFIX}-\d+")
# the file each backend's checkpoints always hold; its presence tells them apart
MARKERS = {"torch": "manifest.json", "torchsnapshot": ".snapshot_metadata"}
VERSION_FILE = "rlrun.json"  # the rlrun that wrote it (checkpoints before 2026-11-27 have none)
log = logging.getLogger(__name__)


def sha256(file: Path) -> str:
    with file.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def data_files(folder: Path) -> list[str]:
    """Every file below ``folder`` except the checksums themselves, as sorted relative paths."""
    files = (p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    return sorted(f for f in files if f != CHECKSUMS)


def write_checksums(folder: Path) -> None:
    """``folder/checksums.json``: size and SHA-256 of every other file in the folder."""
    files = {
        name: {"size": (folder / name).stat().st_size, "sha256": sha256(folder / name)}
        for name in data_files(folder)
    }
    text = json.dumps({"algorithm": "sha256", "files": files}, indent=1)
    (folder / CHECKSUMS).write_text(text + "\n")


def damage(folder: Path, backend: str) -> str | None:
    """What is wrong with the checkpoint in ``folder`` (one short phrase), or None when every
    file it lists is there with its size and SHA-256 and nothing unlisted was added."""
    try:
        listed = json.loads((folder / CHECKSUMS).read_text())["files"]
        sizes = {name: int(entry["size"]) for name, entry in listed.items()}
        hashes = {name: str(entry["sha256"]) for name, entry in listed.items()}
    except FileNotFoundError:
        return f"no {CHECKSUMS}, so its bytes cannot be verified (saved by an older rlrun?)"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return f"{CHECKSUMS} is unreadable"
    for name, size in sizes.items():
        if Path(name).is_absolute() or ".." in Path(name).parts:
            return f"{CHECKSUMS} names a file outside the checkpoint: {name}"
        file = folder / name
        if not file.is_file():
            return f"{name}: missing"
        if file.stat().st_size != size:
            return f"{name}: size {file.stat().st_size}, expected {size}"
    unlisted = [name for name in data_files(folder) if name not in sizes]
    if unlisted:
        more = f" (and {len(unlisted) - 1} more)" if len(unlisted) > 1 else ""
        return f"{unlisted[0]}: not in {CHECKSUMS}{more}"
    marker = MARKERS.get(backend, MARKERS["torch"])
    if marker not in sizes:
        other = next((b for b, m in MARKERS.items() if m in sizes), None)
        if other is not None:
            return f"a {other} checkpoint; resume it with checkpoint.backend={other}"
        return f"not a {backend} checkpoint (no {marker})"
    for name, digest in hashes.items():
        if sha256(folder / name) != digest:
            return f"{name}: SHA-256 differs from {CHECKSUMS} (bytes changed)"
    return None


def publish(stage: Path, destination: Path) -> None:
    """Rename the finished ``stage`` folder to ``destination``, replacing an older one there."""
    backup = destination.parent / f".{destination.name}.old-{uuid.uuid4().hex}"
    if destination.exists():
        os.replace(destination, backup)
    try:
        os.replace(stage, destination)
    except BaseException:
        if backup.exists() and not destination.exists():
            os.replace(backup, destination)
        raise
    finally:
        shutil.rmtree(backup, ignore_errors=True)


@contextmanager
def staged(destination: Path) -> Iterator[Path]:
    """A hidden folder beside ``destination`` to save a checkpoint into; once the save returns,
    its checksums are added and it is renamed to ``destination``. A crash or an error leaves
    no folder without checksums under a checkpoint's name (hidden folders are never read)."""
    stage = destination.parent / f".{destination.name}.stage-{uuid.uuid4().hex}"
    try:
        yield stage
        (stage / VERSION_FILE).write_text(json.dumps({"rlrun": __version__}) + "\n")
        write_checksums(stage)
        publish(stage, destination)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def checkpoint_dirs(directory: Path) -> list[Path]:
    """The ``checkpoint-<frames>`` folders in ``directory``, damaged ones included (hidden
    staging folders are not), oldest first."""
    if not directory.is_dir():
        return []
    found = [p for p in directory.iterdir() if NAME.fullmatch(p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.removeprefix(f"{PREFIX}-")))


def is_checkpoint_folder(path: Path) -> bool:
    """Whether ``path`` is one checkpoint (a user naming it), damaged or not."""
    names = (CHECKSUMS, "components", *MARKERS.values())
    named = NAME.fullmatch(path.name) is not None
    return path.is_dir() and (named or any((path / n).exists() for n in names))


def find_checkpoint(path: Path, backend: str, key: str = "resume") -> Path | None:
    """The checkpoint ``resume=path`` restores, its checksums verified: ``path`` itself when
    it names one checkpoint (refused if damaged), else the newest intact one in the run folder
    or checkpoints folder ``path`` (a warning for each damaged newer one). None when there is
    no checkpoint at all; a ConfigError when none is intact. ``key``: the setting errors name
    (``rlrun eval`` and ``rlrun export`` load through here too)."""
    if is_checkpoint_folder(path):
        problem = damage(path, backend)
        if problem is not None:
            raise ConfigError(f"{key}={path}: damaged checkpoint: {problem}")
        return readable(path, key)
    folder = path / CHECKPOINT_DIR if (path / CHECKPOINT_DIR).is_dir() else path
    damaged: list[tuple[Path, str]] = []
    for candidate in reversed(checkpoint_dirs(folder)):
        problem = damage(candidate, backend)
        if problem is None:
            for bad, what in damaged:
                log.warning("%s/%s: %s; using %s", folder.name, bad.name, what, candidate.name)
            return readable(candidate, key)
        damaged.append((candidate, problem))
    if damaged:
        found = "; ".join(f"{bad.name}: {what}" for bad, what in damaged)
        raise ConfigError(f"{key}={path}: no intact checkpoint: {found}")
    return None


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


def readable(checkpoint: Path, key: str) -> Path:
    """``checkpoint``, unless a newer rlrun wrote it: its components may hold what this one
    cannot read, so it is refused in one line before anything is loaded."""
    try:
        written_by = str(json.loads((checkpoint / VERSION_FILE).read_text())["rlrun"])
    except (OSError, ValueError, KeyError, TypeError):
        return checkpoint  # an older rlrun's (no file): it reads as before
    if _release(written_by) > _release(__version__):
        raise ConfigError(
            f"{key}={checkpoint}: written by rlrun {written_by}, newer than this one "
            f"({__version__}); load it with rlrun {written_by} or later (pip install -U rlrun, "
            "or git pull in a clone)."
        )
    return checkpoint
