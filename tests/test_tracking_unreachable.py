"""Tracking servers out of reach never block training (issue #35, item 8): W&B and MLflow
pointed at a local port where nothing listens log locally within seconds and say so in one
line, ``logger.strict=true`` stops in one line, ``logger.mode=online`` without credentials is
refused before anything is built, and an MLflow server stopped mid-run leaves the run to
complete, what it did not take kept in the run folder."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import RLRUN, TINY, csv_series, run_dirs, run_rlrun, summary
from omegaconf import OmegaConf
from test_loggers import mlflow_run, mlflow_series, wandb_run, wandb_series

from rlrun.builders.tracking import reachable
from rlrun.errors import RunError

API_KEY = "k" * 40  # well-formed, never sent anywhere that answers
TESTS = str(Path(__file__).parent)  # for the rlrun process to import PauseAfter from here


def free_port() -> int:
    """A local port where nothing listens (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def warnings_of(output: str, logger: str) -> list[str]:
    """The warnings ``logger`` printed (Hydra's console format: ``[time][name][WARNING] - ``)."""
    tag = f"[{logger}][WARNING] - "
    return [line.split(tag, 1)[1] for line in output.splitlines() if tag in line]


@pytest.fixture
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """W&B online, its credentials only what the test gives: no ``~/.netrc``, no settings."""
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return {
        "WANDB_MODE": "online",
        "NETRC": str(tmp_path / "no-netrc"),
        "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
    }


def test_probe_gives_up_on_a_silent_server_within_its_timeout() -> None:
    """A server that takes the connection and never answers, and a port where nothing
    listens: out of reach, the one within the probe's timeout, the other at once."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        start = time.monotonic()
        assert not reachable(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=1.0)
        assert 0.9 < time.monotonic() - start < 2.0
    start = time.monotonic()
    assert not reachable(f"http://127.0.0.1:{free_port()}")
    assert time.monotonic() - start < 0.5


def test_wandb_server_out_of_reach_logs_offline_for_wandb_sync(
    workdir: Path, wandb_env: dict[str, str]
) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    env = {**wandb_env, "WANDB_API_KEY": API_KEY, "WANDB_BASE_URL": server}
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "logger=[csv,wandb]", "logger.mode=online", cwd=workdir, env=env
    )
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    (line,) = warnings_of(proc.stdout + proc.stderr, "rlrun.builders.loggers")
    head, _, sync_dir = line.partition("; upload later: wandb sync ")
    assert head == f"W&B server {server} not reachable within 5 s: logging offline"
    (offline,) = run_dir.glob("wandb/offline-run-*")
    assert (workdir / sync_dir).resolve() == offline.resolve()
    (run_file,) = offline.glob("run-*.wandb")
    rows, _, run_id = wandb_run(run_file)
    assert run_id == (run_dir / "wandb" / "run_id").read_text()
    steps = csv_series(run_dir, "train/optim_steps")
    assert wandb_series(rows, "train/optim_steps") == steps
    sync = subprocess.run(  # what the line says to run later, reading the folder it names
        [Path(sys.executable).with_name("wandb"), "sync", "--dry-run", sync_dir],
        cwd=workdir, capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip
    assert "Would sync 1 run(s)" in sync.stdout + sync.stderr


def test_strict_logging_stops_in_one_line(workdir: Path, wandb_env: dict[str, str]) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    env = {**wandb_env, "WANDB_API_KEY": API_KEY, "WANDB_BASE_URL": server}
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "logger=[csv,wandb]", "logger.mode=online",
        "logger.strict=true", cwd=workdir, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"rlrun: error: W&B server {server} not reachable within 5 s and logger.strict=true: "
        "check the network or the server's address, or set logger.strict=false to log "
        "locally until it is back."
    )


def test_mlflow_strict_stops_too(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    from rlrun.builders.mlflow_logger import mlflow_logger

    server = f"http://127.0.0.1:{free_port()}"
    cfg = OmegaConf.create({"tracking_uri": server, "experiment": "rlrun", "strict": True})
    with pytest.raises(RunError, match=f"^MLflow server {server} not reachable within 5 s and"):
        mlflow_logger(cfg, tmp_path)


def test_online_without_credentials_is_refused_before_anything_is_built(
    workdir: Path, wandb_env: dict[str, str]
) -> None:
    proc = run_rlrun(
        "+experiment=ppo", "logger=wandb", "logger.mode=online", cwd=workdir, env=wandb_env,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("rlrun: error: logger.mode=online: no W&B credentials for https://")
    assert line.endswith(
        "; run `wandb login` or set WANDB_API_KEY, or use logger.mode=offline (or auto: online "
        "only with credentials)."
    )
    assert not (workdir / "outputs").exists()


def test_mlflow_server_out_of_reach_logs_to_the_run_folder(workdir: Path) -> None:
    pytest.importorskip("mlflow")
    server = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "logger=[csv,mlflow]", f"logger.tracking_uri={server}",
        cwd=workdir,
    )  # fmt: skip
    assert time.monotonic() - start < 60  # not the minutes of MLflow's own retries
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    store = run_dir.relative_to(workdir) / "mlflow" / "mlflow.db"
    assert warnings_of(proc.stdout + proc.stderr, "rlrun.builders.mlflow_logger") == [
        f"MLflow server {server} not reachable within 5 s: logging to {store} instead"
    ]
    client, run = mlflow_run(f"sqlite:///{run_dir / 'mlflow' / 'mlflow.db'}")
    assert run.info.run_name == run_dir.name and run.info.status == "FINISHED"
    assert run.info.run_id == (run_dir / "mlflow" / "local_run_id").read_text()
    steps = csv_series(run_dir, "train/optim_steps")
    assert mlflow_series(client, run, "train/optim_steps") == steps


class PauseAfter:
    """A user hook (``post_steps``) for the rlrun process below: after ``batches`` batches it
    writes ``<folder>/paused`` and waits for ``<folder>/go``, so the test stops the MLflow
    server at a known point of the run."""

    def __init__(self, folder: str, batches: int) -> None:
        self.folder, self.batches, self.calls = Path(folder), batches, 0

    def __call__(self, *args: object) -> None:
        self.calls += 1
        if self.calls != self.batches:
            return
        (self.folder / "paused").touch()
        deadline = time.monotonic() + 120
        while not (self.folder / "go").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def start_mlflow_server(folder: Path) -> tuple[subprocess.Popen, str]:
    """MLflow's own tracking server (``mlflow server``) on a free port, SQLite-backed."""
    missing = [m for m in ("flask", "flask_cors", "pandas") if importlib.util.find_spec(m) is None]
    if missing:  # mlflow-skinny ships mlflow.server but not what it imports
        pytest.skip(f"mlflow server needs {', '.join(missing)} (installed with full mlflow)")
    port = free_port()
    proc = subprocess.Popen(
        [
            Path(sys.executable).with_name("mlflow"), "server", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
        ],
        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while not reachable(f"{url}/health", timeout_s=1.0):
        assert proc.poll() is None and time.monotonic() < deadline, "mlflow server did not start"
        time.sleep(0.2)
    return proc, url


def stop(server: subprocess.Popen) -> None:
    """Stop the MLflow server (its whole session: uvicorn's workers too), if it still runs."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def sys_pythonpath() -> list[str]:
    path = os.environ.get("PYTHONPATH")
    return [path] if path else []


def wait_for(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


# 4 batches of 256 frames; the MLflow server is stopped after the second
BATCHES = 4
SHORT = [
    "+experiment=ppo",
    f"trainer.total_frames={BATCHES * 256}",
    "collector.frames_per_batch=256",
    "env.num_envs=4",
    "algo.minibatch_size=128",
    "algo.epochs=1",
    "trainer.progress_bar=false",
]


def test_mlflow_server_stopped_mid_run(tmp_path: Path) -> None:
    """The server takes the first two batches' metrics, then stops: the run completes within
    seconds, the metrics the server did not take in the run folder's store, the two together
    the CSV logger's."""
    pytest.importorskip("mlflow")
    from mlflow import MlflowClient

    server, url = start_mlflow_server(tmp_path)
    rlrun = subprocess.Popen(
        [
            RLRUN, *SHORT, "logger=[csv,mlflow]", f"logger.tracking_uri={url}",
            f"+hooks.pause._target_={__name__}.PauseAfter", "+hooks.pause.at=post_steps",
            f"+hooks.pause.folder={tmp_path}", "+hooks.pause.batches=2",
        ],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([TESTS, *sys_pythonpath()])},
    )  # fmt: skip
    try:
        wait_for((tmp_path / "paused").exists, 120, "the run did not reach its second batch")
        remote = MlflowClient(url)
        (run,) = remote.search_runs([remote.get_experiment_by_name("rlrun").experiment_id])
        sent = lambda: remote.get_metric_history(run.info.run_id, "train/optim_steps")  # noqa: E731
        wait_for(lambda: len(sent()) == 2, 10, "the server did not get the first two batches")
        stop(server)
        (tmp_path / "go").touch()
        stopped = time.monotonic()
        stdout, stderr = rlrun.communicate(timeout=120)
    finally:
        stop(server)
        rlrun.kill()  # if still running: a failed wait above
    assert rlrun.returncode == 0, stderr
    # two batches, then a new SQLite store for the rest (about 7 s here on 2026-11-25)
    assert time.monotonic() - stopped < 20
    (run_dir,) = run_dirs(tmp_path)
    assert summary(run_dir)["status"] == "completed"

    # what the server took, what it did not in the run folder's store: together, every row
    server_store = MlflowClient(f"sqlite:///{tmp_path / 'server.db'}")
    local = MlflowClient(f"sqlite:///{run_dir / 'mlflow' / 'mlflow.db'}")
    (rest,) = local.search_runs([local.get_experiment_by_name("rlrun").experiment_id])
    assert rest.info.run_name == run_dir.name and rest.data.tags["rlrun.server"] == url
    assert rest.data.params == server_store.get_run(run.info.run_id).data.params
    names = set(rest.data.metrics)
    assert names == set(server_store.get_run(run.info.run_id).data.metrics)
    for name in names:
        first = mlflow_series(server_store, run, name)
        assert first and first + mlflow_series(local, rest, name) == csv_series(run_dir, name)
    assert [step for step, _ in mlflow_series(server_store, run, "train/optim_steps")] == [256, 512]
    kept = sum(len(local.get_metric_history(rest.info.run_id, name)) for name in names)
    store = run_dir.relative_to(tmp_path) / "mlflow" / "mlflow.db"
    assert warnings_of(stdout + stderr, "rlrun.builders.mlflow_logger") == [
        f"MLflow store {url} did not answer (MlflowException): keeping what the run logs, sent "
        "again every 2 s",
        f"MLflow store {url} did not answer (MlflowException): its run {run.info.run_id} stays "
        "RUNNING there",
        f"MLflow store {url} did not take {kept} metric rows and 0 videos by the end: they are in "
        f"{store} (MLflow run {rest.info.run_id})",
    ]
