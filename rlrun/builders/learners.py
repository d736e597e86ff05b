"""``trainer.learner_backend=ray``: the optimisation runs on ``trainer.num_learners`` Ray actors
kept in step by DDP, through TorchRL's own ``Trainer(learner_backend="ray")``.

The driver (the ``rlrun`` process) collects with any collector and extends a replay buffer
that a Ray actor owns; every learner samples ``replay_buffer.batch_size / num_learners``
transitions from it per step, computes the loss through DDP (gradients all-reduced), clips to
``algo.max_grad_norm`` and steps its own optimiser and target networks (TorchRL's default
stepper). With ``collector=ray``, learner rank 0 sends the trained weights straight to the
collector workers. The driver's own loss and optimiser are never trained: :class:`RemoteLearners`
copies rank 0's policy weights into the driver's actor after every update, so that a collector
of this host (which runs or copies that actor), evaluation, the best checkpoint and the
``policy`` a checkpoint holds (``rlrun eval``, ``rlrun export``) are current.
Checkpoints hold the learners' whole state (TorchRL's ``learner_execution``: each rank's loss,
optimiser, target networks and RNG), and ``resume=`` restores it into fresh learners.

What cannot run this way is refused before the run starts (``rlrun/validation.py``:
``check_learners``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase
from torchrl.collectors import BaseCollector
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.devices import Placement, ray_gpus
from rlrun.builders.hooks import LossLog
from rlrun.builders.ray_runtime import LEARNER_CPUS
from rlrun.builders.training import Training
from rlrun.builders.updates import NonFiniteLoss, UpdateStep
from rlrun.compat.torchrl import (
    learner_actors,
    learner_backend,
    optim_count,
    publish_with_module,
    receive_no_learner_weights,
    receives_no_learner_weights,
)


def remote_learners(cfg: DictConfig) -> bool:
    """Whether the run optimises on Ray learner actors (``trainer.learner_backend=ray``)."""
    return cfg.trainer.learner_backend == "ray"


@dataclasses.dataclass
class Learner:
    """Where a run optimises, built once from the recipe's answer (:func:`make_learner`): in
    this process, rlrun's update step (``rlrun/builders/updates.py``) as the Trainer's
    ``optimization_stepper``; or on Ray learners, TorchRL's own Trainer backend, which the
    driver follows through :class:`RemoteLearners`."""

    remote: bool
    trainer_kwargs: dict[str, Any]  # what the Trainer is built with for it

    def prepare(self, collector: BaseCollector) -> None:
        """Before the Trainer exists: a collector of this host feeds Ray learners through the
        driver (:func:`receive_weights_here`)."""
        if self.remote:
            receive_weights_here(collector)

    def hooks(
        self,
        trainer: Trainer,
        actor: torch.nn.Module,
        training: Training,
        replay_hooks: list[TrainerHookBase],
        stats: TrainerHookBase,
        stop: TrainerHookBase,
    ) -> list[TrainerHookBase]:
        """The hooks that act on each batch, in the order they act: ``stop`` (a stop signal
        ends the batch's steps), the replay's, the algorithm's collection and batch hooks,
        episode statistics and loss logging; with Ray learners, which sample, update their
        targets and log their losses themselves, the driver's side of them, collection hooks
        and statistics."""
        if self.remote:
            return [RemoteLearners(trainer, actor, training.exploration), *training.collect_hooks,
                    stats]  # fmt: skip
        return [stop, *replay_hooks, *training.collect_hooks, *training.hooks, stats, LossLog()]

    def sends_weights(self, collector_kind: str) -> bool:
        """Whether the learners send trained weights to the collector themselves: rank 0 to
        ``collector=ray``'s workers."""
        return self.remote and collector_kind == "ray"


def make_learner(
    cfg: DictConfig,
    remote: bool,
    training: Training,
    optimizer: torch.optim.Optimizer,
    sampler: Any,
    where: Placement,
    *,
    compile: bool,
    cudagraphs: bool,
) -> Learner:
    """The learner ``remote`` asks for: Ray learners (TorchRL's step, the loss through DDP on
    each), or rlrun's update step on ``where.learner``, compiled or captured as ``compile`` and
    ``cudagraphs`` say (``algo.compile`` and ``algo.cudagraphs`` as the recipe resolved them),
    sampling the storage itself through ``sampler`` if given."""
    if remote:
        return Learner(
            True,
            {
                "learner_backend": "ray",
                "learner_backend_options": learner_options(cfg, where.learner),
                "batch_size": cfg.replay_buffer.batch_size,  # global: split over the learners
                "clip_norm": training.max_grad_norm,
            },
        )
    update = UpdateStep(
        training.loss,
        optimizer,
        training.max_grad_norm,
        where.learner,
        compile=compile,
        cudagraphs=cudagraphs,
        sampler=sampler,
        target_updater=training.target_updater,
    )
    return Learner(False, {"optimization_stepper": update})


def make_remote_replay_buffer(cfg: DictConfig, num_learners: int):
    """The replay buffer a Ray actor owns: the learners each get a client of it and sample
    their share of ``cfg.batch_size``."""
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer

    return TensorDictReplayBuffer(
        storage=functools.partial(LazyTensorStorage, cfg.size),  # built in the actor
        batch_size=cfg.batch_size // num_learners,
        service_backend="ray",
        service_backend_options={"remote_config": {"num_cpus": 0}},
    )


def learner_options(cfg: DictConfig, device: torch.device) -> dict[str, Any]:
    """``learner_backend_options``: one Ray actor per learner; on CUDA (untested here) a whole
    GPU each and NCCL, otherwise gloo."""
    gpus = ray_gpus(device)
    return {
        "world_size": cfg.trainer.num_learners,
        "resources_per_rank": {"num_cpus": LEARNER_CPUS, "num_gpus": gpus},
        "backend": "nccl" if gpus else "gloo",
    }


def receive_weights_here(collector: BaseCollector) -> None:
    """Let a collector of this host feed Ray learners: TorchRL asks the collector for its
    weight receivers (only ``RayCollector`` has them); this one gets none, so the learners send
    nothing and :class:`RemoteLearners` copies rank 0's weights into the driver's actor."""
    receive_no_learner_weights(collector)


class RemoteLearners(TrainerHookBase):
    """The driver's side of the Ray learners: after each update, their averaged loss terms
    logged as ``train/<key>`` (and ``train/optim_steps``), a NaN/inf loss stopping the run
    before the weights are sent or saved, and rank 0's policy weights copied into ``actor``
    (the driver's, which a collector of this host, evaluation and the checkpoint's ``policy``
    read)."""

    def __init__(
        self, trainer: Trainer, actor: torch.nn.Module, exploration: torch.nn.Module | None
    ) -> None:
        self.trainer = trainer
        self.actor = actor
        self.backend = learner_backend(trainer)
        self.pending: dict[str, float] | None = None
        self.pulled_version = -1
        self.backend_step = self.backend.step
        self.backend.step = self.step  # metrics kept here, not logged under TorchRL's names
        if receives_no_learner_weights(trainer.collector):  # see receive_weights_here
            self.backend.publish_weights = self.publish_here
        elif exploration is not None:
            # Ray workers act through Sequential(actor, exploration): rank 0 sends its actor
            # with the driver's exploration module (annealed here), as TorchRL's DQN and TD3
            # trainers do
            publish_with_module(trainer, exploration)

    def publish_here(self, *, expected_version: int, **_: Any) -> int:
        """TorchRL's publication after each update, for a collector of this host: rank 0's
        weights into the driver's actor, before the post-steps hooks (which push them to a
        collector's copy or worker processes)."""
        self.pull_weights()
        return expected_version

    def step(self, num_steps: int):
        receipt = self.backend_step(num_steps)
        metrics = {
            key: float(value)
            for key, value in receipt.metrics.flatten_keys(".").items()
            if isinstance(value, torch.Tensor) and value.numel() == 1
        }
        bad = [k for k, v in metrics.items() if k.startswith("loss") and not math.isfinite(v)]
        if bad:
            raise NonFiniteLoss(
                f"{', '.join(bad)} became NaN or inf on the Ray learners in the batch ending at "
                f"frame {self.trainer.collected_frames}; the run stopped before sending or "
                "saving these weights. Lower optim.lr or algo.max_grad_norm, then resume= "
                "that run."
            )
        self.pending = metrics
        return dataclasses.replace(receipt, metrics=TensorDict())

    def __call__(self) -> None:
        self.pull_weights()

    def log(self, batch: TensorDictBase) -> dict[str, float] | None:
        """The last update's loss terms and the optimisation steps so far, for the Trainer to
        log (a ``post_steps_log`` hook)."""
        if self.pending is None:
            return None
        out = {f"train/{key}": value for key, value in self.pending.items()}
        out["train/optim_steps"] = optim_count(self.trainer)
        self.pending = None
        return out

    def pull_weights(self) -> None:
        """Rank 0's policy weights into the driver's actor (once per model version)."""
        backend = self.backend
        if not learner_actors(self.trainer) or backend.model_version == self.pulled_version:
            return
        weights = backend.get_weights("policy")
        TensorDict.from_module(self.actor).data.update_(weights)
        self.pulled_version = backend.model_version

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "remote_learners") -> None:
        trainer.register_op("post_steps", self)
        trainer.register_op("post_steps_log", self.log)  # before evaluation's (registered later)
        if trainer.checkpoint is not None and "policy" not in trainer.checkpoint:
            # the driver's actor, current after each update: what rlrun eval/export load
            trainer.checkpoint.register("policy", self.actor)
