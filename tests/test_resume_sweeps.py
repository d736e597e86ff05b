"""Sweeps continue: ``rlrun resume=<sweep folder>`` runs again only the jobs that did not complete,
each in its own folder from its own checkpoint; a submitit job sent the preemption signal stops
with a checkpoint, is requeued and continues from it. Through the real console script."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import BATCH, CHECKPOINTED, RLRUN, csv_series, run_rlrun, summary
from omegaconf import OmegaConf

from rlrun.folders.folder_lock import LOCK_FILE

JOB = [*CHECKPOINTED, "checkpoint.keep=20"]


def start(cwd: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.Popen(
        [RLRUN, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def wait_for(proc: subprocess.Popen, cwd: Path, pattern: str) -> Path:
    """The first path matching ``pattern`` under ``cwd``, once it exists."""
    deadline = time.monotonic() + 240
    while not (found := sorted(cwd.glob(pattern))):
        if proc.poll() is not None:
            raise AssertionError(f"no {pattern}; rlrun ended:\n{proc.communicate()[0]}")
        assert time.monotonic() < deadline, f"no {pattern} after 240 s"
        time.sleep(0.02)
    return found[0]


def files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder``: its modification time (ns) and size; the lock files aside
    (each writer names itself in its folder's: rlrun/folders/folder_lock.py)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def steps(job: Path) -> list[int]:
    """The frame counts the job logged its optimisation steps at, in file order."""
    return [s for s, _ in csv_series(job, "train/optim_steps")]


def batches(total: int) -> list[int]:
    return list(range(BATCH, total + 1, BATCH))


@pytest.mark.xdist_group("sweeps")
def test_resumed_sweep_runs_only_its_unfinished_jobs_from_their_checkpoints(workdir: Path) -> None:
    # A 4-job sweep, basic launcher (one job after another): SIGTERM while job 1 trains stops it
    # after the batch with a checkpoint, and stops the sweep: jobs 2 and 3 never start.
    proc = start(workdir, "-m", *JOB, "trainer.total_frames=1024", "seed=0,1,2,3")
    try:
        wait_for(proc, workdir, "outputs/multirun/*/*/1/csv/scalars/train/optim_steps.csv")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 130, out
    assert "rlrun: stopped by SIGTERM; the sweep's later jobs did not start." in out
    (sweep,) = workdir.glob("outputs/multirun/*/*")
    jobs = [sweep / str(n) for n in range(4)]
    assert summary(jobs[0])["status"] == "completed"
    assert summary(jobs[1])["status"] == "interrupted"
    stop = summary(jobs[1])["frames"]
    assert 0 < stop < 1024
    assert f"rlrun: continue: rlrun resume={sweep.relative_to(workdir)}" in out
    assert not jobs[2].exists() and not jobs[3].exists()
    completed = files(jobs[0])
    multirun = (sweep / "multirun.yaml").read_text()

    # New keys on the command line reach every resumed job (more frames here).
    proc = run_rlrun(f"resume={sweep}", "trainer.total_frames=1280", cwd=workdir)
    out = proc.stdout + proc.stderr
    assert "4 jobs, 1 completed (left as they are), 3 to run" in out
    assert f"resumed from {jobs[1]}/checkpoints/checkpoint-{stop:012d}" in out
    assert files(jobs[0]) == completed  # not run again: every file as it was
    assert summary(jobs[0])["frames"] == 1024
    for num, job in enumerate(jobs[1:], start=1):
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == 1280
        assert steps(job) == batches(1280), num  # no duplicate, no gap: job 1 went on at `stop`
        assert OmegaConf.load(job / ".hydra" / "config.yaml").seed == num  # its own overrides
    assert sorted(p.name for p in sweep.iterdir()) == [
        ".rlrun.lock", "0", "1", "2", "3", "multirun.yaml"
    ]  # fmt: skip
    assert (sweep / "multirun.yaml").read_text() == multirun  # resumable again
    assert list(workdir.glob("outputs/*/*")) == [sweep.parent]  # no other run folder

    everything = files(sweep)
    proc = run_rlrun(f"resume={sweep}", cwd=workdir)
    assert "4 jobs, 4 completed (left as they are), 0 to run" in proc.stdout + proc.stderr
    assert files(sweep) == everything


def task_pid(job: Path) -> int:
    """The process running a submitit_local job: the child of its controller, whose pid is the
    job id (Hydra records it as ``hydra.job.id``)."""
    controller = int(OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra.job.id)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == controller:
            return int(stat.parent.name)
    raise AssertionError(f"no process runs {job}")


@pytest.mark.xdist_group("sweeps")
def test_submitit_job_is_requeued_after_usr2_and_a_stopped_one_resumes(workdir: Path) -> None:
    # Two submitit_local jobs side by side. Job 0 gets USR2 (what SLURM sends before the time
    # limit): it stops with a checkpoint, submitit requeues it, and it continues from there.
    # Job 1 gets SIGTERM: it stops with a checkpoint and the sweep ends with it interrupted.
    total = 2048
    launcher = "hydra/launcher=submitit_local"
    proc = start(workdir, "-m", *JOB, f"trainer.total_frames={total}", "seed=0,1", launcher)
    pending = {0: signal.SIGUSR2, 1: signal.SIGTERM}
    deadline = time.monotonic() + 240
    try:
        while pending:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, f"still waiting to signal jobs {pending}"
            for num, sig in list(pending.items()):
                found = list(workdir.glob(f"outputs/multirun/*/*/{num}/checkpoints/checkpoint-*"))
                if found:
                    os.kill(task_pid(found[0].parents[1]), sig)
                    del pending[num]
            time.sleep(0.02)
        out, _ = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    (sweep,) = workdir.glob("outputs/multirun/*/*")
    requeued, stopped = sweep / "0", sweep / "1"
    logs = "".join(p.read_text() for p in (sweep / ".submitit").rglob("*_log.*"))
    assert "Caught signal SIGUSR2" in logs and "Requeued job" in logs
    assert f"requeued submitit job: continues from {requeued}/checkpoints/checkpoint-" in logs
    assert summary(requeued)["status"] == "completed" and summary(requeued)["frames"] == total
    assert steps(requeued) == batches(total)
    assert summary(stopped)["status"] == "interrupted"
    assert summary(stopped)["frames"] < total
    completed = files(requeued)

    # The stopped job continues, through the sweep's own launcher (submitit_local again).
    before = set((sweep / ".submitit").iterdir())
    run_rlrun(f"resume={sweep}", cwd=workdir)
    assert len(set((sweep / ".submitit").iterdir()) - before) == 1  # one new submitit job
    assert summary(stopped)["status"] == "completed" and summary(stopped)["frames"] == total
    assert steps(stopped) == batches(total)
    assert files(requeued) == completed


def write_sweep(folder: Path, sweeper: dict, task: list[str], subdir: str = "${hydra.job.num}"):
    """A sweep folder's multirun.yaml with what ``rlrun resume=`` reads from it."""
    folder.mkdir(parents=True)
    hydra = {
        "sweep": {"dir": str(folder), "subdir": subdir},
        "sweeper": sweeper,
        "overrides": {"hydra": ["hydra.mode=MULTIRUN"], "task": task},
    }
    OmegaConf.save(OmegaConf.create({"hydra": hydra}), folder / "multirun.yaml")


