"""Losses and their training-loop glue from the ``algo`` config group.

``make_algorithm`` returns the TorchRL loss module plus the Trainer hooks that feed it
(for PPO: advantages and minibatches of the collected batch), so ``run.py`` stays a recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.modules import EGreedyModule, set_recurrent_mode
from torchrl.objectives import (
    ClipPPOLoss,
    DQNLoss,
    HardUpdate,
    LossModule,
    SACLoss,
    SoftUpdate,
    ValueEstimators,
)
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.objectives.value import GAE
from torchrl.trainers import TargetNetUpdaterHook, Trainer, TrainerHookBase

from rlrun.errors import ConfigError, choose
from rlrun.policies import ActorCritic

ALGORITHMS = ("ppo", "dqn", "sac")


@dataclass
class Algorithm:
    """A loss module, how many optimisation steps each batch gets, and the hooks it needs."""

    loss: LossModule
    optim_steps_per_batch: int
    num_epochs: int = 1
    max_grad_norm: float | None = None
    hooks: list[TrainerHookBase] = field(default_factory=list)
    # Off-policy: learn from the replay buffer, act through ``exploration`` appended to the actor
    # in the collector, and step ``target_updater`` (saved in checkpoints by the Trainer).
    off_policy: bool = False
    exploration: TensorDictModule | None = None
    target_updater: TargetNetUpdater | None = None


class PPOMinibatcher(TrainerHookBase):
    """On-policy data flow: GAE over the fresh batch, then minibatches of it for each step.

    Advantages are computed once per batch, without gradients, over the time dimension; for a
    recurrent critic in sequence mode (``set_recurrent_mode(True)``) with vmap off.
    """

    def __init__(
        self, advantage: GAE, minibatch_size: int, frames_per_batch: int, recurrent: bool
    ) -> None:
        self.advantage = advantage
        self.recurrent = recurrent
        self.buffer = TensorDictReplayBuffer(
            storage=LazyTensorStorage(frames_per_batch),
            sampler=SamplerWithoutReplacement(drop_last=True),
            batch_size=minibatch_size,
        )

    def process_batch(self, batch: TensorDictBase) -> TensorDictBase:
        with torch.no_grad(), set_recurrent_mode(self.recurrent):
            self.advantage(batch)
        self.buffer.empty()
        self.buffer.extend(batch.reshape(-1))
        return batch

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        return self.buffer.sample()

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "ppo_minibatcher") -> None:
        trainer.register_op("batch_process", self.process_batch)
        trainer.register_op("process_optim_batch", self.sample)


def _make_ppo(cfg: DictConfig, ac: ActorCritic, frames_per_batch: int) -> Algorithm:
    if ac.critic is None:
        raise ConfigError("algo=ppo needs a critic: the policy factory returned critic=None.")
    if cfg.minibatch_size > frames_per_batch or frames_per_batch % cfg.minibatch_size:
        raise ConfigError(
            f"algo.minibatch_size={cfg.minibatch_size} must divide "
            f"collector.frames_per_batch={frames_per_batch}."
        )
    loss = ClipPPOLoss(
        ac.actor,
        ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    advantage = GAE(
        gamma=cfg.gamma,
        lmbda=cfg.gae_lambda,
        value_network=ac.critic,
        average_gae=False,
        deactivate_vmap=ac.recurrent,
    )
    loss.set_keys(value_target="value_target", advantage="advantage")
    hook = PPOMinibatcher(advantage, cfg.minibatch_size, frames_per_batch, ac.recurrent)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=frames_per_batch // cfg.minibatch_size,
        num_epochs=cfg.epochs,
        max_grad_norm=cfg.max_grad_norm,
        hooks=[hook],
    )


class TargetUpdate(TargetNetUpdaterHook):
    """TorchRL's target-network hook, stepped after every optimisation step (its own
    ``register`` steps it once per collected batch)."""

    def register(self, trainer: Trainer, name: str = "target_update") -> None:
        trainer.register_op("post_optim", self)


class AnnealExploration(TrainerHookBase):
    """Anneal an exploration module (``EGreedyModule.step``) by the frames of each batch."""

    def __init__(self, module: EGreedyModule) -> None:
        self.module = module

    def anneal(self, batch: TensorDictBase) -> None:
        self.module.step(batch.numel())

    def log(self, batch: TensorDictBase) -> dict[str, Any]:
        return {"train/epsilon": self.module.eps.item()}

    def state_dict(self) -> dict[str, Any]:
        return self.module.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.module.load_state_dict(state_dict)

    def register(self, trainer: Trainer, name: str = "exploration") -> None:
        trainer.register_module(name, self)
        trainer.register_op("batch_process", self.anneal)
        trainer.register_op("pre_steps_log", self.log)


def _optim_steps(utd_ratio: float, frames_per_batch: int) -> int:
    """Update-to-data ratio (optimisation steps per collected frame) -> steps per batch."""
    if utd_ratio <= 0:
        raise ConfigError(f"algo.utd_ratio={utd_ratio} must be > 0 (e.g. 0.5, 1).")
    return max(1, round(utd_ratio * frames_per_batch))


def _target_updater(cfg: DictConfig, loss: LossModule) -> TargetNetUpdater:
    kind = choose("algo.target_update", cfg.target_update, ("hard", "soft"))
    if kind == "hard":
        return HardUpdate(loss, value_network_update_interval=cfg.target_update_period)
    return SoftUpdate(loss, tau=cfg.tau)


def _make_dqn(cfg: DictConfig, ac: ActorCritic, frames_per_batch: int) -> Algorithm:
    if ac.qvalue is None:
        raise ConfigError(
            "algo=dqn needs a Q-network: set policy._target_=rlrun.policies.make_qvalue_actor "
            "(or start from +experiment=dqn)."
        )
    loss = DQNLoss(
        ac.qvalue, loss_function=cfg.loss_function, delay_value=True, double_dqn=cfg.double_dqn
    )
    loss.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    exploration = EGreedyModule(
        ac.actor.spec["action"],
        eps_init=float(cfg.eps_start),
        eps_end=float(cfg.eps_end),
        annealing_num_steps=cfg.eps_anneal_frames,
        device=next(ac.qvalue.parameters()).device,
    )
    updater = _target_updater(cfg, loss)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=_optim_steps(cfg.utd_ratio, frames_per_batch),
        max_grad_norm=cfg.max_grad_norm,
        hooks=[AnnealExploration(exploration), TargetUpdate(updater)],
        off_policy=True,
        exploration=exploration,
        target_updater=updater,
    )


def _make_sac(cfg: DictConfig, ac: ActorCritic, frames_per_batch: int) -> Algorithm:
    if ac.qvalue is None:
        raise ConfigError(
            "algo=sac needs a Q(s, a) network: set policy._target_=rlrun.policies."
            "make_sac_networks (or start from +experiment=sac)."
        )
    loss = SACLoss(
        ac.actor,
        ac.qvalue,
        num_qvalue_nets=cfg.num_qvalue_nets,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha_init,
        # -|A|, from the last dim only: the spec carries the env batch dims too.
        target_entropy=-float(ac.actor.spec["action"].shape[-1]),
        delay_qvalue=True,
    )
    loss.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    updater = SoftUpdate(loss, tau=cfg.tau)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=_optim_steps(cfg.utd_ratio, frames_per_batch),
        max_grad_norm=cfg.max_grad_norm,
        hooks=[TargetUpdate(updater)],
        off_policy=True,
        target_updater=updater,
    )


def make_algorithm(cfg: DictConfig, ac: ActorCritic, frames_per_batch: int) -> Algorithm:
    """Build the loss and its hooks for ``algo.name``."""
    name = choose("algo.name", cfg.name, ALGORITHMS)
    return {"ppo": _make_ppo, "dqn": _make_dqn, "sac": _make_sac}[name](cfg, ac, frames_per_batch)
