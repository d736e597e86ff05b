"""The on-policy data flow PPO and A2C share, written once: GAE advantages over each fresh
batch, then minibatches of it (``OnPolicyBatches``), and the log-prob check that tells a replay
which breaks a recurrent policy's hidden state."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.data.replay_buffers import SamplerWithoutReplacement
from torchrl.objectives import LossModule
from torchrl.objectives.value import GAE
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.groups import per_group
from rlrun.builders.policies import ActorCritic
from rlrun.builders.training import Context, Training
from rlrun.errors import ConfigError


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


class OnPolicyBatches(TrainerHookBase):
    """On-policy data flow (PPO, A2C): GAE over the fresh batch, then minibatches of it for
    each step (A2C: one minibatch, the whole batch).

    Advantages are computed once per batch, without gradients, over the time dimension, in the
    policy's ``loss`` recurrent mode. A recurrent policy's minibatches are whole sequences: the
    ``[num_envs, T]`` batch is cut into rows of ``sequence_length`` steps (default: ``T``) and
    rows, never single steps, are shuffled. Before the first update the recomputed log-probs
    must match the collected ones, else the run stops (``algo.logprob_check_tol``; ``None``:
    no check, for a loss without an importance ratio).
    """

    def __init__(
        self,
        parts: list[tuple[GAE, LossModule]],
        ac: ActorCritic,
        minibatch_size: int,
        frames_per_batch: int,
        sequence_length: int | None,
        logprob_check_tol: float | None,
        device: torch.device,
        fresh_batches: bool = True,
    ) -> None:
        self.parts = parts  # each group's advantages and loss (one, or a team's several groups)
        self.device = device  # the learner's: minibatches are stored and sampled there
        self.ac = ac
        self.minibatch_size = minibatch_size
        self.sequence_length = sequence_length
        self.tol = logprob_check_tol
        # Stop on a mismatch only where one means a broken replay: a recurrent policy fed batches
        # collected with the current weights (an async collector's batches are a step stale).
        self.guard = ac.recurrent and fresh_batches and logprob_check_tol is not None
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
        batch = batch.exclude(*(advantage.tensor_keys.value for advantage, _ in self.parts))
        with torch.no_grad(), self.ac.scope("loss"):
            for advantage, _ in self.parts:
                advantage(batch)
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
        if self.tol is None:
            return
        with self.ac.scope("loss"):
            checks = [
                log_prob_error(loss.actor_network, data, loss.tensor_keys) for _, loss in self.parts
            ]
        self.check = {  # the worst group's
            key: max(check[key] for check in checks) for key in checks[0]
        }
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

    def register(self, trainer: Trainer, name: str = "on_policy_batches") -> None:
        trainer.register_op("batch_process", self.process_batch)
        trainer.register_op("process_optim_batch", self.sample)
        trainer.register_op("pre_steps_log", self.log)


def require_critic(ac: ActorCritic, algo: str) -> None:
    """PPO and A2C train ``ac.critic``: a policy factory without one is a user's mistake."""
    if ac.critic is None:
        raise ConfigError(f"algo={algo} needs a critic: the policy factory returned critic=None.")


def make_gae(cfg: DictConfig, ac: ActorCritic, loss: LossModule, estimator: type[GAE] = GAE) -> GAE:
    """GAE (or the ``estimator`` subclass: a team's ``MultiAgentGAE``) with ``algo.gamma`` and
    ``algo.gae_lambda`` on ``ac.critic``, reading the value, reward and done keys ``loss`` reads
    and writing those it takes (``advantage``, ``value_target``; a team's: in the group of its
    values, ``(group, "advantage")``)."""
    value = loss.tensor_keys.value
    group = value[:-1] if isinstance(value, tuple) else ()
    loss.set_keys(value_target=(*group, "value_target"), advantage=(*group, "advantage"))
    gae = estimator(
        gamma=cfg.gamma,
        lmbda=cfg.gae_lambda,
        value_network=ac.critic,
        average_gae=False,
        # vmap has no batching rule for aten::lstm; shifted=True would pair each next
        # observation with a stale hidden state.
        deactivate_vmap=ac.recurrent,
        shifted=False,
    )
    keys = loss.tensor_keys
    shared = ("value", "reward", "done", "terminated", "advantage", "value_target")
    gae.set_keys(**{key: getattr(keys, key) for key in shared})
    return gae


def on_policy(
    cfg: DictConfig,
    loss: LossModule,
    ctx: Context,
    minibatch_size: int,
    *,
    epochs: int = 1,
    sequence_length: int | None = None,
    logprob_check_tol: float | None = None,
    estimator: type[GAE] = GAE,
) -> Training:
    """``loss`` trained on each fresh batch: GAE advantages (``algo.gamma``,
    ``algo.gae_lambda``), then ``epochs`` passes over minibatches of ``minibatch_size`` frames
    (whole sequences of ``sequence_length`` steps for a recurrent policy), the log-probs checked
    against the collected ones first (``logprob_check_tol``; None: no check); ``estimator``:
    the advantages' class (a team's: ``MultiAgentGAE``). A team of several groups: ``loss`` is
    a :class:`~rlrun.builders.groups.GroupLosses`, each group's advantages its own."""
    parts = [
        (make_gae(cfg, ctx.ac.groups.get(group, ctx.ac), part, estimator), part)
        for group, part in per_group(loss).items()
    ]
    hook = OnPolicyBatches(
        parts,
        ctx.ac,
        minibatch_size,
        ctx.frames_per_batch,
        sequence_length,
        logprob_check_tol,
        ctx.device,
        ctx.fresh_batches,
    )
    return Training(
        loss=loss,
        optim_steps_per_batch=ctx.frames_per_batch // minibatch_size,
        num_epochs=epochs,
        max_grad_norm=cfg.max_grad_norm,
        hooks=[hook],
        advantages=[advantage for advantage, _ in parts],
    )
