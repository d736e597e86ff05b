"""A full file system stops a run cleanly, not with a SIGBUS or a traceback.

TorchRL and TensorDict write checkpoints and memmapped replay buffers into sparse memory-mapped
files: the file's size is set first, its pages are written later, and a page the file system
cannot back kills the process with SIGBUS (exit 135, no message). So the space a write needs is
checked before it starts (:func:`reserve`; memmapped buffers also get their blocks allocated
with ``posix_fallocate``), and a "no space left" error from any other write (logs,
``summary.json``) is recognised (:func:`out_of_space`) and reported in one line by the run
(``rlrun/run.py``): the folder, the free space, what was being written and the newest intact
checkpoint, from which ``resume=`` continues once there is space.

The check cannot see other processes filling the disk between it and the write; a margin of
:data:`MARGIN` covers the files written beside the payload (manifests, checksums).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import torch
from tensordict import is_tensor_collection

from rlrun.errors import RunError

MARGIN = 1.05, 256 * 1024  # factor and bytes added to a payload's size
BLOCK = 4096  # what ext4, xfs and tmpfs allocate at least per file
FULL = (errno.ENOSPC, errno.EDQUOT)
FULL_MESSAGES = ("No space left on device", "Disk quota exceeded")


class DiskFull(RunError):
    """A write that did not fit (or would not have): ``what`` in ``folder``."""

    def __init__(self, folder: Path, what: str, need: int | None = None) -> None:
        self.folder, self.what, self.need = folder, what, need
        super().__init__(f"no space left in {folder} for {what}")


def free_bytes(path: Path) -> int:
    """Free bytes for an unprivileged writer on the file system that holds ``path``."""
    path = path.absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def size_text(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError


def reserve(folder: Path, need: int, what: str) -> None:
    """Refuse (:class:`DiskFull`) to write about ``need`` bytes of ``what`` into ``folder``
    when the file system has less free (with :data:`MARGIN`)."""
    factor, extra = MARGIN
    if free_bytes(folder) < need * factor + extra:
        raise DiskFull(folder, what, need)


def payload_bytes(value: Any, rows: int = 1) -> int:
    """Bytes on disk of the tensors in a state dict (nested mappings, sequences, TensorDicts),
    each ``rows`` times over in a file of its own, rounded up to whole :data:`BLOCK` s."""
    if isinstance(value, torch.Tensor):
        return -(-value.numel() * value.element_size() * rows // BLOCK) * BLOCK
    if is_tensor_collection(value):
        leaves = value.values(include_nested=True, leaves_only=True)
        return sum(payload_bytes(t, rows) for t in leaves)
    if isinstance(value, Mapping):
        return sum(payload_bytes(v, rows) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(payload_bytes(v, rows) for v in value)
    return 0


def checkpoint_bytes(components: Iterable[Any]) -> int:
    """What a checkpoint of ``components`` writes: a replay buffer's whole storage (TorchRL
    dumps it at full capacity), the tensors of every other component's state dict."""
    total = 0
    for component in components:
        storage = getattr(getattr(component, "_storage", None), "_storage", None)
        if storage is not None:
            total += payload_bytes(storage)
        elif hasattr(component, "state_dict"):
            total += payload_bytes(component.state_dict())
    return total


def allocate(files: Iterable[Path]) -> None:
    """Give sparse files their blocks now, so a full disk says ENOSPC here rather than SIGBUS
    at a later write (file systems without ``fallocate`` keep them sparse)."""
    for file in files:
        fd = os.open(file, os.O_RDWR)
        try:
            os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
        except OSError as err:
            if err.errno in FULL:
                raise
        finally:
            os.close(fd)


def out_of_space(err: BaseException) -> bool:
    """Whether ``err`` (or what caused it) is a full file system or quota."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, DiskFull):
            return True
        if isinstance(cause, OSError) and cause.errno in FULL:
            return True
        if any(text in str(cause) for text in FULL_MESSAGES):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def written(err: BaseException, run_dir: Path) -> str:
    """What a failed write was writing, for the one-line message."""
    if isinstance(err, DiskFull):
        return err.what
    name = getattr(err, "filename", None)
    if name is None:  # TensorDict's memmaps: "unable to write to file <path>: ..."
        match = re.search(r"<([^<>]+)>", str(err))
        name = match and match.group(1)
    if name:
        try:
            return str(Path(name).absolute().relative_to(run_dir.absolute()))
        except ValueError:
            return str(name)
    return "its files"
