"""rlrun: a config-driven experiment runner for reinforcement learning (Hydra + TorchRL)."""

from __future__ import annotations

import time
from typing import Any

__version__ = "0.1.0"
LAUNCHED_AT = time.time()  # for summary.json's time from launch to the first collected batch


def __getattr__(name: str) -> Any:
    """``rlrun.load`` (``rlrun/commands/loading.py``), imported on first use: the console script
    imports this package and must not pay for torch before it needs it."""
    if name == "load":
        from rlrun.commands.loading import load

        return load
    raise AttributeError(f"module 'rlrun' has no attribute {name!r}")
