"""MLflow for ``logger=mlflow``: TorchRL's MLFlowLogger, one MLflow run per run folder.

By default the tracking store is a SQLite file in ``<run folder>/mlflow/`` (MLflow 3 refuses new
folder stores), its artifacts beside it; ``logger.tracking_uri`` names another store (not
``MLFLOW_TRACKING_URI`` on its own: MLflow sets that variable itself, so in a sweep run in one
process a job would read the last job's store; ``'${oc.env:MLFLOW_TRACKING_URI}'`` passes it)
and ``logger.experiment`` the experiment.

A tracking server out of reach never holds training up. At start it is probed
(``rlrun/builders/tracking.py``): out of reach, the run logs to the SQLite store in its own folder
instead and says so (``logger.strict=true``: stops). Metrics and videos then go through an
:class:`Outbox` that a thread of its own sends, each request bounded by :data:`HTTP_LIMITS`:
rows a lost server does not take are kept and sent again; what it still has not taken when the
run ends is written to the run folder's store, and one line says where.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from mlflow import MlflowClient
from mlflow.entities import Metric, Param, Run, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking.context.registry import resolve_tags
from torch import Tensor
from torchrl.record.loggers.mlflow import MLFlowLogger

from rlrun.builders.tracking import PROBE_TIMEOUT_S, reachable, stop_if_strict
from rlrun.builders.videos import FPS, frames_of, write_mp4
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import shown

log = logging.getLogger(__name__)
# each MLflow request: 5 s, one retry (MLflow's defaults: 120 s, 7 retries with back-off, about
# 4 min before a lost server's error); the outbox retries by itself. A user's own values win.
HTTP_LIMITS = {
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "5",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
}
SEND_EVERY_S = 2.0  # how often the outbox sends what was logged since
MAX_METRICS = 1000  # per request (MLflow's limit for one log_batch)
RUN_ID = "run_id"  # the MLflow run of logger.tracking_uri, in <run folder>/mlflow/
LOCAL_RUN_ID = "local_run_id"  # the run folder's own store's, when it stands in for a server


def client_for(uri: str) -> MlflowClient:
    """A client of the store ``uri``; MLflow checks the kind of store here."""
    try:
        return MlflowClient(uri)
    except MlflowException as err:
        if err.error_code != "INVALID_PARAMETER_VALUE":
            raise
        raise ConfigError(f"logger.tracking_uri={uri}: {refusal(uri)}") from None


def open_run(
    client: MlflowClient, experiment: str, artifacts: str | None, id_file: Path, name: str
) -> Run:
    """The MLflow run ``name`` in ``client``'s store: started (its id kept in ``id_file``) or,
    on a resume, continued."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        experiment_id = client.create_experiment(experiment, artifact_location=artifacts)
    else:
        experiment_id = found.experiment_id
    if not id_file.is_file():
        run = client.create_run(experiment_id, run_name=name, tags=resolve_tags())
        id_file.write_text(run.info.run_id)
        return run
    run_id = id_file.read_text().strip()
    try:
        client.update_run(run_id, status="RUNNING")
    except MlflowException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        raise ConfigError(
            f"MLflow run {run_id} (kept in {id_file}) is not in the tracking store "
            f"{client.tracking_uri}: resume with the logger.tracking_uri the run started with "
            "(a relative sqlite path from the same folder), or delete that file to start a new "
            "MLflow run."
        ) from None
    return client.get_run(run_id)


def log_config(client: MlflowClient, run_id: str, params: dict[str, Any]) -> None:
    """MLflow params cannot change: a resume logs the new ones, and one it changed (e.g.
    ``trainer.total_frames``) becomes a tag of the same name holding the new value."""
    logged = client.get_run(run_id).data.params
    client.log_batch(
        run_id,
        params=[Param(k, str(v)) for k, v in params.items() if k not in logged],
        tags=[RunTag(k, str(v)) for k, v in params.items() if k in logged and logged[k] != str(v)],
        synchronous=True,
    )


