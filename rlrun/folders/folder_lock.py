"""One writer per run or sweep folder: a lock that dies with its process.

A run (fresh or ``resume=``) holds ``<run folder>/.rlrun.lock`` while it writes there; a sweep's
driver holds its sweep folder's, and each job its own folder's. The lock is a POSIX record lock
(``lockf``) on that file: the kernel drops it when the holding process ends however it ends
(SIGKILL, the OOM killer; on NFS, the server once the client's lease lapses), and, unlike
``flock``, processes forked from the holder (collector or env workers) do not inherit it. So no
stale lock is left behind, and the folder is resumable at once. The file's text names the holder
(command, host, pid, since when) for the one-line refusal a second writer gets.

Readers (``rlrun eval``, ``export``, ``report``, ``rlrun.load``) never take the lock. Nothing
heavy is imported here: the console script takes the lock before Hydra writes into the folder.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import socket
import sys
import time
from datetime import datetime
from pathlib import Path

from rlrun.errors import ConfigError

LOCK_FILE = ".rlrun.lock"
# file systems without locks (Lustre mounted without -o flock): the folder is used unlocked
NO_LOCKS = (errno.ENOLCK, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL)
HELD = (errno.EACCES, errno.EAGAIN)  # what lockf says when another process holds the lock
log = logging.getLogger(__name__)
_held: dict[Path, int] = {}  # folder -> descriptor of this process's lock on it


def _holder(fd: int, wait_s: float = 2.0) -> str:
    """Who holds the lock, as its file says (written by :func:`hold`). A holder writes its
    description just after it takes the lock: until then the file is empty, or still names its
    previous, ended holder; both are read again for up to ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            saved = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            where = f"host {saved['host']}, pid {saved['pid']}, since {saved['since']}"
            if saved["host"] != socket.gethostname() or _alive(saved["pid"]):
                return f"{saved['command']} ({where})"
        except (OSError, ValueError, KeyError, TypeError):
            pass
        if time.monotonic() >= deadline:
            return "another process"
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True


def held_by(folder: Path) -> str | None:
    """The holder of ``folder``'s lock when another process holds it, else None (the lock is
    tried, not kept: a check before anything is written)."""
    folder = folder.resolve()
    if folder in _held:  # (closing any descriptor of the file would drop a POSIX lock)
        return None
    try:
        fd = os.open(folder / LOCK_FILE, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # no lock file: nobody ever held it
        return None
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None
    except OSError as err:
        if err.errno in HELD:
            return _holder(fd)
        if err.errno in NO_LOCKS:
            return None
        raise
    finally:
        os.close(fd)


def refusal(folder: Path, holder: str, what: str) -> ConfigError:
    """The one line a second writer gets: who holds the folder, and what to do."""
    todo = "then resume it" if what == "resume" else "or give this one another folder"
    return ConfigError(
        f"{folder} is in use by {holder}; a second {what} there would write into the same "
        f"files. Wait for it to end, or stop it (Ctrl-C or kill -TERM: it saves a checkpoint), "
        f"{todo}."
    )


def hold(folder: Path, what: str, wait_s: float = 0.0, command: list[str] | None = None) -> None:
    """Hold ``folder`` for this process until :func:`release` or the process ends. Refused in one
    line naming the holder when another process holds it (after waiting up to ``wait_s``: a
    requeued job whose preempted predecessor is still on its way out). ``command``: the
    arguments a refusal shows (default: this process's)."""
    folder = folder.resolve()
    if folder in _held:
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as err:
            if err.errno in HELD and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            holder = _holder(fd) if err.errno in HELD else ""
            os.close(fd)
            if holder:
                raise refusal(folder, holder, what) from None
            if err.errno not in NO_LOCKS:
                raise
            log.warning("%s: this file system has no file locks; not locked", folder)
            return
    me = {
        "command": " ".join(["rlrun", *(sys.argv[1:] if command is None else command)]),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(me).encode(), 0)
    _held[folder] = fd


def release(folder: Path) -> None:
    """Let ``folder`` go (a job that ends in a process that goes on: a sweep's next job)."""
    fd = _held.pop(folder.resolve(), None)
    if fd is not None:
        os.close(fd)
