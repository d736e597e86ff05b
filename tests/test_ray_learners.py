"""``trainer.learner_backend=ray`` through the console script: SAC optimised on two Ray learner
actors (DDP, gloo) while this process collects, stopped by a killed learner and by SIGTERM, resumed
with the learners' state; DQN on two learners fed by Ray collector workers, which get the learners'
weights with the driver's annealed epsilon; and what cannot run remotely, refused in one line
before anything is written."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    RLRUN,
    leftovers,
    run_dirs,
    run_in_session,
    run_rlrun,
    series,
    session_pids,
    summary,
)
from tensordict import TensorDict

from rlrun.commands.loading import load_trained

pytestmark = pytest.mark.xdist_group("ray")  # one Ray at a time on CI's 2 cores

SMALL = [
    "trainer.progress_bar=false",
    "collector.init_random_frames=200",  # optimised from the first batch of 200 frames on
    "replay_buffer.batch_size=64",
    "algo.utd_ratio=0.25",  # 50 steps per batch of 200 frames
    "policy.hidden_sizes=[64,64]",
    "eval=none",
]
# the command: the default (sync) collector in this process, 2 learners on a local Ray
# sized to the machine (a CPU each: fits CI's 2 cores)
LEARNERS = ["+experiment=sac", "trainer.learner_backend=ray", "trainer.num_learners=2", *SMALL]


def _checkpoints(workdir: Path) -> list[Path]:
    return sorted(workdir.glob("outputs/*/*/checkpoints/checkpoint-*"))


def _train_until(workdir: Path, frames: int, *args: str) -> subprocess.Popen:
    """``rlrun ARGS`` in a session of its own, once a checkpoint of ``frames`` frames or more
    exists (checkpoints are named by their frames)."""
    proc = subprocess.Popen(
        [RLRUN, *args], cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not any(p.name >= f"checkpoint-{frames:012d}" for p in _checkpoints(workdir)):
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"no checkpoint of {frames} frames: {proc.communicate()[1]}")
        time.sleep(0.5)
    return proc


def _kill_a_learner(proc: subprocess.Popen) -> tuple[int, str]:
    """SIGKILL one Ray learner of the run ``proc``; its pid and the run's stderr once it ended."""
    try:
        (learner, *_) = [
            pid
            for pid in session_pids(proc.pid)
            if b"_RayLearnerWorker" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        os.kill(learner, signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)  # it must not hang
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return learner, stderr


def test_sac_on_two_learners_survives_a_killed_learner_and_sigterm(workdir: Path) -> None:
    """A learner that dies takes the DDP group with it: the run stops within seconds with one
    line naming it and resumes from the checkpoint saved before, with new learners and the
    learners' state: frames and optimisation steps go on. That run stops on SIGTERM with a
    checkpoint of its own. (One run per stop: each starts a Ray and two learners; resuming from
    a SIGTERM's checkpoint is tests/test_checkpoints.py's.)"""
    args = [*LEARNERS, "trainer.total_frames=20000", "checkpoint.every_frames=200"]
    proc = _train_until(workdir, 400, *args, "checkpoint.keep=100")  # the first one kept too
    learner, stderr = _kill_a_learner(proc)
    assert proc.returncode == 1, stderr[-3000:]
    last = stderr.strip().splitlines()[-1]
    # named by its pid where Ray's error reached rlrun (under load TorchRL may first shut the
    # learners down, and only "a Ray learner" is known)
    named = (f"rlrun: error: Ray learner (pid {learner}) died", "rlrun: error: a Ray learner died")
    assert last.startswith(named), last
    assert "checkpoints saved before are kept" in last
    assert leftovers(proc.pid) == []
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "failed"

    killed_at = int(_checkpoints(workdir)[-1].name.rsplit("-", 1)[1])
    proc = _train_until(workdir, killed_at + 400, f"resume={run}")  # two more batches
    try:
        os.kill(proc.pid, signal.SIGTERM)  # the rlrun process only
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, stderr[-3000:]
    assert leftovers(proc.pid) == []
    assert f"resumed from {run}/checkpoints/checkpoint-{killed_at:012d}" in stderr + stdout
    assert "rlrun: interrupted" in stdout
    stopped = summary(run)
    assert stopped["status"] == "interrupted"
    frames = stopped["frames"]
    assert killed_at + 400 <= frames < 20000
    assert (run / "checkpoints" / f"checkpoint-{frames:012d}").is_dir()
    steps = series(run, "optim_steps")
    assert steps[-1] == (frames, frames / 200 * 50)  # 50 steps a batch, across the kill too
    assert all(math.isfinite(v) for _, v in series(run, "loss_qvalue"))  # logged on the driver

    # the driver's actor, which the sync collector runs, moved with the learners' weights
    first, last = (
        TensorDict.from_module(load_trained(run, checkpoint=f"step_{n}").ac.actor)
        for n in (200, frames)
    )
    assert (first != last).any()


def test_dqn_on_two_learners_feeds_ray_workers_with_their_weights_and_epsilon(
    workdir: Path,
) -> None:
    """Rank 0 sends its Q-network with the driver's epsilon module to the Ray collector workers
    (TorchRL checks that the payload matches the workers' policy, module for module)."""
    args = [
        "+experiment=dqn", "collector=ray", "collector.num_workers=1", "ray.num_cpus=3",
        "trainer.learner_backend=ray", "trainer.num_learners=2", "optim.anneal_lr=false",
        "trainer.total_frames=1000", "collector.frames_per_batch=200",
        "algo.eps_anneal_frames=600", *SMALL, "checkpoint.every_frames=1000",
    ]  # fmt: skip
    done, left = run_in_session(*args, cwd=workdir)
    assert done.returncode == 0, done.stderr[-3000:]
    assert left == []
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "completed"
    assert round(series(run, "epsilon")[-1][1], 3) == 0.01  # annealed here (dqn preset: eps_end)
    assert series(run, "optim_steps")[-1] == (1000, 250)  # 5 optimised batches of 50 steps


REFUSED = {
    "ppo": (["+experiment=ppo", "collector=ray"], "algo=ppo cannot train"),
    "batch": (
        ["+experiment=sac", "collector=ray", "replay_buffer.batch_size=255"],
        "replay_buffer.batch_size=255 must be divisible",
    ),
    "single_frames": (
        [
            "+experiment=sac",
            "env=pong",
            "policy=cnn",
            "collector=ray",
            "replay_buffer.single_frames=true",
        ],
        "replay_buffer.single_frames=True is not supported",
    ),
    "sampler": (
        ["+experiment=sac", "collector=ray", "replay_buffer.sampler=prioritized"],
        "replay_buffer.sampler=prioritized is not supported",
    ),
    "compile": (["+experiment=sac", "collector=ray", "algo.compile=true"], "algo.compile=true"),
    "anneal_lr": (["+experiment=sac", "collector=ray", "optim.anneal_lr=true"], "optim.anneal_lr"),
    "torchsnapshot": (
        ["+experiment=sac", "collector=ray", "checkpoint=torchsnapshot"],
        "checkpoint.backend=torchsnapshot cannot save",
    ),
    "builtin_hook": (
        ["+experiment=sac", "collector=ray", "hooks=[clear_cuda_cache]"],
        "built-in hooks are not supported",
    ),
    "hook_stage": (
        [
            "+experiment=sac",
            "collector=ray",
            "+hooks.mine._target_=collections.Counter",
            "+hooks.mine.at=post_optim",
        ],
        "hooks.mine.at=post_optim runs inside the optimisation loop",
    ),
    "ray_size": (
        ["+experiment=sac", "collector=ray", "ray.num_cpus=2"],
        "need 4; set ray.num_cpus=4",
    ),
    "ray_size_learners": (["+experiment=sac", "ray.num_cpus=1"], "need 2; set ray.num_cpus=2"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_cannot_run_on_ray_learners_is_refused_in_one_line(workdir: Path, case: str) -> None:
    if case == "single_frames":  # only Atari's stacked frames have it
        pytest.importorskip("ale_py")
        pytest.importorskip("cv2")
    args, expected = REFUSED[case]
    learners = ["trainer.learner_backend=ray", "trainer.num_learners=2"]
    size = [] if case.startswith("ray_size") else ["ray.num_cpus=4"]
    proc = run_rlrun(*args, *learners, *size, cwd=workdir, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not (workdir / "outputs").exists()


def test_num_learners_needs_the_ray_backend(workdir: Path) -> None:
    proc = run_rlrun("+experiment=sac", "trainer.num_learners=2", cwd=workdir, check=False)
    assert proc.returncode == 2
    assert "trainer.num_learners=2 needs trainer.learner_backend=ray" in proc.stderr
    assert not (workdir / "outputs").exists()
