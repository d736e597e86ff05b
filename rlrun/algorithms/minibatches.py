"""Clipped PPO's minibatches against the collected batch (``algo.minibatch_size``,
``algo.sequence_length``), for the algorithms that cut each fresh batch into them: one agent's
PPO or a team's (their declarations' ``check``): written once, in no algorithm's module."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.config import RECURRENT_KINDS
from rlrun.errors import ConfigError


def check_minibatches(cfg: DictConfig) -> None:
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
