"""A hook for tests/test_killed_jobs.py, imported by ``_target_`` in rlrun processes: one job of
a sweep dies of a signal mid-training, as one that the OOM killer picks does."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


class DieOnce:
    """``post_steps`` hook. The job with a ``signal`` (e.g. SIGKILL) sends it to its own process
    after its first batch, the first time only: it creates ``marker`` first (a path relative to
    the folder rlrun was started in), so that the job, resumed, trains to its end. The others
    wait after their first batch, up to ``wait_s``, for ``marker``: they are training beside it
    when it dies."""

    def __init__(
        self, signal: str | None = None, wait_s: float = 0.0, marker: str = "died.marker"
    ) -> None:
        self.signal = signal
        self.wait_s = wait_s
        self.marker = Path(marker)

    def __call__(self) -> None:
        if self.signal is None:
            deadline = time.monotonic() + self.wait_s
            while not self.marker.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
            self.wait_s = 0.0  # after the first batch only
        elif not self.marker.exists():
            self.marker.touch()
            os.kill(os.getpid(), signal.Signals[self.signal])
