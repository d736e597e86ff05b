"""A turn-based (AEC) PettingZoo game, such as ``pettingzoo.classic.tictactoe_v3``, as a parallel
env of the agent that learns, its opponents playing their turns inside each step
(``env.opponents``: ``{player_2: random}``, a uniformly random legal move, or ``{player_1:
path/policy.pt}``, the deterministic move of a policy ``rlrun export RUN format=torchscript``
wrote, such as one trained on the other side of the same game).

The learner sees only its own turns: after its move the opponents move until it is its turn
again or the game is over, and its reward is what it earned over all those moves (a loss on the
opponent's move is its -1). So every step of the collected batch is one the learner acted in,
and the team algorithms train on it as on any parallel env. The game's action mask is passed on
(``action_mask`` in the step's info, where TorchRL's ``PettingZooWrapper`` reads it) and its
observation flattened to float32, what a team's MLP reads.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from rlrun.errors import ConfigError, EnvError

RANDOM = "random"  # env.opponents' value for a uniformly random legal move
POLICY_FILE = ".pt"  # ... and the suffix of a policy file (rlrun export RUN format=torchscript)


def learner_of(possible_agents: list[str], opponents: Mapping[str, str], env_id: str) -> str:
    """The one agent of a turn-based game that is not an opponent; a one-line refusal for an
    unknown agent, an unknown way to play, or anything but one learner."""
    unknown = sorted(set(opponents) - set(possible_agents))
    if unknown:
        raise ConfigError(
            f"env.opponents names {', '.join(unknown)}, not agents of env.id={env_id}: its agents "
            f"are {', '.join(possible_agents)}."
        )
    for agent, kind in opponents.items():
        if kind != RANDOM and not str(kind).endswith(POLICY_FILE):
            raise ConfigError(
                f"env.opponents.{agent}={kind}: an opponent plays {RANDOM} (a uniformly random "
                f"legal move) or a policy file from rlrun export RUN format=torchscript "
                f"(path/policy{POLICY_FILE})."
            )
    learners = [a for a in possible_agents if a not in opponents]
    if len(learners) != 1:
        raise ConfigError(
            f"env.id={env_id} is a turn-based game: rlrun trains one of its agents against the "
            f"others, set as opponents; it has {len(learners)} learning ({', '.join(learners)}). "
            f"Set env.opponents, e.g. +env.opponents.{possible_agents[-1]}=random."
        )
    return learners[0]


def check_policy_opponents(game: AECEnv, opponents: Mapping[str, str], env_id: str) -> None:
    """Each policy file in ``opponents`` exists and, by the description ``rlrun export`` wrote
    beside it, reads one agent's observation of this game and answers one of its moves; else
    one line naming what does not fit."""
    for agent, kind in opponents.items():
        if kind == RANDOM:
            continue
        path, key = Path(kind).expanduser(), f"env.opponents.{agent}={kind}"
        sidecar = path.with_name(path.name + ".json")
        if not path.is_file() or not sidecar.is_file():
            missing = sidecar if path.is_file() else path
            raise ConfigError(
                f"{key}: no file {missing}; write one with rlrun export RUN format=torchscript "
                "(it writes policy.pt and policy.pt.json into RUN/export)."
            )
        described = json.loads(sidecar.read_text())
        size = int(np.prod(_board_space(game, agent).shape))
        want = {"observation": ["batch", 1, size], "moves": _moves(game, agent)}
        inputs = described.get("inputs") or [{}]
        moves = (described.get("action") or {}).get("n")
        got = {"observation": inputs[0].get("shape"), "moves": moves}
        if described.get("format") != "torchscript" or got != want:
            raise ConfigError(
                f"{key} is not a policy of one {env_id} agent: it takes {got['observation']} and "
                f"plays among {got['moves']} moves, where {agent} sees {want['observation']} and "
                f"plays among {want['moves']} (export a run of env.id={env_id} with "
                "format=torchscript)."
            )


def _board_space(game: AECEnv, agent: str) -> spaces.Box:
    space = game.observation_space(agent)
    return space["observation"] if isinstance(space, spaces.Dict) else space


def _moves(game: AECEnv, agent: str) -> int:
    return int(game.action_space(agent).n)


class PolicyOpponent:
    """An opponent that plays the deterministic move of an exported policy (a TorchScript file
    taking ``[1, 1, observation]`` and, where its description lists one, the ``[1, 1, moves]``
    action mask)."""

    def __init__(self, path: Path) -> None:
        import torch

        self.module = torch.jit.load(str(path), map_location="cpu")
        described = json.loads(path.with_name(path.name + ".json").read_text())
        self.masked, self.path = len(described["inputs"]) > 1, path

    def __call__(self, observation: np.ndarray, mask: np.ndarray | None) -> int:
        import torch

        inputs = [torch.as_tensor(observation).reshape(1, 1, -1)]
        if self.masked:
            inputs.append(torch.as_tensor(mask).reshape(1, 1, -1))
        with torch.no_grad():
            out = self.module(*inputs)
        return int((out[0] if isinstance(out, tuple) else out).reshape(-1)[0])


class AgainstOpponents(ParallelEnv):
    """``game``'s learner as a one-agent parallel env, its opponents moving in between."""

    def __init__(self, game: AECEnv, opponents: Mapping[str, str], env_id: str) -> None:
        self.game, self.env_id = game, env_id
        self.learner = learner_of(list(game.possible_agents), opponents, env_id)
        check_policy_opponents(game, opponents, env_id)
        self.possible_agents = [self.learner]
        self.agents: list[str] = []
        self.metadata = {**game.metadata, "is_parallelizable": True}
        self._rng = np.random.default_rng()
        self._over = False
        self._policies = {
            agent: PolicyOpponent(Path(kind).expanduser())
            for agent, kind in opponents.items()
            if kind != RANDOM
        }

    @functools.cache  # noqa: B019 (PettingZoo's own pattern: one space object per agent)
    def observation_space(self, agent: str) -> spaces.Box:
        board = _board_space(self.game, agent)
        return spaces.Box(
            board.low.astype(np.float32).reshape(-1),
            board.high.astype(np.float32).reshape(-1),
            dtype=np.float32,
        )

    def action_space(self, agent: str) -> spaces.Space:
        return self.game.action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.game.reset(seed=seed, options=options)
        self.agents, self._over = [self.learner], False
        self._play_opponents()
        return self._observations(), self._infos()

    def step(self, actions: dict[str, Any]):
        action = np.asarray(actions[self.learner]).reshape(-1)[0].item()
        mask = self._mask(self.learner)
        if mask is not None and not mask[action]:
            raise EnvError(
                f"the policy played move {action} in env.id={self.env_id}, "
                "illegal by the game's action mask: a policy of a masked game must act within "
                "its action_mask."
            )
        reward = self._move(action)
        if not self._over:
            reward += self._play_opponents()
        terminated, truncated = self._over and not self._truncated(), self._truncated()
        observations, infos = self._observations(), self._infos()
        if self._over:
            self.agents = []
        return (
            observations,
            {self.learner: reward},
            {self.learner: terminated},
            {self.learner: truncated},
            infos,
        )

    def _move(self, action: Any) -> float:
        """One move of the agent whose turn it is; the learner's reward for it."""
        self.game.step(action)
        self._over = self._game_over()
        return float(self.game.rewards.get(self.learner, 0.0))

    def _play_opponents(self) -> float:
        """The opponents' moves until the learner's turn or the end; its reward over them."""
        reward = 0.0
        while not self._over and self.game.agent_selection != self.learner:
            agent = self.game.agent_selection
            mask = self._mask(agent)
            policy = self._policies.get(agent)
            if policy is None:
                every = np.arange(_moves(self.game, agent))
                legal = np.flatnonzero(mask) if mask is not None else every
                move = int(self._rng.choice(legal))
            else:
                move = policy(self._observation(agent), mask)
                if mask is not None and not mask[move]:
                    raise EnvError(
                        f"env.opponents.{agent}={policy.path} played move {move}, illegal by "
                        f"the game's action mask: export a policy that reads the mask."
                    )
            reward += self._move(move)
        return reward

    def _game_over(self) -> bool:
        return any(self.game.terminations.values()) or any(self.game.truncations.values())

    def _truncated(self) -> bool:
        return self._over and not any(self.game.terminations.values())

    def _mask(self, agent: str) -> np.ndarray | None:
        """``agent``'s legal moves now, from its observation or its info, if the game has them."""
        observation = self.game.observe(agent)
        if isinstance(observation, dict) and "action_mask" in observation:
            return np.asarray(observation["action_mask"]).astype(bool)
        mask = self.game.infos.get(agent, {}).get("action_mask")
        return None if mask is None else np.asarray(mask).astype(bool)

    def _observations(self) -> dict[str, np.ndarray]:
        return {self.learner: self._observation(self.learner)}

    def _observation(self, agent: str) -> np.ndarray:
        """What ``agent`` sees, flattened to float32 (as a team's MLP reads it)."""
        observation = self.game.observe(agent)
        if isinstance(observation, dict):
            observation = observation["observation"]
        return np.asarray(observation, dtype=np.float32).reshape(-1)

    def _infos(self) -> dict[str, dict[str, np.ndarray]]:
        """The learner's legal moves; at the end of a game, where it has none and never acts,
        all of them (a policy is never asked to choose among none)."""
        mask = self._mask(self.learner)
        if mask is None:
            return {self.learner: {}}
        if self._over:
            mask = np.ones_like(mask)
        elif not mask.any():
            raise EnvError(
                f"env.id={self.env_id} gave {self.learner} no legal move on "
                "its turn: every state an agent acts in needs at least one legal action "
                "(docs/guides/action-masks.md)."
            )
        return {self.learner: {"action_mask": mask}}

    def close(self) -> None:
        self.game.close()
