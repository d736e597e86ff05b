"""What an algorithm's builder is handed (:class:`Context`) and what it hands the run
(:class:`Training`: a loss, its optimisation schedule and its hooks); ``Algorithm.build`` in
``rlrun/algorithms/__init__.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tensordict.nn import TensorDictModule
from torchrl.data import Composite
from torchrl.objectives import LossModule
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.objectives.value import ValueEstimatorBase
from torchrl.trainers import TrainerHookBase

from rlrun.builders.groups import GroupTargets
from rlrun.builders.policies import ActorCritic


@dataclass(frozen=True)
class Context:
    """What the recipe hands an algorithm's ``build``: the networks it trains, the frames each
    collected batch holds, the learner's device, whether every batch was collected with the
    weights of the previous update (false for an async collector: a batch may be one update
    old), and the env's observation spec (what a team's value mixer reads)."""

    ac: ActorCritic
    frames_per_batch: int
    device: torch.device
    fresh_batches: bool = True
    observation_spec: Composite | None = None


@dataclass
class Training:
    """A loss module, how many optimisation steps each batch gets, and the hooks it needs."""

    loss: LossModule
    optim_steps_per_batch: int
    num_epochs: int = 1
    max_grad_norm: float | None = None
    hooks: list[TrainerHookBase] = field(default_factory=list)
    # Hooks acting on collection (exploration annealing): they run in this process, wherever
    # the optimisation runs (``trainer.learner_backend``), before ``hooks``.
    collect_hooks: list[TrainerHookBase] = field(default_factory=list)
    # Off-policy: act through ``exploration`` appended to the actor in the collector, and step
    # ``target_updater`` with each optimisation step (the update step does, or a Ray learner;
    # saved in checkpoints by the Trainer).
    exploration: TensorDictModule | None = None
    target_updater: TargetNetUpdater | GroupTargets | None = None
    # on-policy: GAE (a team of several groups: one per group), run on each batch before the loss
    advantages: list[ValueEstimatorBase] = field(default_factory=list)

    def steps_in(self, total_frames: int, frames_per_batch: int, random_frames: int) -> int:
        """The optimisation steps of a run of ``total_frames``, counted as TorchRL runs them:
        its collector rounds the frames up to whole batches, and its Trainer optimises on each
        batch from the one that brings the frames collected to ``random_frames`` on."""
        batches = -(-total_frames // frames_per_batch)
        waiting = max(0, -(-random_frames // frames_per_batch) - 1)  # batches not trained on
        return max(0, batches - waiting) * self.optim_steps_per_batch * self.num_epochs

    def episodes_end_at(self, key: str) -> None:
        """Targets and advantages end an episode at ``key`` (Atari's ``end_of_life``) instead
        of the env's done: the env plays on, the bootstrapping stops there."""
        for module in (self.loss, *self.advantages):
            module.set_keys(done=key, terminated=key)
