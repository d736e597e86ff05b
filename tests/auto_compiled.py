"""A user's algorithm for tests/test_updates.py, imported by ``_target_`` in rlrun processes:
rlrun's DQN declaring that ``algo.compile=auto`` compiles it on the CPU from 100 optimisation
steps on (rlrun's own: from 20,000, too long for a test)."""

from __future__ import annotations

import dataclasses

from rlrun.algorithms import Auto
from rlrun.algorithms.dqn import ALGORITHM as DQN

ALGORITHM = dataclasses.replace(DQN, auto={"cpu": Auto(compile=True, min_steps=100)})
