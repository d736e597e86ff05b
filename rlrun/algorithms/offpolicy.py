"""The replay-buffer skeleton every off-policy algorithm shares, written once (DQN, C51, SAC,
discrete SAC, REDQ, TQC, CrossQ, DDPG, TD3).

Each of them is a TorchRL loss with TD(0) targets (``algo.gamma``), ``algo.utd_ratio``
optimisation steps per collected frame on replay samples, target networks (all but CrossQ)
stepped by the update step after each optimisation (``algo.tau`` or a hard copy;
``rlrun/builders/updates.py``), and, where the algorithm explores with a module appended to its actor in
the collector (epsilon-greedy, Gaussian noise: built here once), that module annealed by
collected frames.
"""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.modules import AdditiveGaussianModule, EGreedyModule
from torchrl.objectives import HardUpdate, LossModule, ValueEstimators
from torchrl.objectives import SoftUpdate as TorchRLSoftUpdate
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.algorithms.base import Algorithm
from rlrun.builders.policies import ActorCritic
from rlrun.errors import ConfigError


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
    """The off-policy losses train ``ac.qvalue``: a policy factory without one is a user's
    mistake."""
    if ac.qvalue is None:
        raise ConfigError(
            f"algo={algo} needs a Q-network: set policy._target_=rlrun.builders.policies.{factory} "
            f"(or start from +experiment={preset})."
        )


def epsilon_greedy(cfg: DictConfig, ac: ActorCritic, device: torch.device) -> AnnealExploration:
    """Value-based exploration (DQN, C51): epsilon from ``algo.eps_start`` to ``algo.eps_end``
    over ``algo.eps_anneal_frames`` collected frames."""
    epsilon = EGreedyModule(
        ac.actor.spec["action"],
        eps_init=float(cfg.eps_start),
        eps_end=float(cfg.eps_end),
        annealing_num_steps=cfg.eps_anneal_frames,
        device=device,
    )
    return AnnealExploration(epsilon, "eps", "epsilon")


def gaussian_noise(cfg: DictConfig, ac: ActorCritic, device: torch.device) -> AnnealExploration:
    """Deterministic actors' exploration (DDPG, TD3): Gaussian noise whose std is
    ``algo.exploration_sigma_*`` times half the action range (as CleanRL's), annealed over
    ``algo.exploration_anneal_frames`` (equal start and end: fixed noise)."""
    spec = ac.actor.spec["action"]
    half_range = ((spec.space.high - spec.space.low) / 2).to(device)
    noise = AdditiveGaussianModule(
        spec,
        sigma_init=float(cfg.exploration_sigma_start),
        sigma_end=float(cfg.exploration_sigma_end),
        annealing_num_steps=cfg.exploration_anneal_frames,
        std=half_range,
        device=device,
    )
    return AnnealExploration(noise, "sigma", "exploration_sigma")


def hard_or_soft(cfg: DictConfig, loss: LossModule) -> TargetNetUpdater:
    """``algo.target_update``: a hard copy every ``algo.target_update_period`` optimisation
    steps, or a soft update with ``algo.tau`` after each."""
    if cfg.target_update == "hard":
        return HardUpdate(loss, value_network_update_interval=cfg.target_update_period)
    return SoftUpdate(loss, tau=cfg.tau)


def off_policy(
    cfg: DictConfig,
    loss: LossModule,
    frames_per_batch: int,
    *,
    updater: TargetNetUpdater | None = None,
    exploration: AnnealExploration | None = None,
    target_networks: bool = True,
) -> Algorithm:
    """``loss`` trained from the replay buffer: TD(0) targets, ``algo.utd_ratio`` steps per
    frame, ``updater`` (default: soft updates with ``algo.tau``; none without
    ``target_networks``, as CrossQ) stepped with each optimisation step, and ``exploration``
    annealed while collecting."""
    loss.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    if updater is None and target_networks:
        updater = SoftUpdate(loss, tau=cfg.tau)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=max(1, round(cfg.utd_ratio * frames_per_batch)),
        max_grad_norm=cfg.max_grad_norm,
        collect_hooks=[exploration] if exploration is not None else [],
        off_policy=True,
        exploration=exploration.module if exploration is not None else None,
        target_updater=updater,
    )
