"""The replay-buffer skeleton DQN, SAC and TD3 share, written once.

Each of them is a TorchRL loss with TD(0) targets (``algo.gamma``), ``algo.utd_ratio``
optimisation steps per collected frame on replay samples, target networks stepped by the update
step after each optimisation (``algo.tau`` or a hard copy; ``rlrun/updates.py``), and, where the
algorithm explores with a module appended to its actor in the collector, that module annealed by
collected frames.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.objectives import LossModule, ValueEstimators
from torchrl.objectives import SoftUpdate as TorchRLSoftUpdate
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.algorithms.base import Algorithm
from rlrun.errors import ConfigError
from rlrun.policies import ActorCritic


class SoftUpdate(TorchRLSoftUpdate):
    """TorchRL's soft target update as one ``_foreach_lerp_`` over every target tensor (TorchRL
    lerps network by network), so that it fits in the fused update step: one kernel launch per
    step on CUDA, nothing for a captured graph to freeze but the tensors themselves."""

    def step(self) -> None:
        pairs = self.__dict__.get("_pairs")
        if pairs is None:  # (targets, sources), in the same order, read once
            keys = list(self._sources.keys(True, True))
            targets = [self._targets.get(("target_" + k[0], *k[1:])) for k in map(_tuple, keys)]
            pairs = self.__dict__["_pairs"] = (targets, [self._sources.get(k) for k in keys])
        with torch.no_grad():
            torch._foreach_lerp_(pairs[0], pairs[1], 1 - self.eps)


def _tuple(key: str | tuple[str, ...]) -> tuple[str, ...]:
    return key if isinstance(key, tuple) else (key,)


class AnnealExploration(TrainerHookBase):
    """Anneal an exploration module (``EGreedyModule``, ``AdditiveGaussianModule``: its
    ``step``) by the frames of each batch, and log its current ``attr`` (``eps``, ``sigma``)."""

    def __init__(self, module: TensorDictModule, attr: str, log_as: str) -> None:
        self.module = module
        self.attr = attr
        self.log_as = log_as

    def anneal(self, batch: TensorDictBase) -> None:
        self.module.step(batch.numel())

    def log(self, batch: TensorDictBase) -> dict[str, Any]:
        return {f"train/{self.log_as}": getattr(self.module, self.attr).item()}

    def state_dict(self) -> dict[str, Any]:
        return self.module.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.module.load_state_dict(state_dict)

    def register(self, trainer: Trainer, name: str = "exploration") -> None:
        trainer.register_module(name, self)
        trainer.register_op("batch_process", self.anneal)
        trainer.register_op("pre_steps_log", self.log)


def require_qvalue(ac: ActorCritic, algo: str, factory: str, preset: str) -> None:
    """DQN, SAC and TD3 train ``ac.qvalue``: a policy factory without one is a user's mistake."""
    if ac.qvalue is None:
        raise ConfigError(
            f"algo={algo} needs a Q-network: set policy._target_=rlrun.policies.{factory} "
            f"(or start from +experiment={preset})."
        )


def off_policy(
    cfg: DictConfig,
    loss: LossModule,
    frames_per_batch: int,
    *,
    updater: TargetNetUpdater | None = None,
    exploration: AnnealExploration | None = None,
) -> Algorithm:
    """``loss`` trained from the replay buffer: TD(0) targets, ``algo.utd_ratio`` steps per
    frame, ``updater`` (default: soft updates with ``algo.tau``) stepped with each optimisation
    step, and ``exploration`` annealed while collecting."""
    loss.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    updater = updater or SoftUpdate(loss, tau=cfg.tau)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=max(1, round(cfg.utd_ratio * frames_per_batch)),
        max_grad_norm=cfg.max_grad_norm,
        collect_hooks=[exploration] if exploration is not None else [],
        off_policy=True,
        exploration=exploration.module if exploration is not None else None,
        target_updater=updater,
    )
