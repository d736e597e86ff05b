"""PPO (``algo=ppo``): TorchRL's ``ClipPPOLoss`` with GAE, fed minibatches of each fresh batch.

The loss comes with the hook that computes advantages over the collected batch and cuts it into
minibatches (whole sequences for a recurrent policy; ``rlrun/builders/onpolicy.py``, shared with
the other on-policy algorithms).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import Algorithm, Data
from rlrun.config import POSITIVE, RECURRENT_KINDS, OnPolicyConfig, ranged
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class PPOConfig(OnPolicyConfig):
    """Clipped PPO's keys (``conf/algo/ppo.yaml``)."""

    clip_epsilon: float = ranged(**POSITIVE)
    normalize_advantage: bool = MISSING
    epochs: int = ranged(1)
    minibatch_size: int = ranged(1)
    sequence_length: int | None = ranged(1)
    logprob_check_tol: float = ranged(**POSITIVE)


def check(cfg: DictConfig) -> None:
    """A minibatch divides the collected batch, and a recurrent policy's sequences divide the
    batch's rows and make up whole minibatches (checked before anything is built; the batch's
    layout is known here for ``collector=sync``, others are checked on their first batch)."""
    batch, size = cfg.collector.frames_per_batch, cfg.algo.minibatch_size
    if size > batch or batch % size:
        raise ConfigError(
            f"algo.minibatch_size={size} must divide a collected batch "
            f"(collector.frames_per_batch={batch})."
        )
    length = cfg.algo.sequence_length
    if cfg.policy.get("kind") not in RECURRENT_KINDS or cfg.collector.kind != "sync":
        return
    steps = batch // cfg.env.num_envs  # each env's row of the [num_envs, steps] batch
    if length is not None and (length > steps or steps % length):
        valid = [d for d in range(1, steps + 1) if steps % d == 0]
        raise ConfigError(
            f"algo.sequence_length={length} must divide the batch's time dimension "
            f"(collector.frames_per_batch / env.num_envs = {steps}); valid: "
            f"{', '.join(map(str, valid))} or null (whole rows)."
        )
    if size % (length or steps):
        raise ConfigError(
            f"algo.minibatch_size={size} must be a multiple of the sequence length "
            f"{length or steps} (algo.sequence_length, or the batch's time dimension)."
        )


def build(cfg: DictConfig, ctx: Context) -> Training:
    """Clipped PPO on the actor and critic of ``ac``; ``ctx.fresh_batches``: each batch was
    collected with the weights of the previous update (not so for an async collector)."""
    from rlrun.builders.onpolicy import on_policy, require_critic
    from rlrun.compat.torchrl import CapturablePPOLoss

    require_critic(ctx.ac, cfg.name)
    loss = CapturablePPOLoss(
        ctx.ac.actor,
        ctx.ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    if ctx.ac.recurrent and not ctx.ac.recurrent_mode["loss"]:
        raise ConfigError(
            f"policy.recurrent_mode.loss=false is not valid with algo={cfg.name}: TorchRL's PPO "
            "loss replays whole sequences (it sets the mode itself); set it to true."
        )
    return on_policy(
        cfg,
        loss,
        ctx,
        cfg.minibatch_size,
        epochs=cfg.epochs,
        sequence_length=cfg.sequence_length,
        logprob_check_tol=cfg.logprob_check_tol,
    )


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_actor_critic",
    summary="Clipped PPO with GAE, minibatches of each fresh batch; MLP, LSTM, GRU or CNN",
    schema=PPOConfig,
    data=Data.ON_POLICY,
    sequences=True,
    cudagraphs=True,
    check=check,
)
