"""Checkpoints: SIGTERM stops with a checkpoint, resume continues the same run folder and
series, partial saves never replace a good checkpoint, pickled code is refused, damaged
checkpoints are found by their checksums and skipped (or refused), torchsnapshot."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import RLRUN, TINY, csv_series, run_dirs, run_rlrun, summary

import rlrun
from rlrun.builders.checkpoints import VerifiedCheckpoint
from rlrun.errors import ConfigError
from rlrun.folders.checkpoint_files import damage, find_checkpoint, write_checksums

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


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    """The refusal a user sees: exit 2, one ``rlrun: error:`` line, no traceback."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("rlrun: error: resume=")
    return line


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


def test_sigterm_inside_a_long_batch_stops_within_seconds_and_resumes(tmp_path: Path) -> None:
    """A batch of 20,000 optimisation steps (SAC at 100 updates per frame; minutes on a CPU):
    SIGTERM once its optimisation started ends it at the next step, with the checkpoint TorchRL
    saves as it stops; resume= goes on from there. Before, the run finished the batch first."""
    args = ["+experiment=sac", "collector.init_random_frames=0", "algo.utd_ratio=100",
            "trainer.total_frames=400", "trainer.progress_bar=false",
            "eval.every_frames=0"]  # fmt: skip
    env = {**os.environ, "WANDB_MODE": "offline"}
    proc = subprocess.Popen(
        [RLRUN, *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 240
    # the first batch's statistics are logged just before its optimisation starts
    while not list(tmp_path.glob("outputs/*/*/csv/scalars/train/fps.csv")):
        assert proc.poll() is None and time.monotonic() < deadline, "run ended before a batch"
        time.sleep(0.1)
    time.sleep(1.0)  # well inside the batch's steps
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=240)
    waited = time.monotonic() - sent
    assert proc.returncode == 0, stderr
    assert waited < 30, f"{waited:.0f} s from SIGTERM to exit"  # a scheduler's grace period
    (run_dir,) = run_dirs(tmp_path)
    assert summary(run_dir)["status"] == "interrupted" and summary(run_dir)["frames"] == 200
    assert checkpoints(run_dir)[-1].name == "checkpoint-000000000200"

    run_rlrun(f"resume={run_dir}", "algo.utd_ratio=0.05", cwd=tmp_path)  # 10 steps a batch
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 400


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
    """A TINY run with a checkpoint after each of its two batches (tests damage a copy)."""
    cwd = tmp_path_factory.mktemp("finished")
    run_rlrun("+experiment=ppo", *TINY, "checkpoint.every_frames=512", cwd=cwd)
    (run_dir,) = run_dirs(cwd)
    return run_dir


@pytest.fixture
def run_copy(finished_run: Path, tmp_path: Path) -> Path:
    """A copy of ``finished_run`` (checkpoints at 512 and 1024 frames) to damage and resume."""
    return Path(shutil.copytree(finished_run, tmp_path / "run"))


def test_partial_save_never_replaces_the_last_good_checkpoint(run_copy: Path) -> None:
    good = checkpoints(run_copy)[-1]
    assert good.name == "checkpoint-000000001024"
    # what a crash mid-save leaves: TorchRL's staging folder, never renamed into place ...
    stage = good.parent / ".checkpoint-000000001536.stage-0123456789abcdef"
    stage.mkdir()
    (stage / "components").mkdir()
    payload = next(good.rglob("*.memmap")).read_bytes()
    (stage / "components" / "tensor.memmap").write_bytes(payload[: len(payload) // 2])
    # ... or a checkpoint folder cut before its checksums (written last)
    cut = good.parent / "checkpoint-000000002048"
    cut.mkdir()
    (cut / "components").mkdir()
    proc = run_rlrun(f"resume={run_copy}", "trainer.total_frames=1536", cwd=run_copy)
    assert "resumed from" in proc.stdout and good.name in proc.stdout
    assert summary(run_copy)["frames"] == 1536


def test_checkpoint_with_pickled_code_is_refused(run_copy: Path, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    checkpoint = checkpoints(run_copy)[0]
    (component,) = (checkpoint / "components").glob("*-optimizer")
    torch.save({"state": Exploit()}, component / "state.pt")  # loaded before the tensors
    # a file the checksums do not list: refused before anything is read
    line = one_line_error(run_rlrun(f"resume={checkpoint}", cwd=run_copy, check=False))
    assert f"damaged checkpoint: components/{component.name}/state.pt: not in checksums" in line
    # whoever can plant the file can rewrite the checksums: torch.load(weights_only) still refuses
    write_checksums(checkpoint)
    line = one_line_error(run_rlrun(f"resume={checkpoint}", cwd=run_copy, check=False))
    assert "refused to load this checkpoint" in line
    assert not marker.exists()


def test_a_checkpoint_of_a_newer_rlrun_is_refused_in_one_line(run_copy: Path) -> None:
    """Its components may hold what this rlrun cannot read: refused before anything is loaded,
    for resume= and rlrun eval alike, the run folder left as it was."""
    checkpoint = checkpoints(run_copy)[-1]
    assert json.loads((checkpoint / "rlrun.json").read_text()) == {"rlrun": rlrun.__version__}
    (checkpoint / "rlrun.json").write_text(json.dumps({"rlrun": "99.0.0"}))
    write_checksums(checkpoint)  # intact: written so by that rlrun
    before = sorted(p.name for p in run_copy.rglob("*"))
    for args in ([f"resume={run_copy}"], ["eval", str(run_copy)]):
        proc = run_rlrun(*args, cwd=run_copy, check=False)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert f"written by rlrun 99.0.0, newer than this one ({rlrun.__version__})" in line
    assert sorted(p.name for p in run_copy.rglob("*")) == before


def weight_file(checkpoint: Path) -> Path:
    """The largest tensor file of the loss module (policy and critic weights)."""
    (component,) = (checkpoint / "components").glob("*-loss_module")
    return max((component / "state").glob("*.memmap"), key=lambda f: f.stat().st_size)


def flip_byte(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[len(data) // 2] ^= 0x01
    file.write_bytes(bytes(data))


# each way a checkpoint gets damaged, and the words find_checkpoint names it with
DAMAGES: dict[str, tuple[Callable[[Path], None], str]] = {
    "emptied": (lambda c: weight_file(c).write_bytes(b""), "memmap: size 0, expected 16384"),
    "truncated": (
        lambda c: weight_file(c).write_bytes(weight_file(c).read_bytes()[:-100]),
        "memmap: size 16284, expected 16384",
    ),
    "flipped byte": (lambda c: flip_byte(weight_file(c)), "memmap: SHA-256 differs"),
    "deleted file": (lambda c: weight_file(c).unlink(), "memmap: missing"),
    "deleted manifest": (lambda c: (c / "manifest.json").unlink(), "manifest.json: missing"),
    "deleted checksums": (
        lambda c: (c / "checksums.json").unlink(),
        "no checksums.json, so its bytes cannot be verified",
    ),
    "added file": (lambda c: (c / "components" / "extra.pt").write_bytes(b"x"), "not in checksums"),
}


@pytest.mark.parametrize("how", DAMAGES)
def test_damaged_newest_checkpoint_is_skipped_and_named(
    how: str, run_copy: Path, caplog: pytest.LogCaptureFixture
) -> None:
    older, newest = checkpoints(run_copy)
    assert damage(older, "torch") is None and damage(newest, "torch") is None
    do_damage, words = DAMAGES[how]
    do_damage(newest)
    with caplog.at_level(logging.WARNING, logger="rlrun.builders.checkpoints"):
        assert find_checkpoint(run_copy, "torch") == older
    (warning,) = caplog.messages
    assert warning.startswith(f"checkpoints/{newest.name}: ")
    assert words in warning and warning.endswith(f"; using {older.name}")
    with pytest.raises(ConfigError) as refused:
        find_checkpoint(newest, "torch")  # named by the user: refused, not replaced
    assert str(refused.value).startswith(f"resume={newest}: damaged checkpoint: ")
    assert words in str(refused.value)


def test_resume_continues_from_the_newest_intact_checkpoint(run_copy: Path) -> None:
    older, newest = checkpoints(run_copy)
    weight_file(newest).write_bytes(b"")
    proc = run_rlrun(f"resume={run_copy}", cwd=run_copy)
    warning = f"checkpoints/{newest.name}: components/"
    assert warning in proc.stdout and warning in (run_copy / "cli.log").read_text()
    assert f"size 0, expected 16384; using {older.name}" in proc.stdout
    assert f"resumed from {older} at 512 frames" in proc.stdout
    assert summary(run_copy)["status"] == "completed" and summary(run_copy)["frames"] == 1024
    # counters continued from the fallback's (4 steps at 512 frames): one batch, 4 more steps
    assert csv_series(run_copy, "train/optim_steps")[-1] == (1024, 8.0)
    # and the batch after 512 frames was saved again, intact, over the damaged checkpoint
    assert damage(newest, "torch") is None
    assert VerifiedCheckpoint.manifest(newest)["metadata"]["collected_frames"] == 1024


def test_resume_refuses_when_no_checkpoint_is_intact(run_copy: Path) -> None:
    older, newest = checkpoints(run_copy)
    flip_byte(weight_file(newest))
    (older / "checksums.json").unlink()  # as an rlrun without checksums wrote it
    line = one_line_error(run_rlrun(f"resume={run_copy}", cwd=run_copy, check=False))
    assert f"no intact checkpoint: {newest.name}: components/" in line
    assert "SHA-256 differs from checksums.json (bytes changed); " in line
    assert line.endswith(
        f"{older.name}: no checksums.json, so its bytes cannot be verified "
        "(saved by an older rlrun?)"
    )
    assert summary(run_copy)["status"] == "completed"  # the run folder is left as it was


def test_resume_refuses_a_named_damaged_checkpoint(run_copy: Path) -> None:
    older, newest = checkpoints(run_copy)
    weight_file(newest).unlink()
    line = one_line_error(run_rlrun(f"resume={newest}", cwd=run_copy, check=False))
    assert f"resume={newest}: damaged checkpoint: components/" in line
    assert line.endswith(": missing")


def test_best_checkpoint_is_replaced_whole_with_its_checksums(tmp_path: Path) -> None:
    best = tmp_path / "checkpoints" / "best"
    for step in (1, 2):
        VerifiedCheckpoint(value={"step": step}).save(best, metadata={"eval_return": step})
        assert damage(best, "torch") is None
    assert sorted(p.name for p in best.parent.iterdir()) == ["best"]  # no staging left behind
    assert VerifiedCheckpoint.manifest(best)["metadata"]["eval_return"] == 2


def test_torchsnapshot_backend_saves_and_restores(workdir: Path) -> None:
    pytest.importorskip("torchsnapshot")
    args = ["checkpoint.backend=torchsnapshot", "checkpoint.every_frames=512", "checkpoint.keep=1"]
    run_rlrun("+experiment=ppo", *TINY, *args, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    assert [p.name for p in checkpoints(run_dir)] == ["checkpoint-000000001024"]  # keep=1
    assert damage(checkpoints(run_dir)[0], "torchsnapshot") is None
    run_rlrun(f"resume={run_dir}", "trainer.total_frames=2048", cwd=workdir)
    assert summary(run_dir)["frames"] == 2048
    assert csv_series(run_dir, "train/optim_steps") == [
        (512, 4.0),
        (1024, 8.0),
        (1536, 12.0),
        (2048, 16.0),
    ]


def test_torchsnapshot_default_saves_at_the_end_and_resumes(
    workdir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("torchsnapshot")
    run_rlrun("+experiment=ppo", *TINY, "checkpoint.backend=torchsnapshot", cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    (first,) = checkpoints(run_dir)
    assert first.name == "checkpoint-000000001024"
    assert damage(first, "torchsnapshot") is None
    assert "checkpoint.backend=torchsnapshot" in damage(first, "torch")
    proc = run_rlrun(f"resume={run_dir}", "trainer.total_frames=1536", cwd=workdir)
    assert f"resumed from {first} at 1024 frames" in proc.stdout
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 1536
    _, second = checkpoints(run_dir)
    assert damage(second, "torchsnapshot") is None
    # its checkpoints are verified the same way
    flip_byte(max(second.rglob("*"), key=lambda f: f.stat().st_size if f.is_file() else 0))
    with caplog.at_level(logging.WARNING, logger="rlrun.builders.checkpoints"):
        assert find_checkpoint(run_dir, "torchsnapshot") == first
    assert "SHA-256 differs" in caplog.text and f"using {first.name}" in caplog.text


@pytest.mark.xdist_group("hooks")
def test_torchsnapshot_sigterm_saves_where_it_stopped(tmp_path: Path) -> None:
    pytest.importorskip("torchsnapshot")
    args = [a for a in LONG if not a.startswith("checkpoint.")]
    run_dir = stop_with_sigterm(tmp_path, *args, "checkpoint.backend=torchsnapshot")
    stopped = summary(run_dir)
    assert stopped["status"] == "interrupted" and 0 < stopped["frames"] < TOTAL
    (saved,) = checkpoints(run_dir)
    assert saved.name == f"checkpoint-{stopped['frames']:012d}"
    assert damage(saved, "torchsnapshot") is None


def test_an_error_that_a_second_signal_caused_is_an_interruption() -> None:
    """A second Ctrl-C or SIGTERM raises KeyboardInterrupt wherever the run is; inside TorchRL's
    vmapped losses it came out as a RuntimeError chained to it (a CQL run, 2026-11-26): the run
    is ``interrupted``, not failed with a traceback."""
    from rlrun.run import raised_by_a_second_signal

    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise RuntimeError("Converting a tensordict to boolean value is not permitted")  # noqa: B904
    except RuntimeError as err:
        assert raised_by_a_second_signal(err)
    assert not raised_by_a_second_signal(RuntimeError("a bug of its own"))
