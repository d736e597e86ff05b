"""A full disk stops a run cleanly (issue #35): a small tmpfs mounted as the run folder, for
real. The run ends in one line (folder, free space, what it was writing, newest intact
checkpoint), no SIGBUS, no traceback, no staging folder left; ``resume=`` continues once the
file system has room. Needs root (CI runs as root); skipped where mounting is not permitted."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import CHECKPOINTED, run_rlrun, summary


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def resize(mount: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(mount)], check=True)


def error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip().splitlines()[-1]


def staging_left(folder: Path) -> list[Path]:
    return [p for p in folder.rglob(".*") if ".stage-" in p.name]


def test_on_policy_run_stops_at_the_checkpoint_that_does_not_fit(small_disk, workdir) -> None:
    """PPO, a checkpoint per batch, 1 MB: the first fits, the second does not."""
    run = small_disk / "run"
    args = [*CHECKPOINTED, "trainer.total_frames=2048", "checkpoint.keep=20"]
    proc = run_rlrun(*args, f"hydra.run.dir={run}", cwd=workdir, check=False)
    line = error_line(proc)
    first = run / "checkpoints" / f"checkpoint-{256:012d}"
    assert line.startswith(f"rlrun: error: no space left in {run} (") and " free) " in line
    assert f"while writing checkpoint checkpoint-{512:012d} (" in line
    assert f"the newest intact checkpoint is {first}. Free some space, then " in line
    assert f"rlrun resume={run}." in line
    assert sorted((run / "checkpoints").iterdir()) == [first] and not staging_left(run)
    if (run / "summary.json").exists():  # written if it fit
        assert summary(run)["status"] == "failed" and "no space left" in summary(run)["error"]

    resize(small_disk, "64m")
    proc = run_rlrun(f"resume={run}", cwd=workdir)
    assert f"resumed from {first} at 256 frames" in proc.stdout + proc.stderr
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 2048


def test_memmapped_replay_buffer_is_checked_before_it_is_written(small_disk, workdir) -> None:
    """DQN with a memmapped buffer larger than the disk: refused at its first batch (TorchRL's
    sparse files would SIGBUS later); one that fits trains on, until a checkpoint does not."""
    dqn = ["+experiment=dqn", "replay_buffer.storage=memmap", "trainer.progress_bar=false",
           "trainer.total_frames=3072", "checkpoint.every_frames=1024"]  # fmt: skip
    resize(small_disk, "2m")
    big = small_disk / "big"
    proc = run_rlrun(*dqn, f"hydra.run.dir={big}", cwd=workdir, check=False)
    line = error_line(proc)
    assert "while writing the memmapped replay buffer (" in line and "no checkpoint yet" in line
    assert proc.returncode != 135 and "rlrun: continue" not in proc.stdout

    resize(small_disk, "3m")
    run = small_disk / "run"
    proc = run_rlrun(*dqn, "replay_buffer.size=4000", f"hydra.run.dir={run}", cwd=workdir,
                     check=False)  # fmt: skip
    line = error_line(proc)
    assert f"while writing checkpoint checkpoint-{2048:012d}" in line
    assert f"checkpoint-{1024:012d}. Free some space" in line and not staging_left(run)

    resize(small_disk, "64m")
    proc = run_rlrun(f"resume={run}", cwd=workdir)
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 3072


def test_a_sweep_on_a_full_disk_lists_its_jobs_and_resumes(small_disk, workdir) -> None:
    sweep = small_disk / "sweep"
    args = [*CHECKPOINTED, "trainer.total_frames=1024", "seed=0,1", f"hydra.sweep.dir={sweep}"]
    proc = run_rlrun("-m", *args, cwd=workdir, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"rlrun resume={sweep}." in proc.stderr and "no space left" in proc.stderr
    assert not staging_left(sweep)

    resize(small_disk, "64m")
    run_rlrun(f"resume={sweep}", cwd=workdir)
    assert [summary(sweep / job)["status"] for job in ("0", "1")] == ["completed"] * 2
