"""The ``logger`` group: what a chosen backend needs before the run starts."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.builders.tracking import wandb_auth_problem
from rlrun.errors import ConfigError


def check_wandb_credentials(cfg: DictConfig) -> None:
    """``logger.mode=online`` needs W&B credentials: without them ``wandb.init`` fails only
    once the run is built (``auto`` logs offline instead)."""
    if not cfg.wandb or cfg.mode != "online":
        return
    problem = wandb_auth_problem()
    if problem is not None:
        raise ConfigError(
            f"logger.mode=online: {problem}; run `wandb login` or set WANDB_API_KEY, or use "
            "logger.mode=offline (or auto: online only with credentials)."
        )
