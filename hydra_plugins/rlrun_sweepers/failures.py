"""A job that could not record its own end: killed by a signal (the OOM killer's SIGKILL, a
segfault), or its process gone with its worker, its node or its scheduler's limits.

The launcher side writes what the job could not: ``summary.json`` with ``"status": "failed"``
and an ``error`` that says how it ended and where to look, so that rlrun's sweeper lists it with
the other failed jobs and ``rlrun resume=<sweep>`` runs it again (rlrun/folders/resume.py).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from hydra.core.utils import JobReturn, JobStatus
from omegaconf import DictConfig, open_dict

# what a job's death by each signal most often means, and where to look
SIGNAL_HINTS = {
    signal.SIGKILL: "out of memory? check dmesg / the scheduler's log",
    signal.SIGSEGV: "a crash in native code, or out of memory? check the job's log and dmesg",
    signal.SIGBUS: "a crash in native code, or a full /dev/shm? check the job's log and dmesg",
}
OTHER_HINT = "check the job's log and dmesg"
NO_RESULT_HINT = "killed? out of memory? check dmesg"


class JobKilled(RuntimeError):
    """The job's process ended without a result (the job itself could say nothing)."""


def killed_by(signum: int) -> JobKilled:
    """``killed by SIGKILL (out of memory? ...)``: the signal, and what it may mean."""
    sig = signal.Signals(signum)
    return JobKilled(f"killed by {sig.name} ({SIGNAL_HINTS.get(sig, OTHER_HINT)})")


def ended_without_result(seen: str) -> JobKilled:
    """A job's process that ended without a result and not by a signal its launcher saw (or
    could name); ``seen``: what the launcher saw."""
    return JobKilled(f"ended without a result ({seen}; {NO_RESULT_HINT})")


def record_failure(job_dir: Path, error: BaseException) -> None:
    """The ``summary.json`` the job could not write (in the format of rlrun/run.py's
    ``write_summary``, with only what is known). Nothing where the job's folder does not exist
    (it never started; ``resume=`` runs it all the same)."""
    if job_dir.is_dir():
        summary = {"status": "failed", "error": f"{type(error).__name__}: {error}"}
        (job_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def failed_return(cfg: DictConfig, error: BaseException) -> JobReturn:
    """A failed job's return for rlrun's sweeper (its list names ``cfg``'s job folder), its
    ``summary.json`` written. ``cfg``: the job's sweep config, as its launcher composed it."""
    job_dir = Path(cfg.hydra.sweep.dir, str(cfg.hydra.sweep.subdir)).absolute()
    with open_dict(cfg):  # where the sweeper's list says the job was
        cfg.hydra.runtime.output_dir = str(job_dir)
    record_failure(job_dir, error)
    ret = JobReturn(
        overrides=list(cfg.hydra.overrides.task), hydra_cfg=cfg, status=JobStatus.FAILED
    )
    ret.return_value = error
    return ret
