"""What a config names by dotted path (``_target_``, ``collector.policy_factory``), imported the
way Hydra's ``_target_`` lookup does it (the longest importable module, then attributes), with
one line that says why when it cannot be. Light: the console script checks every path before
anything heavy is imported; builders resolve the same paths when they build.
"""

from __future__ import annotations

import functools
import gc
import importlib
import importlib.abc
import importlib.util
import sys
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from rlrun.compat.cpython import spawning
from rlrun.errors import ConfigError


def _lookup(path: str) -> tuple[Any, str | None]:
    """``(object, None)`` for ``pkg.module.name``, or ``(None, why not)``."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and not module_name.startswith(err.name):
                return None, f"importing {module_name} failed: {err}"  # a dependency is missing
            continue
        except Exception as err:  # the module itself fails to import
            return None, f"importing {module_name} failed: {type(err).__name__}: {err}"
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return None, f"{module_name} has no attribute {attr}"
            obj = getattr(obj, attr)
        return obj, None
    return None, f"no module named {parts[0]}"


@functools.cache
def importable(path: str) -> str | None:
    """None if ``path`` imports, else why not."""
    return _lookup(path)[1]


def resolve(path: str, key: str) -> Any:
    """The object ``path`` names; a ConfigError naming ``key`` when it does not import."""
    found, why = _lookup(path)
    if why is not None:
        raise ConfigError(
            f"{key}={path} cannot be imported: {why}. Install its package, or put its folder "
            "on PYTHONPATH."
        )
    return found


# Optional packages TorchRL probes as its modules are imported, which rlrun imports itself where a
# run uses them: Ray (Ray workers and learners), MuJoCo (gymnasium's MuJoCo envs, when made),
# torchsnapshot (checkpoint.backend=torchsnapshot).
TORCHRL_PROBES = ("ray", "mujoco", "torchsnapshot")


def unused_probes(ray: bool) -> list[str]:
    """The packages of ``TORCHRL_PROBES`` a process of rlrun's own imports TorchRL without: all
    but Ray where the process may use Ray (its workers or learners, or a sweep's jobs), whose
    TorchRL modules need the probe to have found it."""
    return [p for p in TORCHRL_PROBES if p != "ray" or not ray]


class _Unfound(importlib.abc.MetaPathFinder):
    """``import <package>`` fails, as if it were not installed, for the packages in ``names``."""

    def __init__(self, names: Collection[str]) -> None:
        self.names = set(names)

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.partition(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)


@contextmanager
def unprobed(packages: Collection[str]) -> Iterator[None]:
    """Imports in the block do not find ``packages``. TorchRL probes optional packages as its
    modules are imported: ``find_spec("ray")`` then ``import ray`` (for its Ray replay buffer
    and collectors), ``find_spec("mujoco.mjx")``, which imports MuJoCo and its GL context,
    ``import torchsnapshot``; a run's first batch came 0.55 s sooner without them (2026-11-27,
    2 cores, ``rlrun +experiment=ppo``: ``first_batch_s`` 3.72 -> 3.17). A package already
    imported stays visible, and after the block every package imports as usual (gymnasium's
    MuJoCo envs import MuJoCo themselves when made)."""
    hidden = {name for name in packages if name not in sys.modules}
    if not hidden:
        yield
        return
    real_find_spec = importlib.util.find_spec

    def find_spec(name: str, package: str | None = None) -> Any:
        if name.partition(".")[0] in hidden:
            return None
        return real_find_spec(name, package)

    finder = _Unfound(hidden)
    importlib.util.find_spec = find_spec
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        importlib.util.find_spec = real_find_spec
        sys.meta_path.remove(finder)


@contextmanager
def collection_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while the block imports torch, tensordict and
    TorchRL, and what the block loaded then frozen out of the collector's later passes
    (``gc.freeze``). Their imports make about 600,000 long-lived objects, and each full pass
    walks all of them: 6 full passes took 0.5 s of the 3.5 s that importing ``rlrun.run`` takes
    (2026-11-28, 2 cores), and a 1024-frame ``rlrun +experiment=ppo`` took a median 4.56 s of
    wall time paused against 5.78 s not (12 paired runs, median ratio 0.85). Modules stay loaded
    for the process's life anyway; what this keeps is the cyclic garbage the imports leave
    behind (a run's peak memory 392 MiB against 382). Frozen only where the block imported
    something: a sweep's later jobs, whose imports are done, freeze nothing of an earlier
    job's. After the block the collector runs as usual (inside a block already paused, the
    outer block's end decides)."""
    if not gc.isenabled():
        yield
        return
    loaded = len(sys.modules)
    gc.disable()
    try:
        yield
    finally:
        if len(sys.modules) > loaded:
            gc.freeze()
        gc.enable()


def collection_paused_while_spawning() -> None:
    """In a worker process that multiprocessing spawns (a collector's workers; ParallelEnv's once
    CUDA is in the run), what :func:`collection_paused` does for the console script: Python's
    garbage collector off while the worker imports torch, tensordict and TorchRL to unpickle
    its target, then what they loaded frozen and the garbage collector on again as the target
    starts (a thread waits for that, in steps of 10 ms, then ends: multiprocessing offers no
    hook there in a spawned process). Called where such a worker runs its parent's main module
    again: the console script. Each worker of a 1024-frame ``rlrun +experiment=ppo
    collector=multi_sync collector.num_workers=2`` took 6.4 CPU seconds unpaused against 4.3
    paused (mean of 6 workers each, 3 paired runs, 2026-11-28, 2 cores)."""
    if spawning() and gc.isenabled():
        gc.disable()
        threading.Thread(target=_resume_when_spawned, name="rlrun-gc", daemon=True).start()


def _resume_when_spawned() -> None:
    """Once the spawned worker runs its target: freeze what it imported, then turn the garbage
    collector on again."""
    while spawning():
        time.sleep(0.01)
    gc.freeze()
    gc.enable()


def import_unprobed(module: str) -> ModuleType:
    """``module``, imported (with TorchRL, if it imports it first) without TorchRL's probes of
    the optional packages (:func:`unprobed`): for a command in a process of its own that uses
    none of them (``rlrun eval``, ``export``, ``record``); ``rlrun.load`` in a user's Python
    session leaves their packages as they are), the garbage collector paused meanwhile
    (:func:`collection_paused`)."""
    with unprobed(TORCHRL_PROBES), collection_paused():
        return importlib.import_module(module)
