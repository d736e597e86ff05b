"""Loggers: CSV, TensorBoard and W&B (offline) read back from their own files agree."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from conftest import TINY, csv_series, run_dirs, run_rlrun, summary

from rlrun.loggers import flatten_config, redact_secrets

SECRET = "sk-test-SECRET-0123456789"
METRICS = ("train/episode_return", "train/loss_objective", "train/optim_steps")


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


def test_csv_tensorboard_wandb_agree_continue_on_resume_and_keep_secrets_out(
    workdir: Path,
) -> None:
    env = {"WANDB_API_KEY": SECRET}
    run_rlrun(
        "+experiment=ppo",
        *TINY,
        "logger=[csv,tensorboard,wandb]",
        "logger.mode=offline",
        cwd=workdir,
        env=env,
    )
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    (wandb_file,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    rows, config, run_id = wandb_run(wandb_file)
    for name in METRICS:
        csv = csv_series(run_dir, name)
        assert [step for step, _ in csv] == [512, 1024], name  # x-axis: collected frames
        for other in (tensorboard_series(run_dir, name), wandb_series(rows, name)):
            assert [step for step, _ in other] == [step for step, _ in csv], name
            assert [v for _, v in other] == pytest.approx([v for _, v in csv], rel=1e-6), name
    assert config["trainer.total_frames"] == 1024  # the composed config as hparams
    # a resume continues the same W&B run and every series at the next frame count
    run_rlrun(f"resume={run_dir}", "trainer.total_frames=1536", cwd=workdir, env=env)
    (resumed,) = set(run_dir.glob("wandb/offline-run-*/run-*.wandb")) - {wandb_file}
    rows, _, resumed_id = wandb_run(resumed)
    assert resumed_id == run_id
    for name in METRICS:
        assert [step for step, _ in wandb_series(rows, name)] == [1536], name
        assert [step for step, _ in csv_series(run_dir, name)] == [512, 1024, 1536], name
        assert [step for step, _ in tensorboard_series(run_dir, name)] == [512, 1024, 1536]
    leaked = [p for p in run_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []


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
