"""The private steps of CPython's own exit that rlrun takes itself, in one place.

Light on purpose (the standard library only): the console script imports it before torch.
"""

from __future__ import annotations

import atexit
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
