"""``hydra/launcher=ray`` (``rlrun/conf/hydra/launcher/ray.yaml``, Hydra's Ray launcher) through
the real console script: sweep jobs as Ray tasks on a local Ray the launcher starts; a sweep
stopped with Ctrl-C continues with ``rlrun resume=<sweep>`` through the same launcher; no Ray
process outlives a command."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import BATCH, CHECKPOINTED, RLRUN, csv_series, run_without, summary
from omegaconf import OmegaConf

pytestmark = pytest.mark.xdist_group("ray")  # one Ray at a time: its tests share a worker

RAY = ["hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2"]  # 2 jobs at once on 2 cores
TAG = "RLRUN_TEST_RAY_LAUNCHER"  # in the environment of everything a command starts
JOB = CHECKPOINTED


def tagged(tag: str) -> dict[int, str]:
    """Live processes whose environment has ``TAG=tag``, pid -> command line: the command's own
    and all it started, Ray's GCS, raylet, agents and workers included (they inherit the
    driver's environment), whatever session or process group they moved to."""
    wanted = f"{TAG}={tag}".encode()
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if wanted not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX":
                continue  # exited, not yet reaped
            found[int(proc.name)] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:  # gone while we looked, or not ours to read
            continue
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def start(cwd: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """``rlrun ARGS`` in a session of its own (a terminal's Ctrl-C reaches its whole group),
    tagged; returns the process and its tag. It starts with SIGINT ignored, as a shell starts
    a background job and as pytest-xdist's workers run (the CI case, where a stop on SIGINT
    once hung): rlrun must stop on it all the same."""
    tag = uuid.uuid4().hex
    proc = subprocess.Popen(
        [RLRUN, *args], cwd=cwd, env={**os.environ, "WANDB_MODE": "offline", TAG: tag},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=_ignore_sigint,
    )  # fmt: skip
    return proc, tag


def finish(proc: subprocess.Popen, tag: str, timeout: float = 300) -> str:
    """The output of ``proc`` once it ended; none of the processes it started (Ray's among them)
    may be alive 10 s later."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == {}, f"left running after rlrun {' '.join(proc.args[1:])}: {left}"
    return out


def newest_checkpoint(job: Path) -> int:
    """Frames of the newest checkpoint in a job folder (0 when there is none)."""
    names = sorted(p.name for p in job.glob("checkpoints/checkpoint-*"))
    return int(names[-1].rsplit("-", 1)[1]) if names else 0


def test_sweep_stopped_with_ctrl_c_resumes_through_the_ray_launcher(workdir: Path) -> None:
    """Two jobs as Ray tasks, stopped with Ctrl-C, resumed: both finish from their checkpoints
    (one sweep covers the launcher's start, stop and resume: a local Ray costs about 5 s)."""
    proc, tag = start(workdir, "-m", *JOB, "trainer.total_frames=100000000", "seed=0,1", *RAY)
    try:
        deadline = time.monotonic() + 240
        while sum(newest_checkpoint(j) > 0 for j in workdir.glob("outputs/multirun/*/*/[01]")) < 2:
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the jobs wrote no checkpoint in 240 s"
            time.sleep(0.05)
        running = " | ".join(tagged(tag).values())  # what finish() must see gone
        for name in ("gcs_server", "raylet", "ray::_run_job"):
            assert name in running, running
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C in a terminal: the foreground group
    out = finish(proc, tag, timeout=300)  # two jobs stopping after their batch, under load
    assert proc.returncode == 130 and "rlrun: stopped" in out, out
    (sweep,) = {d.parent for d in workdir.glob("outputs/multirun/*/*/[01]")}
    sweep = sweep.resolve()
    jobs = [sweep / "0", sweep / "1"]
    for job in jobs:  # the launcher's Ray stopped the jobs: no summary, or "interrupted"
        assert not (job / "summary.json").is_file() or summary(job)["status"] == "interrupted"
    total = max(newest_checkpoint(job) for job in jobs) + 2 * BATCH
    multirun = (sweep / "multirun.yaml").read_text()

    proc, tag = start(workdir, f"resume={sweep}", f"trainer.total_frames={total}")
    out = finish(proc, tag)
    assert proc.returncode == 0, out
    assert "2 jobs, 0 completed (left as they are), 2 to run" in out
    assert "Ray Launcher is launching 2 jobs" in out and "'num_cpus': 2" in out  # as saved
    assert "(_run_job pid=" in out and f"rlrun: completed: {total} frames" in out  # forwarded
    # init.logging_level=ERROR: none of Ray's start-up notices
    assert "Token authentication" not in out and "Started a local Ray instance" not in out
    for num, job in enumerate(jobs):
        assert f"seed={num}" in (job / ".hydra" / "overrides.yaml").read_text()
        hydra = OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra
        assert hydra.job.id == f"job_id_for_{num}"  # set by the Ray launcher
        (log,) = job.glob("*.log")  # the job's log (Ray forwards similar lines late, or merged)
        assert f"resumed from {job}/checkpoints/checkpoint-" in log.read_text()
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == total
        steps = {step for step, _ in csv_series(job, "train/optim_steps")}
        assert steps == set(range(BATCH, total + 1, BATCH))  # no gap: on from its checkpoint
    assert (sweep / "multirun.yaml").read_text() == multirun  # resumable again


def test_without_the_extra_the_launcher_names_it(workdir: Path) -> None:
    proc = run_without(
        "hydra_plugins.hydra_ray_launcher", "-m", "+experiment=ppo", *RAY, cwd=workdir
    )
    assert proc.returncode == 2, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "hydra/launcher=ray needs" in last and "pip install 'rlrun[ray]'" in last, last
    assert not (workdir / "outputs").exists()
