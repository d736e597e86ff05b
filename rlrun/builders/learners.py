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
from tensordict import TensorDict
from torchrl.collectors import BaseCollector
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.devices import ray_gpus
from rlrun.builders.ray_runtime import LEARNER_CPUS


def remote_learners(cfg: DictConfig) -> bool:
    """Whether the run optimises on Ray learner actors (``trainer.learner_backend=ray``)."""
    return cfg.trainer.learner_backend == "ray"


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


def _no_receiver(new_generation: bool = False) -> None:
    return None


def receive_weights_here(collector: BaseCollector) -> None:
    """Let a collector of this host feed Ray learners: TorchRL asks the collector for its
    weight receivers (only ``RayCollector`` has them); this one gets none, so the learners send
    nothing and :class:`RemoteLearners` copies rank 0's weights into the driver's actor."""
    if not hasattr(collector, "_learner_weight_sync"):
        collector._learner_weight_sync = _no_receiver


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
        self.backend = trainer._execution_backend  # private in TorchRL 0.14.1
        self.pending: dict[str, float] | None = None
        self.pulled_version = -1
        self._step = self.backend.step
        self.backend.step = self.step  # metrics kept here, not logged under TorchRL's names
        if trainer.collector._learner_weight_sync is _no_receiver:  # see receive_weights_here
            self.backend.publish_weights = self.publish_here
        elif exploration is not None:
            # Ray workers act through Sequential(actor, exploration): rank 0 sends its actor
            # with the driver's exploration module (annealed here), as TorchRL's DQN and TD3
            # trainers do
            trainer._execution_weight_publication = functools.partial(
                trainer._compose_execution_weight_publication, exploration
            )

    def publish_here(self, *, expected_version: int, **_: Any) -> int:
        """TorchRL's publication after each update, for a collector of this host: rank 0's
        weights into the driver's actor, before the post-steps hooks (which push them to a
        collector's copy or worker processes)."""
        self.pull_weights()
        return expected_version

    def step(self, num_steps: int):
        receipt = self._step(num_steps)
        metrics = {
            key: float(value)
            for key, value in receipt.metrics.flatten_keys(".").items()
            if isinstance(value, torch.Tensor) and value.numel() == 1
        }
        bad = [k for k, v in metrics.items() if k.startswith("loss") and not math.isfinite(v)]
        if bad:
            from rlrun.builders.updates import NonFiniteLoss

            raise NonFiniteLoss(
                f"{', '.join(bad)} became NaN or inf on the Ray learners in the batch ending at "
                f"frame {self.trainer.collected_frames}; the run stopped before sending or "
                "saving these weights. Lower optim.lr or algo.max_grad_norm, then resume= "
                "that run."
            )
        self.pending = metrics
        return dataclasses.replace(receipt, metrics=TensorDict())

    def __call__(self) -> None:
        if self.pending is not None:
            out = {f"train/{key}": value for key, value in self.pending.items()}
            out["train/optim_steps"] = self.trainer._optim_count
            self.trainer._log(**out)
            self.pending = None
        self.pull_weights()

    def pull_weights(self) -> None:
        """Rank 0's policy weights into the driver's actor (once per model version)."""
        backend = self.backend
        if not backend._actors or backend.model_version == self.pulled_version:
            return
        weights = backend.get_weights("policy")
        TensorDict.from_module(self.actor).data.update_(weights)
        self.pulled_version = backend.model_version

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "remote_learners") -> None:
        trainer.register_op("post_steps", self)  # before evaluation (post_steps_log)
        if trainer.checkpoint is not None and "policy" not in trainer.checkpoint:
            # the driver's actor, current after each update: what rlrun eval/export load
            trainer.checkpoint.register("policy", self.actor)
