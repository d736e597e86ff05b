"""Action masks (docs/guides/action-masks.md): an env whose observations carry ``action_mask``
(1 = legal) gets :class:`LegalActions` in every env its policy runs in
(``ActorCritic.env_transforms``), and the policies of ``rlrun/builders/policies.py`` act within
it: a masked categorical (PPO, A2C), a masked argmax and masked epsilon-greedy exploration (DQN).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torchrl.data import Binary, Composite
from torchrl.envs.transforms import ActionMask

from rlrun.errors import EnvError

MASK_KEY = "action_mask"


def has_action_mask(observation_spec: Composite) -> bool:
    """Whether the env's observations carry an action mask."""
    return MASK_KEY in observation_spec.keys()


class ResetOnlyWhatResets(ActionMask):
    """TorchRL's ``ActionMask`` (the action spec's mask follows the env's ``action_mask``) whose
    partial resets stay partial: on a batch of envs where only some reset (TorchRL's
    ``SerialEnv`` of a team's PettingZoo envs), TorchRL's takes the whole mask from the reset's
    output, where the envs that did not reset hold a fresh board's, and the next random action
    of those may be illegal (seen on tic-tac-toe, 2026-11-27). Only the resetting envs' masks
    are taken from it here."""

    def _reset(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        current = self.action_spec.mask
        if reset is None or current is None:
            return self._call(tensordict_reset)
        mask = tensordict_reset.get(self.in_keys[1]).to(current.device)
        resetting = reset.reshape(reset.shape[0], -1).any(-1).to(current.device)
        resetting = resetting.reshape(-1, *([1] * (mask.ndim - 1)))
        self.action_spec.update_mask(torch.where(resetting, mask.bool(), current))
        return tensordict_reset


class LegalActions(ActionMask):
    """TorchRL's ``ActionMask`` (actions drawn from the action spec, as DQN's random first
    frames are, stay legal), with the mask made boolean and checked.

    Boolean: gymnasium's ``MultiBinary`` mask is int8, which masked distributions and TorchRL's
    ``QValueModule`` refuse. Checked: in a state where the agent must act (any but a terminal
    one), a mask with no legal action would become NaN logits (masked categorical), an illegal
    "greedy" action (masked argmax) or a failed draw from the spec; the run stops with one line
    instead. A terminal state with no legal action gets all its actions marked legal: the agent
    never acts there, and DQN's target, which multiplies its best next value by zero, would
    otherwise read a value of every action tied at the float minimum (TorchRL's one-hot argmax
    marks them all: NaN).
    """

    def __init__(self) -> None:
        super().__init__(mask_key=MASK_KEY)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        mask = next_tensordict.get(MASK_KEY).bool()
        terminated = next_tensordict.get("terminated", None)
        if terminated is not None:
            mask = mask | (terminated.reshape(*mask.shape[:-1], 1) & ~mask.any(-1, keepdim=True))
        check_legal(mask, next_tensordict.get("step_count", None))
        next_tensordict.set(MASK_KEY, mask)
        return super()._call(next_tensordict)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        spec = observation_spec[MASK_KEY]
        observation_spec[MASK_KEY] = Binary(shape=spec.shape, device=spec.device, dtype=torch.bool)
        return observation_spec


def check_legal(mask: torch.Tensor, step_count: torch.Tensor | None) -> None:
    """Raise an EnvError naming the first env whose ``mask`` has no legal action."""
    stuck = ~mask.any(-1)
    if not stuck.any():
        return
    first = tuple(stuck.nonzero()[0].tolist())
    where = f" (env {first[0]} of {stuck.numel()})" if first else ""
    step = ""
    if step_count is not None:
        step = f" at step {int(step_count.reshape(stuck.shape)[first])} of an episode"
    raise EnvError(
        f"the env's action_mask has no legal action{step}{where}: every state the "
        "agent acts in needs at least one legal action (1 = legal); fix the env's mask "
        "(docs/guides/action-masks.md)."
    )
