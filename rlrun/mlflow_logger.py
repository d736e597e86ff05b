"""MLflow for ``logger=mlflow``: TorchRL's MLFlowLogger, one MLflow run per run folder.

By default the tracking store is a SQLite file in ``<run folder>/mlflow/`` (MLflow 3 refuses new
folder stores), its artifacts beside it; ``logger.tracking_uri`` names another store (not
``MLFLOW_TRACKING_URI`` on its own: MLflow sets that variable itself, so in a sweep run in one
process a job would read the last job's store; ``'${oc.env:MLFLOW_TRACKING_URI}'`` passes it)
and ``logger.experiment`` the experiment.
"""

from __future__ import annotations

import logging
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any
from urllib.parse import urlparse

import mlflow
from mlflow.exceptions import MlflowException
from torch import Tensor
from torchrl.record.loggers.mlflow import MLFlowLogger

from rlrun.errors import ConfigError
from rlrun.videos import FPS, frames_of, write_mp4


class MLflowRunLogger(MLFlowLogger):
    """TorchRL's MLflow logger with what a run folder needs: the run id kept in
    ``mlflow/run_id`` so a resume continues the same MLflow run (as W&B's), params a resume may
    change, and videos encoded with moviepy (TorchRL's writer needs torchcodec and FFmpeg)."""

    def __init__(
        self, experiment: str, tracking_uri: str, run_dir: Path, artifact_location: str | None
    ) -> None:
        self.run_id_file = run_dir / "mlflow" / "run_id"
        self.run_name = run_dir.name
        super().__init__(experiment, tracking_uri, artifact_location=artifact_location)

    @property
    def run_id(self) -> str:
        return self.experiment.info.run_id

    def _create_experiment(self) -> mlflow.ActiveRun:
        """Start this run folder's MLflow run, or continue it on a resume."""
        uri = mlflow.get_tracking_uri()
        try:
            found = mlflow.get_experiment_by_name(self._mlflow_kwargs["name"])
        except MlflowException as err:
            if err.error_code != "INVALID_PARAMETER_VALUE":
                raise
            raise ConfigError(f"logger.tracking_uri={uri}: {refusal(uri)}") from None
        self.id = found.experiment_id if found else mlflow.create_experiment(**self._mlflow_kwargs)
        if not self.run_id_file.is_file():
            run = mlflow.start_run(experiment_id=self.id, run_name=self.run_name)
            self.run_id_file.parent.mkdir(parents=True, exist_ok=True)
            self.run_id_file.write_text(run.info.run_id)
            return run
        run_id = self.run_id_file.read_text().strip()
        try:
            return mlflow.start_run(run_id=run_id)
        except MlflowException as err:
            if err.error_code != "RESOURCE_DOES_NOT_EXIST":
                raise
            raise ConfigError(
                f"MLflow run {run_id} (kept in {self.run_id_file}) is not in the tracking store "
                f"{uri}: resume with the logger.tracking_uri the run started with (a relative "
                "sqlite path from the same folder), or delete that file to start a new MLflow run."
            ) from None

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Queued by MLflow's async logging and written when the run ends, if not before: a
        synchronous SQLite write took about 20 ms per metric here."""
        mlflow.log_metric(name, value, step=step, synchronous=False)

    def log_hparams(self, cfg: dict[str, Any]) -> None:
        """MLflow params cannot change: a resume logs the new ones, and one it changed (e.g.
        ``trainer.total_frames``) becomes a tag of the same name holding the new value."""
        logged = mlflow.get_run(self.run_id).data.params
        mlflow.log_params({k: v for k, v in cfg.items() if k not in logged}, run_id=self.run_id)
        changed = {k: v for k, v in cfg.items() if k in logged and logged[k] != str(v)}
        if changed:
            mlflow.set_tags(changed)

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        """The video as an mp4 artifact ``videos/<name>-<step>.mp4`` (``/`` in name -> ``-``)."""
        fps = kwargs.get("fps", FPS)
        with TemporaryDirectory() as tmp:
            path = Path(tmp) / f"{name.replace('/', '-')}-{step or 0:012d}.mp4"
            write_mp4(frames_of(video), path, fps)
            mlflow.log_artifact(str(path), "videos", run_id=self.run_id)


def refusal(uri: str) -> str:
    """Why MLflow refused ``uri`` as a tracking store, and what to give instead."""
    fix = "use sqlite:///<path>.db (MLflow creates the file) or an http(s):// tracking server"
    if urlparse(uri).scheme in ("", "file"):
        return f"MLflow 3 no longer writes folder stores; {fix}."
    return f"MLflow has no tracking store of that kind; {fix}."


def mlflow_logger(cfg: Any, run_dir: Path) -> MLflowRunLogger:
    """The store: ``logger.tracking_uri``, else a SQLite file with an artifact folder in
    ``<run folder>/mlflow/``."""
    for name in ("mlflow.store.db.utils", "alembic"):  # a new store's schema-migration chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    uri, artifacts = cfg.tracking_uri, None
    if not uri:
        folder = (run_dir / "mlflow").absolute()
        folder.mkdir(parents=True, exist_ok=True)
        uri, artifacts = f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()
    return MLflowRunLogger(cfg.experiment, uri, run_dir, artifacts)