BASIC = {"_target_": "hydra_plugins.rlrun_sweepers.basic_sweeper.BasicSweeper"}
OPTUNA = {
    "_target_": "hydra_plugins.rlrun_sweepers.optuna_sweeper.OptunaSweeper",
    "storage": "sqlite:///outputs/optuna/ppo_CartPole-v1.db",
}


@pytest.mark.parametrize(
    ("sweeper", "subdir", "extra", "message"),
    [
        (OPTUNA, "${hydra.job.num}", [], "an Optuna search continues from its study"),
        (BASIC, "${hydra.job.override_dirname}", [], "its job folders are named by"),
        (BASIC, "${hydra.job.num}", ["seed=5,6"], "seed=5,6 would be a new sweep"),
    ],
)
def test_sweep_resume_refusals(workdir: Path, sweeper, subdir, extra, message) -> None:
    sweep = workdir / "outputs" / "multirun" / "2026-11-23" / "10-00-00"
    task = ["+experiment=ppo", "hparams_search=ppo_optuna" if sweeper is OPTUNA else "seed=0,1"]
    write_sweep(sweep, sweeper, task, subdir)
    proc = run_rlrun(f"resume={sweep}", *extra, cwd=workdir, check=False)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr
    if sweeper is OPTUNA:  # the command that continues the search
        assert "rlrun -m +experiment=ppo hparams_search=ppo_optuna" in proc.stderr
    assert sorted(p.name for p in sweep.iterdir()) == ["multirun.yaml"]


def test_plan_rebuilds_a_product_sweep_and_keeps_each_jobs_overrides(tmp_path: Path) -> None:
    # optim.lr x seed, Hydra's order: job 0 (1e-3, 0), 1 (1e-3, 1), 2 (3e-4, 0), 3 (3e-4, 1).
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlrun.folders.resume import plan_sweep_resume

    sweep = tmp_path / "sweep"
    task = ["+experiment=ppo", "optim.lr=1e-3,3e-4", "seed=0,1"]
    write_sweep(sweep, {**BASIC, "params": {"algo.epochs": "2"}}, task)
    for num, status in ((0, "completed"), (1, "failed"), (3, "pruned")):
        (sweep / str(num) / ".hydra").mkdir(parents=True)
        (sweep / str(num) / "summary.json").write_text(f'{{"status": "{status}"}}')
    saved = ["algo.epochs=2", "+experiment=ppo", "optim.lr=1e-3", "seed=1", "resume=/old"]
    OmegaConf.save(OmegaConf.create(saved), sweep / "1" / ".hydra" / "overrides.yaml")

    new = ["trainer.total_frames=512"]
    jobs = plan_sweep_resume(sweep, ["+experiment=ppo", *new], OverridesParser.create())
    assert [(j.num, j.state, j.checkpoint) for j in jobs] == [
        (1, "failed", None),  # no checkpoint: from scratch, no resume=
        (2, "not started", None),
    ]
    assert jobs[0].overrides == [*saved[:4], *new, "hydra.sweep.subdir=1"]
    rebuilt = ["algo.epochs=2", "+experiment=ppo", "optim.lr=0.0003", "seed=0"]  # as Hydra has it
    assert jobs[1].overrides == [*rebuilt, *new, "hydra.sweep.subdir=2"]
