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
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.modules import EGreedyModule
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

from rlrun.errors import ConfigError
from rlrun.policies import ActorCritic


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


def log_prob_error(
    actor: ProbabilisticTensorDictSequential, data: TensorDictBase, keys: Any
) -> dict[str, float]:
    """How far the actor's log-probs on ``data`` are from those stored at collection time.

    Without a parameter update they must agree (ratio 1, approx KL 0); they do not when the
    layout of ``data`` breaks a recurrent policy's hidden state (flattened or shuffled steps).
    """
    with torch.no_grad():
        dist = actor.get_dist(data.select(*actor.in_keys, strict=False))
        log_ratio = dist.log_prob(data.get(keys.action)) - data.get(keys.sample_log_prob)
    return {
        "logprob_error_mean": log_ratio.abs().mean().item(),
        "logprob_error_max": log_ratio.abs().max().item(),
        "logprob_check_kl": (log_ratio.exp() - 1 - log_ratio).mean().item(),
    }


class PPOMinibatcher(TrainerHookBase):
    """On-policy data flow: GAE over the fresh batch, then minibatches of it for each step.

    Advantages are computed once per batch, without gradients, over the time dimension, in the
    policy's ``loss`` recurrent mode. A recurrent policy's minibatches are whole sequences: the
    ``[num_envs, T]`` batch is cut into rows of ``sequence_length`` steps (default: ``T``) and
    rows, never single steps, are shuffled. Before the first update the recomputed log-probs
    must match the collected ones, else the run stops (``algo.logprob_check_tol``).
    """

    def __init__(
        self,
        advantage: GAE,
        loss: ClipPPOLoss,
        ac: ActorCritic,
        minibatch_size: int,
        frames_per_batch: int,
        sequence_length: int | None,
        logprob_check_tol: float,
        device: torch.device,
        fresh_batches: bool = True,
    ) -> None:
        self.advantage = advantage
        self.device = device  # the learner's: minibatches are stored and sampled there
        self.loss = loss
        self.ac = ac
        self.minibatch_size = minibatch_size
        self.sequence_length = sequence_length
        self.tol = logprob_check_tol
        # Stop on a mismatch only where one means a broken replay: a recurrent policy fed batches
        # collected with the current weights (an async collector's batches are a step stale).
        self.guard = ac.recurrent and fresh_batches
        self.frames_per_batch = frames_per_batch
        self.check: dict[str, float] = {}
        self.buffer: TensorDictReplayBuffer | None = None  # sized by the first batch's layout

    def sequences(self, batch: TensorDictBase) -> TensorDictBase:
        """``[num_envs, T]`` -> ``[N, L]`` rows of ``L = sequence_length`` consecutive steps
        (recurrent policies), or ``[num_envs * T]`` single steps (feed-forward ones)."""
        if not self.ac.recurrent:
            return batch.reshape(-1)
        steps = batch.shape[-1]
        length = self.sequence_length or steps
        if length > steps or steps % length:
            valid = [d for d in range(1, steps + 1) if steps % d == 0]
            raise ConfigError(
                f"algo.sequence_length={length} must divide the batch's time dimension "
                f"(collector.frames_per_batch / env.num_envs = {steps}); valid: "
                f"{', '.join(map(str, valid))} or null (whole rows)."
            )
        if self.minibatch_size % length:
            raise ConfigError(
                f"algo.minibatch_size={self.minibatch_size} must be a multiple of the sequence "
                f"length {length} (algo.sequence_length, or the batch's time dimension)."
            )
        return batch.reshape(-1, steps // length, length).reshape(-1, length)

    def process_batch(self, batch: TensorDictBase) -> TensorDictBase:
        # GAE recomputes the values; a collected copy in the root (not in "next") breaks the
        # root/next stack it runs the critic on.
        batch = batch.exclude(self.advantage.tensor_keys.value)
        with torch.no_grad(), self.ac.scope("loss"):
            self.advantage(batch)
        data = self.sequences(batch)
        self.check_log_probs(data)
        if self.buffer is None:
            self.buffer = TensorDictReplayBuffer(
                storage=LazyTensorStorage(self.frames_per_batch, device=self.device),
                sampler=SamplerWithoutReplacement(drop_last=True),
                batch_size=self.minibatch_size // data[0].numel(),  # sequences per minibatch
            )
        self.buffer.empty()
        self.buffer.extend(data)
        return batch

    def check_log_probs(self, data: TensorDictBase) -> None:
        with self.ac.scope("loss"):
            self.check = log_prob_error(self.loss.actor_network, data, self.loss.tensor_keys)
        if self.guard and not self.check["logprob_error_mean"] <= self.tol:
            raise ConfigError(
                "log-probs recomputed before the first update differ from the collected ones "
                f"(mean |log ratio| {self.check['logprob_error_mean']:.3g} > "
                f"algo.logprob_check_tol={self.tol}): the policy does not replay its collected "
                "sequences (check policy._target_ and policy.recurrent_mode)."
            )

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        return self.buffer.sample()

    def log(self, batch: TensorDictBase) -> dict[str, float]:
        return {f"train/{k}": v for k, v in self.check.items()}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "ppo_minibatcher") -> None:
        trainer.register_op("batch_process", self.process_batch)
        trainer.register_op("process_optim_batch", self.sample)
        trainer.register_op("pre_steps_log", self.log)


def _make_ppo(
    cfg: DictConfig,
    ac: ActorCritic,
    frames_per_batch: int,
    device: torch.device,
    fresh_batches: bool,
) -> Algorithm:
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
    if ac.recurrent and not ac.recurrent_mode["loss"]:
        raise ConfigError(
            "policy.recurrent_mode.loss=false is not valid with algo=ppo: TorchRL's PPO loss "
            "replays whole sequences (it sets the mode itself); set it to true."
        )
    if cfg.sequence_length is not None and cfg.sequence_length < 1:
        raise ConfigError(
            f"algo.sequence_length={cfg.sequence_length} is not valid; use a positive number of "
            "steps that divides the batch's time dimension, or null for whole env rows."
        )
    advantage = GAE(
        gamma=cfg.gamma,
        lmbda=cfg.gae_lambda,
        value_network=ac.critic,
        average_gae=False,
        # vmap has no batching rule for aten::lstm; shifted=True would pair each next
        # observation with a stale hidden state.
        deactivate_vmap=ac.recurrent,
        shifted=False,
    )
    loss.set_keys(value_target="value_target", advantage="advantage")
    hook = PPOMinibatcher(
        advantage,
        loss,
        ac,
        cfg.minibatch_size,
        frames_per_batch,
        cfg.sequence_length,
        cfg.logprob_check_tol,
        device,
        fresh_batches,
    )
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
    kind = cfg.target_update
    if kind == "hard":
        return HardUpdate(loss, value_network_update_interval=cfg.target_update_period)
    return SoftUpdate(loss, tau=cfg.tau)


def _make_dqn(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device
) -> Algorithm:
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
        device=device,
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


def _make_sac(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device
) -> Algorithm:
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


def make_algorithm(
    cfg: DictConfig,
    ac: ActorCritic,
    frames_per_batch: int,
    device: torch.device,
    fresh_batches: bool = True,
) -> Algorithm:
    """Build the loss and its hooks for ``algo.name`` on the learner's ``device`` (where ``ac``
    lives). ``fresh_batches``: every batch is collected with the weights of the previous update
    (false for an async collector)."""
    name = cfg.name
    if name == "ppo":
        return _make_ppo(cfg, ac, frames_per_batch, device, fresh_batches)
    return {"dqn": _make_dqn, "sac": _make_sac}[name](cfg, ac, frames_per_batch, device)