class Outbox:
    """What a run logs to MLflow, sent every :data:`SEND_EVERY_S` by a thread of its own once
    started, so the training loop only appends. Rows the store does not take (a server lost
    mid-run) are kept, in order, and sent again next time; :meth:`close` hands back what is
    still here."""

    def __init__(self, client: MlflowClient, run_id: str, items: list[Metric | Path]) -> None:
        self.client, self.run_id = client, run_id
        self.items = items  # metric rows, and video files to upload
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.failing = False
        self.thread = threading.Thread(target=self._loop, name="rlrun-mlflow", daemon=True)

    def put(self, item: Metric | Path) -> None:
        with self.lock:
            self.items.append(item)

    def _loop(self) -> None:
        while not self.stopping.wait(SEND_EVERY_S):
            self.send()

    def _next(self) -> list[Metric | Path]:
        """The oldest item: a video, or the metric rows in a row up to MAX_METRICS."""
        with self.lock:
            head = self.items[:MAX_METRICS]
        videos = [i for i, item in enumerate(head) if isinstance(item, Path)]
        return head[:1] if videos[:1] == [0] else head[: videos[0] if videos else None]

    def send(self) -> None:
        """Send what is here, oldest first, until done or the store fails (the rest is kept)."""
        while chunk := self._next():
            try:
                if isinstance(chunk[0], Path):
                    self.client.log_artifact(self.run_id, str(chunk[0]), "videos")
                    chunk[0].unlink()
                else:
                    self.client.log_batch(self.run_id, metrics=chunk, synchronous=True)
            except Exception as err:  # MlflowException, or the requests' or file system's errors
                self._failed(err)
                return
            with self.lock:
                del self.items[: len(chunk)]
            if self.failing:
                self.failing = False
                log.info("MLflow store %s answers again", self.client.tracking_uri)

    def _failed(self, err: Exception) -> None:
        if not self.failing:  # one line per outage
            self.failing = True
            log.warning(
                f"MLflow store {self.client.tracking_uri} did not answer ({type(err).__name__}): "
                f"keeping what the run logs, sent again every {SEND_EVERY_S:g} s"
            )

    def close(self) -> list[Metric | Path]:
        """Stop the thread, send once more, and return what the store did not take."""
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join()
        self.send()
        return self.items


