"""TorchRL loggers from the ``logger`` config group, several at once behind one fan-out logger.

Each backend writes under the run folder (``csv/``, ``tensorboard/``, ``wandb/``, ``mlflow/``:
``rlrun/builders/mlflow_logger.py``), every metric against collected frames, and the composed
config is logged as hyperparameters. A W&B or MLflow server out of reach at start is found within
seconds (``rlrun/builders/tracking.py``): the run then logs locally and says so, or stops
(``logger.strict``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from torch import Tensor
from torchrl.record.loggers import CSVLogger, Logger, TensorboardLogger

from rlrun.config import redact_secrets

# how long a W&B run's end waits for uploads (wandb's finish_timeout; its default waits for as
# long as they take, forever once the server is lost): what is left stays in the run's .wandb
# file for `wandb sync`
WANDB_FINISH_TIMEOUT_S = 120.0
log = logging.getLogger(__name__)


def flatten_config(cfg: DictConfig | dict, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``; lists and None become strings (TensorBoard wants
    plain scalars)."""
    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True)
    if not prefix:
        cfg = redact_secrets(cfg)
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

    def _create_experiment(self) -> None:  # Logger's abstract method: every logger defines it
        return None

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        for logger in self.loggers:
            logger.log_scalar(name, value, step=step)

    def log_video(self, name: str, video: Any, step: int | None = None, **kwargs) -> None:
        """Videos go to the backends that display them; CSV would dump raw frames (the run
        folder's ``videos/*.mp4`` stands in for it)."""
        for logger in self.loggers:
            if not isinstance(logger, CSVLogger):
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
        """Flush and close every backend (W&B runs are finished here), even if one fails."""
        errors = []
        for logger in self.loggers:
            try:
                close_logger(logger)
            except Exception as err:  # close the others, then report
                errors.append(err)
        self.loggers.clear()
        if errors:
            raise errors[0]

    def __repr__(self) -> str:
        return f"MultiLogger({self.loggers})"


class TensorboardVideoLogger(TensorboardLogger):
    """TorchRL's TensorBoard logger whose videos TensorBoard shows: ``add_video`` needs
    ``moviepy.editor`` (gone in moviepy 2) and otherwise writes nothing, so the video is written
    the way ``add_video`` writes it, an animated GIF image summary (the Images tab)."""

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        from rlrun.builders.videos import FPS, frames_of, gif_bytes

        frames = frames_of(video)
        _, height, width, channels = frames.shape
        image = Summary.Image(
            height=height,
            width=width,
            colorspace=channels,
            encoded_image_string=gif_bytes(frames, kwargs.get("fps", FPS)),
        )
        summary = Summary(value=[Summary.Value(tag=name, image=image)])
        self.experiment._get_file_writer().add_summary(summary, step)


def close_logger(logger: Logger) -> None:
    """TorchRL loggers have no common ``close``: flush files, finish W&B/MLflow runs."""
    if isinstance(logger, TensorboardLogger):
        logger.experiment.close()
    elif isinstance(logger, CSVLogger):
        for f in logger.experiment.files.values():
            f.close()
        logger.experiment.files.clear()
    elif hasattr(logger.experiment, "finish"):  # wandb
        logger.experiment.finish()
    else:  # MLflowRunLogger: sends what is left, ends the MLflow run
        logger.close()


def wandb_run_id(run_dir: Path) -> str:
    """One W&B run per run folder: the id is kept in ``wandb/run_id`` so a resume continues it."""
    path = run_dir / "wandb" / "run_id"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(uuid.uuid4().hex[:12])
    return path.read_text().strip()


def sweep_group() -> str | None:
    """In a Hydra multirun, the sweep folder (``2026-11-22_10-00-00``): its jobs share a group."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    return "_".join(Path(HydraConfig.get().sweep.dir).parts[-2:])


def _wandb_logger(cfg: DictConfig, run_dir: Path, exp_name: str) -> Logger:
    """A W&B run; online (``logger.mode=online``, or ``auto`` with credentials) only when its
    server answers, else offline in ``<run folder>/wandb/`` for ``wandb sync``."""
    import wandb
    from torchrl.record.loggers.wandb import WandbLogger

    from rlrun.builders.tracking import (
        PROBE_TIMEOUT_S,
        reachable,
        stop_if_strict,
        wandb_auth_problem,
        wandb_base_url,
    )
    from rlrun.folders.run_dirs import shown

    mode = cfg.mode
    if mode == "auto":
        mode = "offline" if wandb_auth_problem() else "online"
    server = wandb_base_url() if mode == "online" else None
    lost = server is not None and not reachable(server)
    if lost:
        stop_if_strict(cfg, f"W&B server {server}")
        mode = "offline"
    logger = WandbLogger(
        exp_name=exp_name,
        save_dir=str(run_dir),
        project=cfg.project,
        entity=cfg.entity,
        group=cfg.group or sweep_group(),
        id=wandb_run_id(run_dir),
        tags=list(cfg.tags) or None,
        # mode alone: TorchRL's offline=True also sets WANDB_MODE for the whole process (wandb
        # then warns that it is ignored, once started, and later jobs of a sweep would inherit it)
        mode=mode,
        log_env_packages=False,
        settings=wandb.Settings(finish_timeout=WANDB_FINISH_TIMEOUT_S),
    )
    if lost:
        sync_dir = shown(Path(logger.experiment.settings.sync_dir))
        log.warning(
            f"W&B server {server} not reachable within {PROBE_TIMEOUT_S:g} s: logging offline; "
            f"upload later: wandb sync {sync_dir}"
        )
    return logger


def make_logger(cfg: DictConfig, run_dir: Path, exp_name: str) -> MultiLogger:
    """Build the chosen loggers; with none chosen the fan-out is empty (summary.json remains)."""
    loggers: list[Logger] = []
    try:
        if cfg.csv:
            loggers.append(CSVLogger(exp_name="csv", log_dir=str(run_dir)))
        if cfg.tensorboard:
            loggers.append(TensorboardVideoLogger(exp_name="tensorboard", log_dir=str(run_dir)))
        if cfg.wandb:
            loggers.append(_wandb_logger(cfg, run_dir, exp_name))
        if cfg.mlflow:
            from rlrun.builders.mlflow_logger import mlflow_logger

            loggers.append(mlflow_logger(cfg, run_dir))
    except BaseException:  # e.g. a bad logger.tracking_uri: finish the W&B run already started
        MultiLogger(loggers).close()
        raise
    return MultiLogger(loggers)
