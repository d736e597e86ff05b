"""A user's algorithm for tests/test_updates.py, imported by ``_target_`` in rlrun processes:
rlrun's TD3 declaring that ``algo.compile=auto`` compiles its fused step on the CPU from 100
optimisation steps on (rlrun's own TD3 declares a compiled step on CUDA only)."""

from __future__ import annotations

import dataclasses

from rlrun.algorithms import Auto
from rlrun.algorithms.td3 import ALGORITHM as TD3

ALGORITHM = dataclasses.replace(TD3, auto={**TD3.auto, "cpu": Auto(compile=True, min_steps=100)})
