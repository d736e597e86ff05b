"""A sweep job killed by a signal mid-training (SIGKILL, as the OOM killer sends it), with each
launcher rlrun ships: the job is recorded as failed with the signal (Ray: with Ray's error) and a
hint, the jobs beside it and after it run to their end, the sweep ends with its one-line list of
failed jobs and no traceback, and ``rlrun resume=<sweep>`` runs only the killed job. Through the
real console script."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY, run_rlrun, summary
from test_resume_sweeps import files

HOOKS = {"PYTHONPATH": str(Path(__file__).parent)}  # tests/dying_hooks.py, in rlrun's processes
# three jobs; job 1 kills itself after its first batch, the first time only
DIE = [
    "+hooks.die._target_=dying_hooks.DieOnce",
    "+hooks.die.at=post_steps",
    "+hooks.die.signal=null,SIGKILL,null",
]
BESIDE = "+hooks.die.wait_s=120"  # jobs that run beside it train on once it died
OOM_HINT = "(out of memory? check dmesg / the scheduler's log)"


def killed_sweep(workdir: Path, *launcher: str) -> tuple[list[Path], str]:
    """The sweep's three job folders, once it ended with job 1 killed (checked here), and job
    1's error."""
    args = ["-m", "+experiment=ppo", *TINY, *DIE, *launcher]
    proc = run_rlrun(*args, cwd=workdir, check=False, env=HOOKS)
    assert proc.returncode == 1, proc.stderr
    (sweep,) = workdir.glob("outputs/multirun/*/*")
    jobs = [sweep / str(num) for num in range(3)]
    assert [summary(job)["status"] for job in jobs] == ["completed", "failed", "completed"]
    assert summary(jobs[0])["frames"] == summary(jobs[2])["frames"] == 1024
    error = summary(jobs[1])["error"]
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-2:]
    assert last == ["rlrun: error: 1 of 3 sweep jobs failed:", f"  {jobs[1]}: {error}"], last
    return jobs, error


def trained_beside(job: Path, workdir: Path) -> bool:
    """Whether ``job`` started before the killed job died (DieOnce's marker) and ended after."""
    died = (workdir / "died.marker").stat().st_mtime
    started = (job / ".hydra" / "config.yaml").stat().st_mtime  # Hydra writes it first
    return started < died < (job / "summary.json").stat().st_mtime


def resume_runs_only(workdir: Path, job: Path, *new: str) -> None:
    """``rlrun resume=<sweep> NEW``: ``job`` runs to its end, the other jobs stay as they were."""
    siblings = [other for other in job.parent.glob("[0-9]*") if other != job]
    others = {sibling: files(sibling) for sibling in siblings}
    proc = run_rlrun(f"resume={job.parent}", *new, cwd=workdir, env=HOOKS)
    assert "3 jobs, 2 completed (left as they are), 1 to run" in proc.stdout + proc.stderr
    assert summary(job)["status"] == "completed" and summary(job)["frames"] == 1024
    assert {sibling: files(sibling) for sibling in others} == others


@pytest.mark.xdist_group("sweeps")
@pytest.mark.parametrize(
    "launcher",
    [
        [],  # basic: one job after another, each forked from rlrun's process
        ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", BESIDE],  # jobs 0 and 1, then 2
        ["hydra/launcher=submitit_local", BESIDE],  # all three together
    ],
    ids=["basic", "joblib", "submitit_local"],
)
def test_killed_job_is_one_failed_job_and_resumes(workdir: Path, launcher: list[str]) -> None:
    jobs, error = killed_sweep(workdir, *launcher)
    assert error == f"JobKilled: killed by SIGKILL {OOM_HINT}"
    assert trained_beside(jobs[0], workdir) == (BESIDE in launcher)
    resume_runs_only(workdir, jobs[1])  # through the sweep's own launcher


@pytest.mark.xdist_group("ray")  # one Ray at a time (tests/test_ray_launcher.py)
def test_job_killed_in_a_ray_worker_is_one_failed_job(workdir: Path) -> None:
    pytest.importorskip("hydra_plugins.hydra_ray_launcher")
    ray = ["hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2", BESIDE]  # jobs 0 and 1
    jobs, error = killed_sweep(workdir, *ray)
    assert trained_beside(jobs[0], workdir)
    # Ray says its worker died, not of which signal
    assert error.startswith("JobKilled: ended without a result (WorkerCrashedError: "), error
    assert error.endswith("; killed? out of memory? check dmesg)"), error
    # resuming through Ray is tested in tests/test_ray_launcher.py; here, the plan only
    resume_runs_only(workdir, jobs[1], "hydra/launcher=basic")
