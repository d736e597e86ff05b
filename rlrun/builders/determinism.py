"""``deterministic=true``: what PyTorch documents for reproducible runs, and what cannot be.

PyTorch's reproducibility notes ask for deterministic kernels (``use_deterministic_algorithms``:
an op without one stops the run with PyTorch's error naming it), cuDNN without benchmarking, and
a fixed cuBLAS workspace (``CUBLAS_WORKSPACE_CONFIG``, read when CUDA starts). With the seeds
rlrun already sets (python, numpy, torch, the envs, each collector worker), two runs with the
same seed then write the same metrics: measured 2026-11-25 on the CPU for PPO, PPO-LSTM, DQN and
SAC with the in-process collector (``tests/test_determinism.py``). Components whose results
depend on timing cannot be made so; the run names them in one line at start.
"""

from __future__ import annotations

import logging
import os

import torch
from omegaconf import DictConfig

log = logging.getLogger(__name__)


def make_deterministic(cfg: DictConfig) -> None:
    """PyTorch's settings for reproducible runs, and one line naming what still is not."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    parts = timing_dependent(cfg)
    if parts:
        log.warning(
            "deterministic=true: runs with the same seed can still differ here, because of "
            + "; ".join(parts)
        )


def timing_dependent(cfg: DictConfig) -> list[str]:
    """The parts of ``cfg`` whose results depend on timing, not on the seed."""
    found = []
    if cfg.collector.kind in ("multi_sync", "async", "ray"):
        found.append(f"collector={cfg.collector.kind} (its workers' batches arrive as they finish)")
    if cfg.replay_buffer.prefetch:
        found.append("replay_buffer.prefetch (samples drawn in background threads)")
    if cfg.trainer.learner_backend == "ray":
        found.append("trainer.learner_backend=ray (learners on Ray actors)")
    return found
