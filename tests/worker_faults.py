"""An env transform for tests/test_collectors.py, imported by ``_target_`` in rlrun processes:
it breaks the env of a collector worker process (never the main process's) after a few steps."""

from __future__ import annotations

import multiprocessing

from tensordict import TensorDictBase
from torchrl.envs import Transform


class FailInWorker(Transform):
    """Raises on the ``after``-th step inside a worker process."""

    def __init__(self, after: int = 20) -> None:
        super().__init__()
        self.after = after
        self.steps = 0

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self.steps += 1
        if self.steps >= self.after and multiprocessing.current_process().name != "MainProcess":
            raise RuntimeError("env broke in a worker")
        return next_tensordict
