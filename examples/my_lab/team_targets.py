"""A small cooperative team game as a PettingZoo parallel env: ``env=pettingzoo
env.id=my_lab.team_targets`` (with ``PYTHONPATH=examples``).

Each step every agent is shown a target (one of ``n_targets``, one-hot) and picks one; each agent
is paid the team's score, the fraction of agents that picked their own target. Episodes last
``max_cycles`` steps. A random team earns ``max_cycles / n_targets`` an episode, a perfect one
``max_cycles``: a return no untrained team reaches, earned within a few thousand frames, which
makes it a learning check for the team algorithms' wiring (the suite's QMIX and VDN runs).

``mixed=True`` makes a team of two kinds: ``scout_i`` agents see the target alone, ``picker_i``
agents see it with two more (empty) entries, so the two kinds cannot share one group:
``env.group_map=by_type`` makes them groups ``scout`` and ``picker`` (the suite's MAPPO run).

``continuous=True`` is the same game with continuous actions (the suite's MADDPG and MASAC
runs): each agent is shown a target point in [-1, 1] and answers with one in [-1, 1]; the
team's score is one minus the agents' mean distance to their targets. A uniformly random team
earns ``max_cycles / 3`` an episode (a mean distance of 2/3), a perfect one ``max_cycles``.
"""

from __future__ import annotations

import functools

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class TeamTargets(ParallelEnv):
    metadata = {"name": "team_targets_v0", "render_modes": []}

    def __init__(
        self,
        n_agents: int = 2,
        n_targets: int = 4,
        max_cycles: int = 10,
        mixed: bool = False,
        continuous: bool = False,
    ) -> None:
        kinds = ["scout", "picker"] if mixed else ["agent"]
        self.possible_agents = [f"{kinds[i % len(kinds)]}_{i}" for i in range(n_agents)]
        self.agents = list(self.possible_agents)
        self.n_targets, self.max_cycles, self.continuous = n_targets, max_cycles, continuous
        self._rng = np.random.default_rng()
        self._targets = np.zeros(n_agents)
        self._t = 0

    @functools.cache  # noqa: B019 (PettingZoo's own pattern: one space object per agent)
    def observation_space(self, agent: str) -> spaces.Box:
        low = -1.0 if self.continuous else 0.0
        return spaces.Box(low, 1.0, (self._width(agent),), np.float32)

    def _width(self, agent: str) -> int:
        shown = 1 if self.continuous else self.n_targets
        return shown + 2 if agent.startswith("picker") else shown

    @functools.cache  # noqa: B019
    def action_space(self, agent: str) -> spaces.Space:
        if self.continuous:
            return spaces.Box(-1.0, 1.0, (1,), np.float32)
        return spaces.Discrete(self.n_targets)

    def _observations(self) -> dict[str, np.ndarray]:
        n = len(self.possible_agents)
        if self.continuous:
            self._targets = self._rng.uniform(-1.0, 1.0, size=n)
        else:
            self._targets = self._rng.integers(self.n_targets, size=n)
        out = {}
        for agent, target in zip(self.possible_agents, self._targets, strict=True):
            out[agent] = np.zeros(self._width(agent), dtype=np.float32)
            if self.continuous:
                out[agent][0] = target
            else:
                out[agent][int(target)] = 1.0
        return out

    def _score(self, actions: dict[str, np.ndarray | int]) -> float:
        if self.continuous:
            picked = np.array([float(np.asarray(actions[a]).reshape(-1)[0]) for a in self.agents])
            return float(1.0 - np.mean(np.abs(np.clip(picked, -1, 1) - self._targets)))
        picked = np.array([int(actions[a]) for a in self.possible_agents])
        return float(np.mean(picked == self._targets))

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.agents, self._t = list(self.possible_agents), 0
        return self._observations(), {a: {} for a in self.agents}

    def step(self, actions: dict[str, int]):
        score = self._score(actions)
        self._t += 1
        last = self._t >= self.max_cycles
        observations = self._observations()
        rewards = {a: score for a in self.agents}
        terminations = {a: False for a in self.agents}
        truncations = {a: last for a in self.agents}
        infos = {a: {} for a in self.agents}
        if last:
            self.agents = []
        return observations, rewards, terminations, truncations, infos


def parallel_env(**kwargs) -> TeamTargets:
    """What ``env=pettingzoo`` calls: ``parallel_env(**env.kwargs)``."""
    return TeamTargets(**kwargs)
