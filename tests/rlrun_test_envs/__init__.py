"""A user's own gymnasium env package, as ``env.imports=[rlrun_test_envs]`` imports it: importing
it registers ``RlrunCorridor-v0`` (tests/test_compose.py)."""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class Corridor(gymnasium.Env):
    """Walk right along ``length`` cells: reward 1 at the end, -0.01 a step on the way."""

    def __init__(self, length: int = 8) -> None:
        self.length = length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.position = 0

    def _obs(self) -> np.ndarray:
        return np.array([self.position / self.length, 1.0], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action: int):
        self.position = max(0, self.position + (1 if action == 1 else -1))
        done = self.position >= self.length
        return self._obs(), 1.0 if done else -0.01, done, False, {}


gymnasium.register("RlrunCorridor-v0", entry_point=Corridor, max_episode_steps=50)
