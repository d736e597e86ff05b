"""Hydra's basic sweeper, changed in one way: a failed job does not hide the others' failures.

Hydra 1.3 launches a batch, then raises the first failed job's error and skips later batches.
Here every job of the sweep runs (all batches), and the sweep ends with one error that lists
each failed job's folder and error (exit status 1). Each failed job's ``summary.json`` also says
``"status": "failed"`` with the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException

from rlrun.compat.hydra import basic_sweeper_class, job_outcome

HydraBasicSweeper = basic_sweeper_class()  # as Hydra's plugin scan made it


class SweepFailed(CompactHydraException):
    """Some jobs of a sweep failed; the message lists them (Hydra prints it without traceback)."""

    def __init__(self, failed: Sequence[JobReturn], total: int) -> None:
        lines = [f"{len(failed)} of {total} sweep jobs failed:"]
        for ret in failed:
            job_dir = ret.hydra_cfg.hydra.runtime.output_dir if ret.hydra_cfg else "?"
            error = job_outcome(ret)
            lines.append(f"  {job_dir}: {type(error).__name__}: {error}")
        super().__init__("\n".join(lines))


def raise_if_failed(returns: Sequence[JobReturn]) -> None:
    failed = [r for r in returns if r.status == JobStatus.FAILED]
    if failed:
        raise SweepFailed(failed, len(returns))


class BasicSweeper(HydraBasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        launched: list[JobReturn] = []
        launch = self.launcher.launch

        def launch_and_record(*args: Any, **kwargs: Any) -> list[JobReturn]:
            """Keep every result; hand Hydra's loop failures it will not stop at."""
            results = launch(*args, **kwargs)
            launched.extend(results)
            return [
                r
                if r.status != JobStatus.FAILED
                else JobReturn(overrides=r.overrides, status=JobStatus.COMPLETED)
                for r in results
            ]

        self.launcher.launch = launch_and_record
        returns = super().sweep(arguments)
        raise_if_failed(launched)
        return returns
