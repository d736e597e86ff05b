"""Checkpoints from the ``checkpoint`` config group, through ``torchrl.checkpoint``.

The Trainer registers its policy, loss, optimizer, collector, logger, hooks and counters on the
``Checkpoint``; rlrun adds the global RNG state. Saves are atomic (stage and rename) and rotated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from torchrl.checkpoint import Checkpoint, CheckpointRotation, GlobalRNGState

from rlrun.errors import choose

BACKENDS = ("torch", "none")


def trainer_checkpoint_kwargs(cfg: DictConfig, run_dir: Path) -> dict[str, Any]:
    """Keyword arguments for ``torchrl.trainers.Trainer``: what to save, where and how often."""
    backend = choose("checkpoint.backend", cfg.backend, BACKENDS)
    if backend == "none":
        return {"save_trainer_interval": 2**62}
    return {
        "checkpoint": Checkpoint(rng=GlobalRNGState()),
        "checkpoint_rotation": CheckpointRotation(run_dir / "checkpoints", keep_last=cfg.keep),
        "save_trainer_interval": cfg.every_frames or 2**62,
    }
