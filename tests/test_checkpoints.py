"""Checkpoints: SIGTERM stops with a checkpoint, resume continues the same run folder and
series, partial saves never replace a good checkpoint, pickled code is refused, torchsnapshot."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import RLRUN, TINY, csv_series, run_dirs, run_rlrun, summary

# 8 batches of 256 frames: long enough to be stopped midway.
TOTAL, BATCH = 2048, 256
LONG = [
    "+experiment=ppo",
    f"trainer.total_frames={TOTAL}",
    f"collector.frames_per_batch={BATCH}",
    "env.num_envs=4",
    "algo.minibatch_size=128",
    "algo.epochs=1",
    "trainer.progress_bar=false",
    f"checkpoint.every_frames={BATCH}",
    "checkpoint.keep=20",
]


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted((run_dir / "checkpoints").glob("checkpoint-*"))


def tensors(checkpoint: Path, component: str) -> dict[str, torch.Tensor]:
    """A component's saved tensors, read back with TensorDict (no pickle involved)."""
    from tensordict import TensorDict

    (folder,) = (checkpoint / "components").glob(f"*-{component}")
    return TensorDict.load_memmap(folder / "state").to_dict()


def stop_with_sigterm(cwd: Path, *args: str) -> Path:
    """Start ``rlrun ARGS``, SIGTERM it once its first metrics are written, wait for it."""
    env = {**os.environ, "WANDB_MODE": "offline"}
    proc = subprocess.Popen([RLRUN, *args], cwd=cwd, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not list(cwd.glob("outputs/*/*/csv/scalars/train/optim_steps.csv")):
        assert proc.poll() is None and time.monotonic() < deadline, "run ended before metrics"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 0, stderr
    (run_dir,) = run_dirs(cwd)
    return run_dir


@pytest.mark.xdist_group("hooks")
def test_sigterm_then_resume_continues_like_an_uninterrupted_run(tmp_path: Path) -> None:
    stopped_cwd, full_cwd = tmp_path / "stopped", tmp_path / "full"
    stopped_cwd.mkdir(), full_cwd.mkdir()
    run_dir = stop_with_sigterm(stopped_cwd, *LONG)
    stopped = summary(run_dir)
    assert stopped["status"] == "interrupted"
    stop_frames = stopped["frames"]
    assert 0 < stop_frames < TOTAL
    assert checkpoints(run_dir)[-1].name == f"checkpoint-{stop_frames:012d}"
    before = csv_series(run_dir, "train/loss_objective")

    run_rlrun(f"resume={run_dir}", cwd=stopped_cwd)
    assert run_dirs(stopped_cwd) == [run_dir]  # the same run folder
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == TOTAL
    run_rlrun(*LONG, cwd=full_cwd)
    (full_dir,) = run_dirs(full_cwd)

    # every series continues without a gap or a duplicate, on the same frame axis
    steps = list(range(BATCH, TOTAL + 1, BATCH))
    for name in ("train/loss_objective", "train/optim_steps", "train/lr"):
        assert [s for s, _ in csv_series(run_dir, name)] == steps, name
    assert csv_series(run_dir, "train/optim_steps") == csv_series(full_dir, "train/optim_steps")
    # same seed, same state: identical up to the stop
    full = csv_series(full_dir, "train/loss_objective")
    assert before == full[: len(before)]
    # the checkpoint at the stop equals the uninterrupted run's at that frame count
    name = f"checkpoint-{stop_frames:012d}"
    for component in ("loss_module", "optimizer"):
        saved, reference = (
            tensors(run_dir / "checkpoints" / name, component),
            tensors(full_dir / "checkpoints" / name, component),
        )
        assert saved.keys() == reference.keys()
        assert all(torch.equal(saved[k], reference[k]) for k in saved), component
    # optimizer state continued: Adam's step counters match the uninterrupted run at the end
    end_saved = tensors(checkpoints(run_dir)[-1], "optimizer")
    end_full = tensors(checkpoints(full_dir)[-1], "optimizer")
    adam_steps = [k for k, v in end_full.items() if v.ndim == 0]  # per-parameter "step"
    assert adam_steps and all(torch.equal(end_saved[k], end_full[k]) for k in adam_steps)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A TINY run with a checkpoint after each of its two batches."""
    cwd = tmp_path_factory.mktemp("finished")
    run_rlrun("+experiment=ppo", *TINY, "checkpoint.every_frames=512", cwd=cwd)
    (run_dir,) = run_dirs(cwd)
    return run_dir


def test_partial_save_never_replaces_the_last_good_checkpoint(finished_run: Path) -> None:
    good = checkpoints(finished_run)[-1]
    assert good.name == "checkpoint-000000001024"
    # what a crash mid-save leaves: TorchRL's staging folder, never renamed into place ...
    stage = good.parent / ".checkpoint-000000001536.stage-0123456789abcdef"
    stage.mkdir()
    (stage / "components").mkdir()
    payload = next(good.rglob("*.memmap")).read_bytes()
    (stage / "components" / "tensor.memmap").write_bytes(payload[: len(payload) // 2])
    # ... or a checkpoint folder cut before its manifest (written last)
    cut = good.parent / "checkpoint-000000002048"
    cut.mkdir()
    (cut / "components").mkdir()
    proc = run_rlrun(f"resume={finished_run}", "trainer.total_frames=1536", cwd=finished_run)
    assert "resumed from" in proc.stdout and good.name in proc.stdout
    assert summary(finished_run)["frames"] == 1536


def test_checkpoint_with_pickled_code_is_refused(finished_run: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    checkpoint = checkpoints(finished_run)[0]
    (component,) = (checkpoint / "components").glob("*-optimizer")
    torch.save({"state": Exploit()}, component / "state.pt")  # loaded before the tensors
    proc = run_rlrun(f"resume={checkpoint}", cwd=finished_run, check=False)
    assert proc.returncode == 2
    assert "refused to load this checkpoint" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not marker.exists()


def test_torchsnapshot_backend_saves_and_restores(workdir: Path) -> None:
    pytest.importorskip("torchsnapshot")
    args = ["checkpoint.backend=torchsnapshot", "checkpoint.every_frames=512", "checkpoint.keep=1"]
    run_rlrun("+experiment=ppo", *TINY, *args, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    assert [p.name for p in checkpoints(run_dir)] == ["checkpoint-000000001024"]  # keep=1
    assert (checkpoints(run_dir)[0] / ".snapshot_metadata").is_file()
    run_rlrun(f"resume={run_dir}", "trainer.total_frames=2048", cwd=workdir)
    assert summary(run_dir)["frames"] == 2048
    assert csv_series(run_dir, "train/optim_steps") == [
        (512, 4.0),
        (1024, 8.0),
        (1536, 12.0),
        (2048, 16.0),
    ]
