"""``collector=ray`` through the console script, on a local Ray that each run starts and stops:
training, resume, a cluster joined with ``ray.address=auto``, a killed worker, leftovers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import (
    RLRUN,
    TINY,
    leftovers,
    run_dirs,
    run_in_session,
    run_rlrun,
    run_without,
    series,
    session_pids,
    summary,
)

# one Ray at a time on CI's 2 cores (the whole suite took 948 s with Ray tests side by side,
# 820 s with them in one worker, 2026-11-23)
pytestmark = pytest.mark.xdist_group("ray")

SMALL_RAY = ["ray.num_cpus=2"]


def ray_processes() -> dict[int, str]:
    """Live processes of any Ray here (by command line), pid -> command line."""
    found = {}
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(marker in text for marker in ("ray::", "raylet", "gcs_server")):
            found[int(cmdline.parent.name)] = text[:120]
    return found


def run_ray(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``rlrun ARGS`` that must succeed and leave none of its processes (Ray's among them)."""
    proc, left = run_in_session(*args, cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert left == [], left
    return proc


def test_async_dqn_collects_with_ray(workdir: Path) -> None:
    dqn = ["+experiment=dqn", "collector.sync=false", "trainer.total_frames=1024",
           "collector.init_random_frames=256"]  # fmt: skip
    run_ray(*dqn, "collector=ray", "trainer.progress_bar=false", *SMALL_RAY, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    result = summary(run_dir)
    assert result["status"] == "completed" and result["frames"] == 1024, result
    assert series(run_dir, "optim_steps")[-1][1] > 0  # the learner updated on Ray's batches


def test_ppo_lstm_on_four_ray_workers_survives_a_killed_worker(workdir: Path) -> None:
    """The issue's command on CI's 2 cores, with the recurrent preset: rlrun sizes the local Ray
    to the 4 workers' CPUs (ray.num_cpus=null; a Ray of 2 CPUs left two workers waiting: no frame
    in 100 s). A worker killed mid-run stops it with one line and a checkpoint, which resumes."""
    tiny = [arg for arg in TINY if not arg.startswith("trainer.total_frames=")]
    proc = subprocess.Popen(
        [RLRUN, "+experiment=ppo_lstm", *tiny, "collector=ray", "collector.num_workers=4",
         "env.normalize_observations=false", "trainer.total_frames=10000000"],
        cwd=workdir, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        worker = _wait_for_worker(proc)
        deadline = time.monotonic() + 120
        while not any(p.stat().st_size for p in workdir.glob("outputs/*/*/csv/**/loss_critic.csv")):
            assert proc.poll() is None and time.monotonic() < deadline, "no batch trained"
            time.sleep(0.2)
        os.kill(worker, signal.SIGKILL)  # a batch trained
        _, stderr = proc.communicate(timeout=120)  # it must not hang
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"rlrun: error: collector worker (pid {worker}) died"), last
    assert "saved a checkpoint of its last complete batch" in last
    assert "Error executing job" not in stderr
    assert leftovers(proc.pid) == []
    (run_dir,) = run_dirs(workdir)
    stopped = summary(run_dir)
    assert stopped["status"] == "failed" and stopped["frames"] > 0
    assert (run_dir / "checkpoints" / f"checkpoint-{stopped['frames']:012d}").is_dir()
    more = stopped["frames"] + 1024
    run_ray(f"resume={run_dir}", f"trainer.total_frames={more}", cwd=workdir)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == more
    # each batch: the 4 workers' 128 frames, 8 envs each, as [32 envs, 16 steps]
    steps = [step for step, _ in series(run_dir, "loss_critic")]
    assert steps[-2:] == [more - 512, more] and steps == sorted(steps)  # the counters went on
    assert all(value > 0 for _, value in series(run_dir, "loss_critic"))


def _wait_for_worker(proc: subprocess.Popen, timeout: float = 120) -> int:
    """The pid of a collector worker of the run ``proc`` (its session) once it collects."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for pid, cmd in ray_processes().items():
            if "RayWorkerCollector.next" in cmd and os.getsid(pid) == proc.pid:
                return pid
        time.sleep(0.2)
    raise AssertionError(f"no collector worker started (rlrun exit code {proc.poll()})")


@pytest.fixture
def ray_cluster() -> Iterator[tuple[str, str]]:
    """A Ray head started with ``ray start --head`` as a user would (its own temp folder and
    port); yields its address and temp folder. Stopped by ending its own processes
    (``ray stop`` would stop every Ray on this machine)."""
    ray = str(Path(sys.executable).with_name("ray"))
    temp = tempfile.mkdtemp(prefix="rr", dir="/tmp")  # Ray's socket paths must stay short
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = subprocess.run(
        [ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
         f"--temp-dir={temp}", "--disable-usage-stats"],
        capture_output=True, text=True, timeout=120, start_new_session=True,
    )  # fmt: skip
    assert start.returncode == 0, start.stderr
    ours = [pid for pid, cmd in ray_processes().items() if temp in cmd]
    assert ours, "ray start left no process behind"
    yield f"127.0.0.1:{port}", temp
    sessions = {os.getsid(pid) for pid in ours if Path(f"/proc/{pid}").exists()}
    for sid in sessions:  # every process of the session: Ray's daemons have their own groups
        for pid in session_pids(sid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert leftovers(sid) == []
    shutil.rmtree(temp, ignore_errors=True)


def test_joined_cluster_keeps_running_after_the_run(
    workdir: Path, ray_cluster: tuple, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The way docs/guides/ray.md joins a cluster from another host (host:port, token)."""
    address, temp = ray_cluster
    monkeypatch.setenv("RAY_AUTH_MODE", "token")  # Ray's rule for an explicit address
    sac = ["+experiment=sac", "trainer.total_frames=400", "collector.frames_per_batch=200",
           "collector.init_random_frames=200", "replay_buffer.batch_size=32"]  # fmt: skip
    run_ray(*sac, "collector=ray", "trainer.progress_bar=false", f"ray.address={address}",
            cwd=workdir)  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 400
    assert series(run_dir, "optim_steps")[-1][1] > 0  # SAC updated on the cluster's batches
    alive = [cmd for cmd in ray_processes().values() if temp in cmd]
    assert any("gcs_server" in cmd for cmd in alive) and any("raylet" in cmd for cmd in alive)


def test_no_cluster_at_the_address_is_one_line(workdir: Path) -> None:
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "collector=ray", f"ray.address=127.0.0.1:{port}", cwd=workdir,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"rlrun: error: ray.address=127.0.0.1:{port}: nothing answers there")
    assert "ray start --head" in last and "Traceback" not in proc.stderr
    assert time.monotonic() - start < 60  # Ray alone would retry for minutes


def test_collector_ray_without_the_extra_names_it(workdir: Path) -> None:
    proc = run_without("ray", "+experiment=ppo", "collector=ray", cwd=workdir)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlrun: error: collector=ray needs the ray package: pip install 'rlrun[ray]'."
    )
    assert not (workdir / "outputs").exists()


def test_sync_batches_must_divide_among_workers(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", "collector=ray", "collector.num_workers=3", cwd=workdir, check=False
    )
    assert proc.returncode == 2
    assert "must divide among the 3 workers of collector=ray" in proc.stderr
    assert not (workdir / "outputs").exists()


def test_a_local_ray_given_too_few_cpus_for_the_workers_is_refused(workdir: Path) -> None:
    args = ["+experiment=ppo", "collector=ray", "collector.num_workers=4", "ray.num_cpus=2"]
    proc = run_rlrun(*args, cwd=workdir, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "rlrun: error: ray.num_cpus=2 is too few: 4 collector workers (1 each) need 4; set "
        "ray.num_cpus=4 (logical CPUs may exceed the machine's) or null (rlrun then sizes the "
        "local Ray)."
    )
    assert not (workdir / "outputs").exists()
