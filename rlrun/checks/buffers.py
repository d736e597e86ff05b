"""The ``replay_buffer`` group against the batches that fill it."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.errors import ConfigError


def check_replay_buffer(cfg: DictConfig, env: DictConfig, collector: DictConfig) -> None:
    """The sampler against the batch it fills; single frames against the env's stacks."""
    if cfg.single_frames:
        if env.atari is None:
            raise ConfigError(
                "replay_buffer.single_frames=true stores the frames of stacked image "
                f"observations, which env.id={env.id} does not have (env.atari); set it to false."
            )
        if cfg.sampler != "random" or collector.traj_ids is False:
            raise ConfigError(
                "replay_buffer.single_frames=true samples slices of consecutive frames of one "
                "trajectory itself: it needs replay_buffer.sampler=random and trajectory ids "
                "(collector.traj_ids not false); or set replay_buffer.single_frames=false."
            )
    if cfg.sampler == "slice" and cfg.batch_size % cfg.slice_len:
        raise ConfigError(
            f"replay_buffer.slice_len={cfg.slice_len} must divide "
            f"replay_buffer.batch_size={cfg.batch_size}."
        )
