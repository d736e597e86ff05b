"""A team of several groups of agents (``env.group_map=by_type``) trains each group with its own
loss on its own keys (``(group, ...)``), as BenchMARL does: the pieces here run the groups' as
one. :class:`GroupLosses` names each term after its group (``loss_objective_speaker``) so that
the update step sums them all, one backward and one optimiser step for the whole team;
:class:`GroupTargets` steps each group's target networks; :class:`GroupExploration` each group's
exploration noise."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictSequential
from torch import nn
from torchrl.objectives import LossModule
from torchrl.objectives.utils import TargetNetUpdater


class GroupLosses(LossModule):
    """``losses``, one per group, as one loss module; ``set_keys`` and
    ``make_value_estimator`` set each group's. Each loss's TD errors (DDPG's, SAC's: per agent)
    go in its group, ``(group, "td_error")``; a team's (``team_errors``: QMIX's and VDN's,
    ``[*batch, 1]``) at the root, ``td_error_<group>``. The team's priority, what a prioritized
    replay buffer reads (``td_error``), is the largest of them for each transition: the
    reduction TorchRL's prioritized sampler applies to the agents of one group."""

    @dataclass
    class _AcceptedKeys:
        """The team's priority; everything else each group's loss reads in its group."""

        priority: str = "td_error"

    def __init__(self, losses: dict[str, LossModule], team_errors: bool = False) -> None:
        super().__init__()
        self.groups = nn.ModuleDict(losses)
        for group, loss in losses.items():
            priority = getattr(loss.tensor_keys, "priority", None)
            if priority is not None:
                loss.set_keys(priority=f"{priority}_{group}" if team_errors else (group, priority))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        terms, errors = {}, []
        for group, loss in self.groups.items():
            for key, value in loss(tensordict).items():
                terms[f"{key}_{group}"] = value
            written = getattr(loss.tensor_keys, "priority", None)
            if written is not None and written in tensordict.keys(include_nested=True):
                error = tensordict.get(written).reshape(*tensordict.batch_size, -1)
                errors.append(error.amax(-1))
        if errors:
            tensordict.set(self.tensor_keys.priority, torch.stack(errors).amax(0))
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

    def make_value_estimator(self, *args: Any, **kwargs: Any) -> None:
        for loss in self.groups.values():
            loss.make_value_estimator(*args, **kwargs)


def per_group(loss: LossModule) -> dict[str | None, LossModule]:
    """Each group's loss (a :class:`GroupLosses`'), or ``{None: loss}``."""
    return dict(loss.groups) if isinstance(loss, GroupLosses) else {None: loss}


def joined_losses(losses: dict[str | None, LossModule], team_errors: bool = False) -> LossModule:
    """One loss as it is (``{None: loss}``), several groups' as a :class:`GroupLosses`."""
    return losses[None] if None in losses else GroupLosses(losses, team_errors)


def group_targets(
    make: Callable[[LossModule], TargetNetUpdater], losses: dict[str | None, LossModule]
) -> TargetNetUpdater | GroupTargets:
    """``make``'s target-network updater for one loss (``{None: loss}``), or one per group,
    stepped together, for several groups' losses."""
    if None in losses:
        return make(losses[None])
    return GroupTargets({group: make(loss) for group, loss in losses.items()})


class GroupTargets:
    """Each group's target-network updater, stepped together after each optimisation step;
    saved in checkpoints as the Trainer saves one updater."""

    def __init__(self, updaters: dict[str, TargetNetUpdater]) -> None:
        self.updaters = updaters

    def step(self) -> None:
        for updater in self.updaters.values():
            updater.step()

    def state_dict(self) -> dict[str, Any]:
        return {group: updater.state_dict() for group, updater in self.updaters.items()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for group, updater in self.updaters.items():
            updater.load_state_dict(state_dict[group])


class GroupExploration(TensorDictSequential):
    """Each group's exploration module (``AdditiveGaussianModule``, ``EGreedyModule``), run one
    after the other behind the team's actor and annealed together."""

    def step(self, frames: int = 1) -> None:
        for module in self.module:
            module.step(frames)
