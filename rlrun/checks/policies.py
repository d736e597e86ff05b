"""The ``policy`` group's own rules: its recurrent modes."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.config import PHASES, STEPPING_PHASES
from rlrun.errors import ConfigError


def check_policy(cfg: DictConfig) -> None:
    """``policy.recurrent_mode``: known phases; those that step envs cannot be in sequence mode."""
    for phase, sequence in (cfg.get("recurrent_mode") or {}).items():
        if phase not in PHASES:
            raise ConfigError(
                f"policy.recurrent_mode.{phase} is not a phase; choose one of: {', '.join(PHASES)}."
            )
        if sequence and phase in STEPPING_PHASES:
            raise ConfigError(
                f"policy.recurrent_mode.{phase}=true is not valid: {phase} steps the envs one time "
                "step at a time (sequence mode would read the env batch as time); set it to false."
            )
