"""Every ``_target_`` a user may swap (policy, optimiser, transforms, hooks) imports."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.builders.hook_entries import HookEntry
from rlrun.builders.imports import importable
from rlrun.errors import ConfigError


def check_targets(cfg: DictConfig, hooks: list[HookEntry]) -> None:
    """Every ``_target_`` a user may swap (policy, optimiser, transforms, hooks) imports."""
    targets = {
        "policy._target_": cfg.policy.get("_target_"),
        "optim._target_": cfg.optim._target_,
        "collector.policy_factory": cfg.collector.policy_factory,
    }
    for group in ("env", "replay_buffer"):
        for i, transform in enumerate(cfg[group].transforms):
            targets[f"{group}.transforms[{i}]._target_"] = transform.get("_target_")
    for entry in hooks:
        targets[f"hooks.{entry.name}._target_"] = entry.options.get("_target_")
    for key, target in targets.items():
        why = importable(target) if target else None
        if why is not None:
            raise ConfigError(f"{key}={target} cannot be imported: {why}")
