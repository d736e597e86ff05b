"""TorchRL loggers from the ``logger`` config group, several at once behind one fan-out logger.

Each backend writes under the run folder (``csv/``, ``tensorboard/``, ``wandb/``), every metric
against collected frames, and the composed config is logged as hyperparameters.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torchrl.record.loggers import CSVLogger, Logger, TensorboardLogger


def flatten_config(cfg: DictConfig | dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and None become strings (TensorBoard wants
    plain scalars)."""
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    flat: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten_config(value, prefix=f"{name}."))
        elif isinstance(value, bool | int | float | str):
            flat[name] = value
        else:
            flat[name] = str(value)
    return flat


class MultiLogger(Logger):
    """Send every call to each of several TorchRL loggers (the Trainer takes one)."""

    def __init__(self, loggers: Sequence[Logger]) -> None:
        self.loggers = list(loggers)
        self.exp_name = self.loggers[0].exp_name if self.loggers else "rlrun"
        self.log_dir = self.loggers[0].log_dir if self.loggers else ""
        self.experiment = None

    def _create_experiment(self) -> None:
        return None

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        for logger in self.loggers:
            logger.log_scalar(name, value, step=step)

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs) -> None:
        for logger in self.loggers:
            logger.log_video(name, video, step=step, **kwargs)

    def log_hparams(self, cfg: DictConfig | dict) -> None:
        """Log the composed config, flattened to ``a.b.c`` keys of plain values."""
        flat = flatten_config(cfg)
        for logger in self.loggers:
            logger.log_hparams(flat)

    def log_histogram(self, name: str, data: Sequence, **kwargs) -> None:
        for logger in self.loggers:
            logger.log_histogram(name, data, **kwargs)

    def close(self, timeout: float | None = None) -> None:
        """Flush and close every backend (W&B runs are finished here)."""
        for logger in self.loggers:
            if isinstance(logger, TensorboardLogger):
                logger.experiment.close()
            elif hasattr(logger, "experiment") and hasattr(logger.experiment, "finish"):
                logger.experiment.finish()
            elif isinstance(logger, CSVLogger):
                for f in logger.experiment.files.values():
                    f.close()
                logger.experiment.files.clear()

    def __repr__(self) -> str:
        return f"MultiLogger({self.loggers})"


def _wandb_logger(cfg: DictConfig, run_dir: Path, exp_name: str) -> Logger:
    from torchrl.record.loggers.wandb import WandbLogger

    mode = cfg.mode
    if mode == "auto":
        has_key = bool(os.environ.get("WANDB_API_KEY")) or (Path.home() / ".netrc").exists()
        mode = "online" if has_key else "offline"
    return WandbLogger(
        exp_name=exp_name,
        save_dir=str(run_dir),
        project=cfg.project,
        entity=cfg.entity,
        group=cfg.group,
        tags=list(cfg.tags) or None,
        offline=mode == "offline",
        mode=mode,
        log_env_packages=False,
    )


def make_logger(cfg: DictConfig, run_dir: Path, exp_name: str) -> MultiLogger:
    """Build the chosen loggers; with none chosen the fan-out is empty (summary.json remains)."""
    loggers: list[Logger] = []
    if cfg.csv:
        loggers.append(CSVLogger(exp_name="csv", log_dir=str(run_dir)))
    if cfg.tensorboard:
        loggers.append(TensorboardLogger(exp_name="tensorboard", log_dir=str(run_dir)))
    if cfg.wandb:
        loggers.append(_wandb_logger(cfg, run_dir, exp_name))
    if cfg.mlflow:
        from torchrl.record.loggers.mlflow import MLFlowLogger

        loggers.append(MLFlowLogger(exp_name=exp_name, tracking_uri=(run_dir / "mlruns").as_uri()))
    return MultiLogger(loggers)
