"""Loggers: CSV, TensorBoard, W&B (offline) and MLflow, read back from their own files (and
MLflow's store), agree on every metric and step, across a SIGTERM and resume; each shows the
eval video."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest
from conftest import TINY, csv_series, run_dirs, run_rlrun, summary
from omegaconf import OmegaConf
from PIL import Image
from test_checkpoints import LONG, TOTAL, stop_with_sigterm

from rlrun.builders.loggers import flatten_config, redact_secrets
from rlrun.errors import ConfigError

SECRET = "sk-test-SECRET-0123456789"


def tensorboard_series(run_dir: Path, name: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return [(e.step, e.value) for e in events.Scalars(name)]


def wandb_records(path: Path):
    """Records of a W&B ``.wandb`` file (a LevelDB-style log of protobuf records)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, chunk = 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # block trailer padding
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # full or last fragment
            record = pb.Record()
            record.ParseFromString(chunk)
            chunk = b""
            yield record


def item_key(item) -> str:
    return item.key or "/".join(item.nested_key)


def wandb_run(path: Path) -> tuple[list[dict], dict, str]:
    """History rows, config and run id of an offline W&B run file."""
    rows, config, run_id = [], {}, ""
    for record in wandb_records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            rows.append({item_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "config":
            config.update({item_key(i): json.loads(i.value_json) for i in record.config.update})
        elif kind == "run":
            run_id = record.run.run_id
    return rows, config, run_id


def wandb_series(rows: list[dict], name: str) -> list[tuple[int, float]]:
    """TorchRL's W&B logger plots each ``group/metric`` against ``group/step``."""
    step_key = name.split("/")[0] + "/step"
    return [(int(r[step_key]), float(r[name])) for r in rows if name in r]


def csv_names(run_dir: Path) -> set[str]:
    root = run_dir / "csv" / "scalars"
    return {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.csv")}


def tensorboard_gifs(run_dir: Path, name: str) -> list[tuple[int, Image.Image]]:
    """A video summary read back: (frames, animated GIF) per step."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    return [(e.step, Image.open(io.BytesIO(e.encoded_image_string))) for e in events.Images(name)]


def mlflow_run(tracking_uri: str, experiment: str = "rlrun"):
    """The one MLflow run of ``experiment`` (there must be exactly one) and a client."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri)
    (run,) = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    return client, run


def mlflow_series(client, run, name: str) -> list[tuple[int, float]]:
    history = client.get_metric_history(run.info.run_id, name)
    return sorted((m.step, m.value) for m in history)


# 8 batches of 256 frames, evaluated (with a video) every 512: long enough to be stopped midway.
EVERY_LOGGER = [
    *LONG,
    "logger=[csv,tensorboard,wandb,mlflow]",
    "logger.mode=offline",
    "eval=default",
    "eval.every_frames=512",
    "eval.episodes=2",
    "eval.video=true",
]


def test_four_loggers_agree_across_sigterm_and_resume_and_get_the_video(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WANDB_API_KEY", SECRET)  # must reach no file
    run_dir = stop_with_sigterm(workdir, *EVERY_LOGGER)
    stopped = summary(run_dir)["frames"]
    assert summary(run_dir)["status"] == "interrupted" and stopped < TOTAL
    mlflow_id = (run_dir / "mlflow" / "run_id").read_text()
    run_rlrun(f"resume={run_dir}", cwd=workdir)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == TOTAL

    # one W&B run and one MLflow run, both continued by the resume
    runs = [wandb_run(f) for f in sorted(run_dir.glob("wandb/offline-run-*/run-*.wandb"))]
    assert len(runs) == 2 and runs[0][2] == runs[1][2]
    rows = runs[0][0] + runs[1][0]
    client, mlflow = mlflow_run(f"sqlite:///{run_dir / 'mlflow' / 'mlflow.db'}")
    assert mlflow.info.run_id == mlflow_id and mlflow.info.run_name == run_dir.name
    assert mlflow.data.params["trainer.total_frames"] == str(TOTAL)
    assert mlflow.data.params["resume"] == "None" and mlflow.data.tags["resume"] == str(run_dir)

    # every metric, under the same name, at the same frame counts, with the same values
    names = csv_names(run_dir)
    assert {"train/optim_steps", "eval/episode_return"} <= names
    wandb_names = {k for r in rows for k in r if not k.startswith(("_", "eval/video"))}
    assert {k for k in wandb_names if not k.endswith("/step")} == names
    assert set(mlflow.data.metrics) == names
    for name in sorted(names):
        csv = csv_series(run_dir, name)
        for other in (
            tensorboard_series(run_dir, name),
            wandb_series(rows, name),
            mlflow_series(client, mlflow, name),
        ):
            assert [step for step, _ in other] == [step for step, _ in csv], name
            assert [v for _, v in other] == pytest.approx([v for _, v in csv], rel=1e-6), name
    assert [s for s, _ in csv_series(run_dir, "train/optim_steps")] == list(range(256, 2049, 256))

    # the eval video at every evaluation: mp4 files, TensorBoard's animated GIF, W&B, MLflow
    evals = [step for step, _ in csv_series(run_dir, "eval/episode_return")]
    assert evals == list(range(512, 2049, 512))
    assert sorted(p.name for p in (run_dir / "videos").glob("*.mp4")) == [
        f"eval-{s:012d}.mp4" for s in evals
    ]
    gifs = tensorboard_gifs(run_dir, "eval/video")
    assert [step for step, _ in gifs] == evals
    assert all(gif.format == "GIF" and gif.size == (600, 400) for _, gif in gifs)
    assert all(gif.n_frames > 1 for _, gif in gifs)
    assert [int(r["eval/step"]) for r in rows if "eval/video/path" in r] == evals
    artifacts = client.list_artifacts(mlflow.info.run_id, "videos")
    assert [(a.path, a.file_size > 0) for a in artifacts] == [
        (f"videos/eval-video-{s:012d}.mp4", True) for s in evals
    ]
    leaked = [p for p in run_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


def test_mlflow_stores_and_experiment_from_the_command_line(workdir: Path) -> None:
    """A sweep in one process: job 0 logs to a shared SQLite file, job 1 to the default store in
    its own folder (not job 0's: MLflow sets ``MLFLOW_TRACKING_URI`` itself)."""
    run_rlrun(
        "-m",
        "+experiment=ppo",
        *TINY,
        "logger=[csv,mlflow]",
        "logger.experiment=cartpole",
        "logger.tracking_uri=sqlite:///mlruns.db,null",
        cwd=workdir,
    )
    shared, own = run_dirs(workdir)
    assert list((shared / "mlflow").iterdir()) == [shared / "mlflow" / "run_id"]
    for job, store in ((shared, workdir / "mlruns.db"), (own, own / "mlflow" / "mlflow.db")):
        client, run = mlflow_run(f"sqlite:///{store}", "cartpole")  # one run in each store
        assert run.info.run_name == job.name
        composed = OmegaConf.load(job / ".hydra" / "config.yaml")
        assert run.data.params == {k: str(v) for k, v in flatten_config(composed).items()}
        steps = csv_series(job, "train/optim_steps")
        assert mlflow_series(client, run, "train/optim_steps") == steps


def test_folder_tracking_uri_is_a_config_error(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo",
        *TINY,
        "logger=mlflow",
        "logger.tracking_uri=mlruns",
        cwd=workdir,
        check=False,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlrun: error: logger.tracking_uri=mlruns: MLflow 3 no longer writes folder stores; use "
        "sqlite:///<path>.db (MLflow creates the file) or an http(s):// tracking server."
    )


def test_unknown_tracking_store_is_a_config_error(tmp_path: Path) -> None:
    from rlrun.builders.mlflow_logger import mlflow_logger

    cfg = OmegaConf.create({"tracking_uri": "foo://x", "experiment": "rlrun"})
    with pytest.raises(ConfigError, match="^logger.tracking_uri=foo://x: MLflow has no tracking"):
        mlflow_logger(cfg, tmp_path)


def test_redact_secrets_before_logging() -> None:
    cfg = {"logger": {"api_key": SECRET, "project": "p"}, "x": [{"token": SECRET}]}
    flat = flatten_config(cfg)
    assert flat["logger.project"] == "p"
    assert SECRET not in json.dumps(flat) and SECRET not in json.dumps(redact_secrets(cfg))


def test_bad_wandb_mode_is_a_config_error(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "logger=wandb", "logger.mode=onlin", cwd=workdir, check=False
    )
    assert proc.returncode == 2
    assert "logger.mode=onlin is not valid" in proc.stderr and "online" in proc.stderr


def test_a_job_that_fails_while_being_built_ends_its_logger_runs(workdir: Path) -> None:
    """In a sweep in one process, job 0's user hook fails after its loggers started: its
    MLflow run is ended, so job 1 starts its own and completes."""
    proc = run_rlrun(
        "-m", "+experiment=ppo", *TINY, "logger=[csv,mlflow]",
        "+hooks.broken._target_=faulty_hooks.FailsToBuild", "+hooks.broken.at=post_steps",
        "+hooks.broken.fail=true,false",
        cwd=workdir, check=False, env={"PYTHONPATH": str(Path(__file__).parent)},
    )  # fmt: skip
    assert proc.returncode == 1 and "this hook is broken" in proc.stderr
    assert "1 of 2 sweep jobs failed" in proc.stderr
    failed, completed = run_dirs(workdir)
    assert summary(failed)["status"] == "failed"
    assert summary(completed)["status"] == "completed"
    for job in (failed, completed):
        _, run = mlflow_run(f"sqlite:///{job / 'mlflow' / 'mlflow.db'}")
        assert run.info.status != "RUNNING"
