"""Atari (``env.atari``): the standard preprocessing of Mnih et al. (2015) as gymnasium's own
wrappers apply it, and, for the training env only, episodic life and reward clipping.

Per sub-env, on ``gymnasium.make(id, frameskip=1)``: ``AtariPreprocessing`` (up to ``noop_max``
no-ops after a reset, each action repeated ``frame_skip`` times with the last two frames
max-pooled, ``screen_size`` square grayscale, uint8) then ``FrameStackObservation`` (the last
``frame_stack`` frames, padded with the reset frame). The observation stays ``uint8``; the CNN
scales it on the learner's device (``rlrun/builders/cnn.py``).

Episodic life and clipped rewards change what the *loss* sees, never what is logged:
``RewardSum`` sums the raw game score before ``RewardClipping`` runs, and a lost life does not end
the env's episode (so logged returns are whole games); it sets ``end_of_life``, which the losses
read as their done and terminated keys (``Algorithm.episodes_end_at``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import gymnasium
import numpy as np
import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from torchrl.data import Composite, Unbounded
from torchrl.envs import RewardClipping, Transform
from torchrl.envs.libs.gym import GymWrapper, default_info_dict_reader

from rlrun.errors import ConfigError

END_OF_LIFE = "end_of_life"  # the done key of an Atari training env's losses
LIVES = "lives"


def make_kwargs(atari: DictConfig) -> dict:
    """``gymnasium.make`` arguments: frame skipping is the preprocessing's (max-pooled), so the
    emulator's own is off."""
    return {"frameskip": 1, "repeat_action_probability": atari.repeat_action_probability}


def wrappers(
    atari: DictConfig, max_episode_steps: int | None
) -> list[Callable[[gymnasium.Env], gymnasium.Env]]:
    """The per-env gymnasium wrappers; ``max_episode_steps`` counts agent steps (each
    ``frame_skip`` frames), as envpool's does, so it goes after the frame skipping."""
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

    try:
        import cv2  # noqa: F401  (AtariPreprocessing resizes with OpenCV)
    except ImportError:
        raise ConfigError("Atari preprocessing needs OpenCV: pip install 'rlrun[atari]'.") from None
    chain = [
        functools.partial(
            AtariPreprocessing,
            noop_max=atari.noop_max,
            frame_skip=atari.frame_skip,
            screen_size=atari.screen_size,
            terminal_on_life_loss=False,  # a game ends at game over; see ``EndOfLife``
            grayscale_obs=True,
            scale_obs=False,  # uint8 through collector and buffers
        ),
        functools.partial(FrameStackObservation, stack_size=atari.frame_stack),
    ]
    if max_episode_steps is not None:
        chain.append(functools.partial(TimeLimit, max_episode_steps=max_episode_steps))
    return chain


class LivesReader(default_info_dict_reader):
    """TorchRL's info reader for ``lives``, which one gymnasium env reports as a plain int
    (a vector env: an array)."""

    def __call__(self, info_dict: dict, tensordict: TensorDictBase) -> TensorDictBase:
        return super().__call__({LIVES: np.asarray(info_dict[LIVES])}, tensordict)


def read_lives(env: GymWrapper) -> GymWrapper:
    """Copy the ALE's ``info["lives"]`` into the data, where ``EndOfLife`` compares it."""
    spec = Unbounded(env.batch_size, dtype=torch.int64)
    env.set_info_dict_reader(LivesReader([LIVES], spec={LIVES: spec}))
    return env


class EndOfLife(Transform):
    """``end_of_life``: true where the step lost a life or ended the game.

    TorchRL's ``EndOfLifeTransform`` asks the ALE object for the lives count, which neither a
    gymnasium vector env nor envpool exposes; this reads the ``lives`` entry both write.
    """

    def __init__(self) -> None:
        super().__init__(in_keys=[LIVES, "done"], out_keys=[END_OF_LIFE])

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase):
        done = next_tensordict.get("done")
        lost = tensordict.get(LIVES) > next_tensordict.get(LIVES)
        next_tensordict.set(END_OF_LIFE, lost.reshape(done.shape) | done)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase):
        done = tensordict_reset.get("done")
        tensordict_reset.set(END_OF_LIFE, torch.zeros_like(done))
        return tensordict_reset

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        # an observation, not a done entry: it must not make the env reset
        observation_spec[END_OF_LIFE] = self.parent.full_done_spec["done"].clone()
        return observation_spec


def training_transforms(atari: DictConfig) -> list[Transform]:
    """What only the training env gets, after ``RewardSum`` (which logs the game score)."""
    transforms: list[Transform] = []
    if atari.episodic_life:
        transforms.append(EndOfLife())
    if atari.clip_rewards:
        transforms.append(RewardClipping(-1, 1))
    return transforms
