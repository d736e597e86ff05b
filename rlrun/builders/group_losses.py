"""A team of several groups of agents (``env.group_map=by_type``) trains each group with its
own loss, on its own keys (``(group, ...)``): :class:`GroupLosses` runs them as one loss, its
terms named after their group (``loss_objective_speaker``), so that the update step sums them
all, one backward and one optimiser step for the whole team (as BenchMARL's losses per group)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.objectives import LossModule


class GroupLosses(LossModule):
    """``losses``, one per group, as one loss module; ``set_keys`` sets each group's."""

    @dataclass
    class _AcceptedKeys:
        """No keys of its own: each group's loss reads its group's."""

    def __init__(self, losses: dict[str, LossModule]) -> None:
        super().__init__()
        self.groups = nn.ModuleDict(losses)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        terms = {}
        for group, loss in self.groups.items():
            for key, value in loss(tensordict).items():
                terms[f"{key}_{group}"] = value
        return TensorDict(terms, [])

    @functools.cached_property  # one module: the Trainer's checkpoint keeps it by identity
    def actor_network(self) -> TensorDictSequential:
        """Every group's actor in one module, in the order the team's actor runs them: what
        the Trainer saves as a checkpoint's ``policy`` (and ``rlrun eval`` loads). Cached in
        the instance's ``__dict__``, not registered as a submodule: its weights are the
        groups' losses' own, saved once."""
        return TensorDictSequential(*(loss.actor_network for loss in self.groups.values()))

    def set_keys(self, **keys: object) -> None:
        for loss in self.groups.values():
            loss.set_keys(**keys)


def per_group(loss: LossModule) -> dict[str | None, LossModule]:
    """Each group's loss (a :class:`GroupLosses`'), or ``{None: loss}``."""
    return dict(loss.groups) if isinstance(loss, GroupLosses) else {None: loss}
