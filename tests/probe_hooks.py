"""A hook for tests/test_devices.py, imported by ``_target_`` in rlrun processes: what the
trained process's floats do below float32's smallest normal number."""

from __future__ import annotations

from pathlib import Path

import torch


class Denormals:
    """``post_steps`` hook: writes to ``path`` the float32 product 1e-39 * 1 as this process
    computes it: 0.0 where denormal numbers are flushed to zero (``trainer.flush_denormal``),
    about 1e-39 where they are kept."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def __call__(self) -> None:
        tiny = torch.full((1,), 1e-39, dtype=torch.float64).float() * torch.ones(1)
        self.path.write_text(repr(tiny.item()))
