"""Each job of a sweep in a process of its own, forked from the process its launcher runs it in
(the sweep's own for the basic launcher, a joblib worker, a submitit job's process), which waits
for it. A job that the OOM killer or a segfault ends is then one failed job, not the end of that
process and of everything in it: the sweep itself (basic), the sibling workers and the whole sweep
(joblib: loky breaks its executor and kills its workers when one dies), the job's result (submitit).

The waiting parent turns a death by signal into a ``JobKilled`` error, ``killed by SIGKILL (out of
memory? ...)``, which it writes into the job's ``summary.json`` and hands to Hydra as the job's
failure (rlrun's sweeper lists it, ``resume=<sweep>`` runs it again). Otherwise the job's return
value or error comes back as if it had run in the parent.

- fork, not spawn: the job's process inherits all that Hydra set up for it (its config, its log
  file, its folder, ``hydra.job.env_set``), and the task's imports (torch, TorchRL) are made once
  per parent, then shared. Measured on 2026-11-25 (2 cores, load about 2): a 4-job tiny sweep
  took 10.4 s this way and 10.1 s with the jobs in rlrun's own process (medians of 4), so about
  0.1 s a job; importing torch and TorchRL, which each job would do without that, took 5.2-5.6 s.
- Stop signals (SIGINT, SIGTERM and submitit's preemption signal) that reach the parent are passed
  on to the job, which stops after its batch as a run does. The job runs in a process group of
  its own, so a terminal's Ctrl-C reaches it once, through its parent; and it gets SIGTERM should
  its parent die. (Under SLURM, which signals every process of a job step, the job may get a
  signal twice: it then stops at once, without its last batch's checkpoint.)
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.rlrun_sweepers.failures import ended_without_result, killed_by, record_failure
from rlrun.builders.imports import unprobed, unused_probes

log = logging.getLogger(__name__)
PRELOADED = "rlrun.run"  # the task's heavy imports, made in the parent and shared by its forks
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class SweepStopped(KeyboardInterrupt):
    """A signal stopped a job of a sweep whose jobs run one after another: the jobs after it are
    not started (the console script says so; ``resume=<sweep>`` runs them)."""


class OwnProcess:
    """A Hydra task function that runs ``task`` in a forked process and waits for it.

    ``stops_sweep``: for launchers that run their jobs one after another in the sweep's process,
    a stop signal also stops the sweep (rlrun's ``SweepStopped``, once the job has stopped)."""

    def __init__(self, task: TaskFunction, stops_sweep: bool = False) -> None:
        self.task = task
        self.stops_sweep = stops_sweep

    def __call__(self, cfg: DictConfig) -> Any:
        # without TorchRL's probes of MuJoCo and torchsnapshot, which rlrun imports itself where
        # a job uses them; Ray's is kept, as any job of the sweep may use Ray
        with unprobed(unused_probes(ray=True)):
            importlib.import_module(PRELOADED)
        with tempfile.TemporaryFile() as outcome:
            code, stops = run_forked(lambda: _run(self.task, cfg, outcome))
            outcome.seek(0)
            ended = outcome.read()
        if not (self.stops_sweep and stops):
            return _ended(ended, code)
        with contextlib.suppress(Exception):  # the job's end is in its summary.json
            _ended(ended, code)
        raise SweepStopped(stops[0])


def run_forked(child: Callable[[], None]) -> tuple[int, list[str]]:
    """``child()`` in a forked process (multiprocessing's: it starts and ends a forked Python
    process cleanly); this one waits for it, passing on the stop signals it gets. Returns the
    child's exit code (negative: the signal that killed it) and the signals passed on."""
    stops = _stop_signals()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stops)  # held until a handler is in place
    here = multiprocessing.current_process()
    process = multiprocessing.get_context("fork").Process(
        target=_child,
        args=(child, here.pid, mask),
        name=here.name,  # the name the job would see
    )
    process.start()
    seen: list[str] = []

    def forward(signum: int, frame: object) -> None:
        seen.append(signal.Signals(signum).name)
        with contextlib.suppress(ProcessLookupError):  # waited for already
            os.kill(process.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in stops}
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        process.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return process.exitcode, seen


def _stop_signals() -> tuple[signal.Signals, ...]:
    """The signals that stop a run (rlrun.run.stop_on_signals); handlers can only be set in the
    main thread, so none elsewhere."""
    from rlrun.folders.resume import preemption_signals

    if threading.current_thread() is not threading.main_thread():
        return ()
    return (signal.SIGINT, signal.SIGTERM, *preemption_signals())


def _child(child: Callable[[], None], parent: int, mask: set[signal.Signals]) -> None:
    """The forked process: in a process group of its own (a terminal's Ctrl-C reaches it through
    its parent only), stopped by SIGTERM (after its batch, with a checkpoint) should its parent
    die (Linux; elsewhere it would go on alone), then ``child()``."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # gone before that
        os.kill(os.getpid(), signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    child()


def _run(task: TaskFunction, cfg: DictConfig, outcome: IO[bytes]) -> None:
    """In the child: the task, then how it ended, pickled into ``outcome``."""
    try:
        ended: tuple[str, Any] = ("return", task(cfg))
    except SystemExit as exit:  # submitit requeueing a preempted job: the parent exits too
        ended = ("exit", exit.code)
    except BaseException as err:
        ended = ("raise", _portable(err))
    pickle.dump(ended, outcome)
    outcome.flush()


def _portable(err: BaseException) -> BaseException:
    """``err`` if it survives pickling (an exception class may not take its own args back), else
    a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err


def _ended(ended: bytes, code: int) -> Any:
    """In the parent: the job's return value, or its error raised, or its exit; a job that could
    not say how it ended is recorded as failed (``summary.json``) and raises ``JobKilled``."""
    if not ended:
        err = killed_by(-code) if code < 0 else ended_without_result(f"exit status {code}")
        record_failure(Path(HydraConfig.get().runtime.output_dir), err)
        log.error(f"job stopped: {type(err).__name__}: {err}")
        raise err
    kind, value = pickle.loads(ended)
    if kind == "exit":
        sys.exit(value)
    if kind == "raise":
        raise value
    return value


class PluginLauncher(Launcher):
    """A Hydra plugin's launcher whose jobs each run in their own process (:class:`OwnProcess`).
    The plugin, an optional extra, is imported when a sweep sets its launcher up, not when Hydra
    imports every module of ``hydra_plugins`` at start."""

    PLUGIN = ""  # "module:Class" of the plugin's launcher

    def __init__(self, **params: Any) -> None:
        self.params = params
        self.plugin: Any = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        module, name = self.PLUGIN.split(":")
        self.plugin = getattr(importlib.import_module(module), name)(**self.params)
        self.plugin.setup(
            hydra_context=hydra_context, task_function=OwnProcess(task_function), config=config
        )

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        return self.plugin.launch(job_overrides, initial_job_idx)
