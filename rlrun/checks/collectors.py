"""The ``collector`` group: the kind against its policy options and the env's statistics."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.errors import ConfigError


def check_collector(cfg: DictConfig, env: DictConfig) -> None:
    """The collector kind against its policy options and the env's running statistics."""
    if env.normalize_observations and (cfg.kind != "sync" or env.parallel):
        raise ConfigError(
            "env.normalize_observations=true keeps its statistics in this process, where "
            "evaluation and checkpoints read them; use collector=sync with env.parallel=false, "
            "or set env.normalize_observations=false."
        )
    if cfg.kind == "ray" and cfg.sync and cfg.frames_per_batch % cfg.num_workers:
        raise ConfigError(
            f"collector.frames_per_batch={cfg.frames_per_batch} must divide among the "
            f"{cfg.num_workers} workers of collector=ray (collector.sync=true: each collects "
            "an equal share); change either, or set collector.sync=false."
        )
    if cfg.kind == "sync":
        if cfg.policy_factory:
            raise ConfigError(
                "collector.policy_factory is for worker processes; collector=sync runs the "
                "policy in this process. Use collector=multi_sync or async, or drop the factory."
            )
        return
    if cfg.traj_ids is False:
        raise ConfigError(
            f"collector.traj_ids=false: collector={cfg.kind} always writes trajectory ids (its "
            "workers' batches are merged by them); only collector=sync can skip them."
        )
    if cfg.policy_copy == "never" and not cfg.policy_factory:
        raise ConfigError(
            f"collector.policy_copy=never runs the policy in place, but collector={cfg.kind} "
            f"runs it in {cfg.num_workers} worker processes. Set collector.policy_factory to a "
            "function each worker calls (e.g. collector.policy_factory='${policy._target_}')."
        )
