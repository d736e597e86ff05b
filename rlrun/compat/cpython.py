"""The private steps of CPython's own that rlrun takes, in one place.

Light on purpose (the standard library only): the console script imports it before torch.
"""

from __future__ import annotations

import atexit
import multiprocessing
import threading


def run_exit_steps() -> None:
    """What the interpreter does first when it exits, in its order: tell the thread pools to stop
    and wait for every thread that is not a daemon, then run the exit handlers, last registered
    first. ``rlrun/cli.py`` then ends the process with ``os._exit``, skipping only the teardown
    that follows (freeing the memory of every module). Private: ``threading._shutdown`` and
    ``atexit._run_exitfuncs``, checked against CPython 3.11 (and run on 3.12.1 and 3.13.0,
    2026-11-27); the public ``sys.exit`` runs them only together with that teardown."""
    threading._shutdown()
    atexit._run_exitfuncs()


def spawning() -> bool:
    """Whether multiprocessing is still starting this process by spawn (or forkserver): the
    steps in which the new process runs its parent's main module again, as ``__mp_main__``, and
    unpickles its target, importing whatever the target needs, before running it. Private:
    ``multiprocessing.current_process()._inheriting``, which ``multiprocessing.spawn._main``
    sets over exactly those steps (CPython 3.11; the same in 3.12.1 and 3.13.0, 2026-11-28); no
    public name tells them apart from the target's run."""
    return bool(getattr(multiprocessing.current_process(), "_inheriting", False))
