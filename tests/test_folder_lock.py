"""One writer per folder (issue #35): a run holds its folder while it trains, a second run or
resume aimed at it is refused in one line naming the holder, readers (eval, report) work on it
meanwhile without taking it, a SIGKILLed run leaves no stale lock, and a sweep resumed twice at
once runs its job once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import CHECKPOINTED, RLRUN, run_rlrun, summary

from rlrun.folders.folder_lock import held_by


def wait_for(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def saved_files(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in (folder / ".hydra").iterdir()}


def test_a_running_run_holds_its_folder_readers_do_not_and_a_kill_frees_it(workdir) -> None:
    run = workdir / "runs" / "a"
    args = [*CHECKPOINTED, "trainer.total_frames=1000000", f"hydra.run.dir={run}"]
    first = subprocess.Popen(
        [RLRUN, *args], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: any((run / "checkpoints").glob("checkpoint-*")))
        config = saved_files(run)
        holder = json.loads((run / ".rlrun.lock").read_text())
        assert holder["pid"] == first.pid and holder["host"] == os.uname().nodename

        for again in ([*args], [f"resume={run}"]):  # a second run, a second resume
            proc = run_rlrun(*again, cwd=workdir, check=False)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
            (line,) = proc.stderr.strip().splitlines()
            assert line.startswith(f"rlrun: error: {run} is in use by rlrun "), line
            assert f"pid {first.pid}, since {holder['since']}" in line
        assert saved_files(run) == config and first.poll() is None

        # readers: the newest intact checkpoint, the CSV logs so far; the run trains on
        proc = run_rlrun("eval", str(run), "episodes=1", cwd=workdir)
        assert "return" in proc.stdout
        proc = run_rlrun("report", str(run), cwd=workdir)
        assert "| running |" in proc.stdout
        assert first.poll() is None and json.loads((run / ".rlrun.lock").read_text()) == holder
    finally:
        first.kill()  # SIGKILL: no handler runs, nothing is cleaned up
        first.communicate()
    assert first.returncode == -signal.SIGKILL and not (run / "summary.json").exists()

    # resumable at once: the kernel dropped the lock with the process
    proc = run_rlrun(f"resume={run}", "trainer.total_frames=512", cwd=workdir)
    assert "resumed from" in proc.stderr + proc.stdout
    assert summary(run)["status"] == "completed"


def test_a_sweep_resumed_twice_at_once_runs_its_job_once(workdir) -> None:
    sweep = workdir / "sweep"
    short = [*CHECKPOINTED, "trainer.total_frames=512", "seed=0,1", f"hydra.sweep.dir={sweep}"]
    run_rlrun("-m", *short, cwd=workdir)
    (sweep / "1" / "summary.json").unlink()  # job 1 stopped without a summary: to be resumed
    done = (sweep / "0" / "summary.json").read_bytes()

    def resume(_: int) -> subprocess.CompletedProcess:
        return run_rlrun(f"resume={sweep}", "trainer.total_frames=4096", cwd=workdir, check=False)

    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(resume, range(2)))
    assert sorted(p.returncode for p in procs) == [0, 2], [p.stderr for p in procs]
    refused = next(p for p in procs if p.returncode == 2)
    assert "is in use by rlrun resume=" in refused.stderr and "Traceback" not in refused.stderr
    assert (sweep / "0" / "summary.json").read_bytes() == done
    assert summary(sweep / "1")["frames"] == 4096
    log = (sweep / "1" / "cli.log").read_text()
    assert log.count("resumed from") == 1, log


# takes the lock, empties the file, then writes its description, half a second between steps: a
# holder descheduled between the steps of rlrun's own ``hold``
SLOW_HOLDER = """
import fcntl, json, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("locked", flush=True)
time.sleep(0.5)
os.ftruncate(fd, 0)
print("emptied", flush=True)
time.sleep(0.5)
me = {"command": "rlrun slow-holder", "host": socket.gethostname(), "pid": os.getpid(),
      "since": "now"}
os.pwrite(fd, json.dumps(me).encode(), 0)
time.sleep(60)
"""


def test_a_refusal_names_the_holder_that_has_not_yet_written_its_name(workdir) -> None:
    """The lock file still names its previous, ended holder when the next one takes the lock
    (then it is empty for a moment): the refusal waits for the new holder's description instead
    of naming the ended one, or "another process" (what CI once got from a sweep resumed twice
    at once)."""
    run = workdir / "run"
    run.mkdir()
    ended = subprocess.Popen(["true"])  # a pid of this host that no longer exists
    ended.wait()
    stale = {"command": "rlrun ended-holder", "host": os.uname().nodename, "pid": ended.pid}
    (run / ".rlrun.lock").write_text(json.dumps({**stale, "since": "before"}))
    holder = subprocess.Popen(
        [sys.executable, "-c", SLOW_HOLDER, str(run / ".rlrun.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        named = []
        for step in ("locked\n", "emptied\n"):
            assert holder.stdout.readline() == step
            named.append(held_by(run))  # what the console script's check calls, at once
    finally:
        holder.kill()
        holder.communicate()
    expected = f"rlrun slow-holder (host {os.uname().nodename}, pid {holder.pid}, since now)"
    assert named == [expected, expected]