class MLflowRunLogger(MLFlowLogger):
    """TorchRL's MLflow logger with what a run folder needs: the run id kept in
    ``mlflow/run_id`` so a resume continues the same MLflow run (as W&B's), params a resume may
    change, videos encoded with moviepy (TorchRL's writer needs torchcodec and FFmpeg), and an
    :class:`Outbox` between the training loop and the store. With ``elsewhere``, the store is
    not the run folder's own, which then takes what that store did not by the end."""

    def __init__(
        self,
        experiment: str,
        tracking_uri: str,
        run_dir: Path,
        id_file: str = RUN_ID,
        elsewhere: bool = False,
    ) -> None:
        self.folder = (run_dir / "mlflow").absolute()
        self.run_name = run_dir.name
        self.id_file = self.folder / id_file
        self.elsewhere = elsewhere
        self.params: dict[str, Any] = {}
        self.client = client_for(tracking_uri)
        self.artifacts = None if elsewhere else local_store(self.folder)[1]
        super().__init__(experiment, tracking_uri, artifact_location=self.artifacts)
        self.outbox = Outbox(self.client, self.run_id, [])
        self.outbox.thread.start()

    @property
    def run_id(self) -> str:
        return self.experiment.info.run_id

    def _create_experiment(self) -> Run:
        """Start this run folder's MLflow run, or continue it on a resume."""
        experiment = self.exp_name  # TorchRL's Logger sets it before _create_experiment
        return open_run(self.client, experiment, self.artifacts, self.id_file, self.run_name)

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Queued for the outbox's thread: a synchronous SQLite write took about 20 ms per
        metric here, an HTTP one as long as the server takes."""
        self.outbox.put(Metric(name, float(value), int(time.time() * 1000), step or 0))

    def log_hparams(self, cfg: dict[str, Any]) -> None:
        """Logged at once (the run is being built), and kept for the run folder's store."""
        self.params = dict(cfg)
        log_config(self.client, self.run_id, self.params)

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        """The video as an mp4 artifact ``videos/<name>-<step>.mp4`` (``/`` in name -> ``-``),
        written to ``mlflow/outbox/`` until the outbox has sent it."""
        folder = self.folder / "outbox"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{name.replace('/', '-')}-{step or 0:012d}.mp4"
        write_mp4(frames_of(video), path, kwargs.get("fps", FPS))
        self.outbox.put(path)

    def close(self, timeout: float | None = None) -> None:
        """Send what is left and end the MLflow run; what a store elsewhere did not take goes
        to the run folder's store, and one line says so."""
        left = self.outbox.close()
        try:
            self.client.set_terminated(self.run_id)
        except Exception as err:  # MlflowException, the requests' errors
            if not self.elsewhere:
                raise
            log.warning(
                f"MLflow store {self.tracking_uri} did not answer ({type(err).__name__}): its "
                f"run {self.run_id} stays RUNNING there"
            )
        if left and self.elsewhere:
            self._keep_locally(left)
        outbox = self.folder / "outbox"
        if outbox.is_dir() and not any(outbox.iterdir()):
            outbox.rmdir()

    @property
    def tracking_uri(self) -> str:
        return self.client.tracking_uri

    def _keep_locally(self, left: list[Metric | Path]) -> None:
        """What the store elsewhere did not take, in the run folder's own store: a run of the
        same name (continued on a resume), tagged ``rlrun.server`` with that store."""
        uri, artifacts = local_store(self.folder)
        client = client_for(uri)
        experiment = self.exp_name
        run_id = open_run(
            client, experiment, artifacts, self.folder / LOCAL_RUN_ID, self.run_name
        ).info.run_id
        log_config(client, run_id, self.params)
        client.set_tag(run_id, "rlrun.server", self.tracking_uri)
        metrics = sum(isinstance(item, Metric) for item in left)
        videos = len(left) - metrics
        Outbox(client, run_id, left).close()
        client.set_terminated(run_id)
        log.warning(
            f"MLflow store {self.tracking_uri} did not take {metrics} metric rows and "
            f"{videos} videos by the end: they are in "
            f"{shown(self.folder / 'mlflow.db')} (MLflow run {run_id})"
        )


def refusal(uri: str) -> str:
    """Why MLflow refused ``uri`` as a tracking store, and what to give instead."""
    fix = "use sqlite:///<path>.db (MLflow creates the file) or an http(s):// tracking server"
    if urlparse(uri).scheme in ("", "file"):
        return f"MLflow 3 no longer writes folder stores; {fix}."
    return f"MLflow has no tracking store of that kind; {fix}."


def local_store(folder: Path) -> tuple[str, str]:
    """The run folder's own store: a SQLite file and an artifact folder in ``folder``."""
    return f"sqlite:///{folder / 'mlflow.db'}", (folder / "artifacts").as_uri()


def mlflow_logger(cfg: Any, run_dir: Path) -> MLflowRunLogger:
    """The store: ``logger.tracking_uri``, else (or while that server is out of reach) a SQLite
    file with an artifact folder in ``<run folder>/mlflow/``."""
    for name in ("mlflow.store.db.utils", "alembic"):  # a new store's schema-migration chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    # a warning for each failed request MLflow retries: the outbox says once that it keeps rows
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    for name, value in HTTP_LIMITS.items():
        os.environ.setdefault(name, value)
    folder = (run_dir / "mlflow").absolute()
    folder.mkdir(parents=True, exist_ok=True)
    local, _ = local_store(folder)
    uri = cfg.tracking_uri
    if not uri:
        return MLflowRunLogger(cfg.experiment, local, run_dir)
    if urlparse(uri).scheme in ("http", "https") and not reachable(uri):
        stop_if_strict(cfg, f"MLflow server {uri}")
        log.warning(
            f"MLflow server {uri} not reachable within {PROBE_TIMEOUT_S:g} s: logging to "
            f"{shown(folder / 'mlflow.db')} instead"
        )
        return MLflowRunLogger(cfg.experiment, local, run_dir, id_file=LOCAL_RUN_ID)
    return MLflowRunLogger(cfg.experiment, uri, run_dir, elsewhere=True)
