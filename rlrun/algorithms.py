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
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.modules import set_recurrent_mode
from torchrl.objectives import ClipPPOLoss, LossModule
from torchrl.objectives.value import GAE
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.errors import ConfigError, choose
from rlrun.policies import ActorCritic

ALGORITHMS = ("ppo",)


@dataclass
class Algorithm:
    """A loss module, how many optimisation steps each batch gets, and the hooks it needs."""

    loss: LossModule
    optim_steps_per_batch: int
    num_epochs: int = 1
    max_grad_norm: float | None = None
    hooks: list[TrainerHookBase] = field(default_factory=list)


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


def make_algorithm(cfg: DictConfig, ac: ActorCritic, frames_per_batch: int) -> Algorithm:
    """Build the loss and its hooks for ``algo.name``."""
    name = choose("algo.name", cfg.name, ALGORITHMS)
    return {"ppo": _make_ppo}[name](cfg, ac, frames_per_batch)
