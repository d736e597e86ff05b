"""A gymnasium env with an action mask: pick the most valuable items, one a turn.

Importing this module registers ``my_lab/PickItems-v0`` (``env.imports=[my_lab.masked_env]``;
``rlrun env=pick_items`` sets both). Each episode deals ``n_items`` items of random value, some of
them unavailable; each turn the agent picks one item still on the table and earns its value,
``picks`` turns in all. Which items are legal changes every turn (a picked item is gone), and the
env says so in its observation's ``action_mask`` (1 = legal), as PettingZoo's and OpenSpiel's
turn-based games do.

A random legal policy earns the mean value per pick (about 1.5 an episode); picking the best
items left earns about 2.1. An illegal pick (an item taken or unavailable) earns -1, changes
nothing and is counted (``info["illegal_actions"]``, the episode's so far); with
``strict=True`` (``env.kwargs.strict=true``) it raises :class:`IllegalAction` instead, so a run
that completes took none. More ``picks`` than ``n_items`` is a bug of the env's own: its last
turns come with no legal action (rlrun stops the run, saying so). Pure numpy: cheap to step.

Use it (from the repository root):
    PYTHONPATH=examples rlrun +experiment=ppo env=pick_items
"""

from __future__ import annotations

import gymnasium
import numpy as np
from gymnasium import spaces


class IllegalAction(RuntimeError):
    """An action the mask forbade, in strict mode: the policy ignored the mask."""


class PickItems(gymnasium.Env):
    """Pick ``picks`` of ``n_items`` items, the available ones of greatest value first.

    Observation ``{"observation": values, legal flags, picks left (float32),
    "action_mask": legal flags (int8)}``; action: the index of the item to pick.
    """

    def __init__(
        self, n_items: int = 8, picks: int = 3, available: float = 0.75, strict: bool = False
    ) -> None:
        self.n_items, self.picks, self.available, self.strict = n_items, picks, available, strict
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(0.0, 1.0, shape=(2 * n_items + 1,), dtype=np.float32),
                "action_mask": spaces.MultiBinary(n_items),
            }
        )
        self.action_space = spaces.Discrete(n_items)
        self.values = np.zeros(n_items, dtype=np.float32)
        self.legal = np.ones(n_items, dtype=np.int8)
        self.left = picks
        self.illegal_actions = 0

    def _obs(self) -> dict[str, np.ndarray]:
        left = np.float32(self.left / self.picks)
        flags = self.legal.astype(np.float32)
        return {
            "observation": np.concatenate([self.values, flags, [left]]).astype(np.float32),
            "action_mask": self.legal.copy(),
        }

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.values = self.np_random.random(self.n_items, dtype=np.float32)
        self.legal = (self.np_random.random(self.n_items) < self.available).astype(np.int8)
        if self.legal.sum() < self.picks:  # enough items for every turn, where there are
            self.legal[:] = 1
        self.left = self.picks
        self.illegal_actions = 0
        return self._obs(), {"illegal_actions": 0}

    def step(self, action: int):
        action = int(action)
        if not self.legal[action]:
            if self.strict:
                raise IllegalAction(
                    f"PickItems: action {action} is not legal (mask {self.legal.tolist()})"
                )
            self.illegal_actions += 1
            return self._obs(), -1.0, False, False, {"illegal_actions": self.illegal_actions}
        self.legal[action] = 0
        self.left -= 1
        reward = float(self.values[action])
        info = {"illegal_actions": self.illegal_actions}
        return self._obs(), reward, self.left == 0, False, info


gymnasium.register("my_lab/PickItems-v0", entry_point=PickItems, max_episode_steps=10)
