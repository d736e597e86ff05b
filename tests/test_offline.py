"""Offline RL from the console script (issue #32): an online run, its policy recorded as a Minari
dataset, offline algorithms trained from it (and from a run's own replay buffer), an offline run
resumed, then continued online from its networks with a collector; refusals in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import run_dirs, run_rlrun, summary

import rlrun

pytest.importorskip("minari")

# optimisation steps in batches of 10, evaluated once at the end
OFFLINE = ["trainer.total_frames=20", "collector.frames_per_batch=10", "eval.every_frames=20",
           "eval.episodes=1", "replay_buffer.batch_size=32",
           "trainer.progress_bar=false"]  # fmt: skip
SAC = ["+experiment=sac", "trainer.total_frames=400", "collector.init_random_frames=200",
       "replay_buffer.batch_size=32", "trainer.progress_bar=false"]  # fmt: skip
DQN = ["+experiment=dqn", "trainer.total_frames=400", "collector.frames_per_batch=200",
       "collector.init_random_frames=200", "replay_buffer.batch_size=32",
       "trainer.progress_bar=false"]  # fmt: skip


def record(run: Path, dataset: str, cwd: Path, env: dict) -> None:
    proc = run_rlrun("record", str(run), "episodes=2", "noise=0.3", "ref_episodes=1",
                     f"id={dataset}", cwd=cwd, env=env)  # fmt: skip
    assert f"Minari dataset {dataset}" in proc.stdout


def offline_jobs(root: Path, count: int) -> list[Path]:
    """The offline sweeps' jobs under ``root``, each completed: 20 optimisation steps (its
    frames), logged as such, and an evaluation in the env."""
    jobs = sorted(p.parent for p in (root / "outputs" / "multirun").rglob("summary.json"))
    assert len(jobs) == count
    for job in jobs:
        done = summary(job)
        assert done["status"] == "completed" and done["frames"] == 20, job
        assert done["eval_return_last"] is not None
        steps = (job / "csv" / "scalars" / "train" / "optim_steps.csv").read_text().split()
        assert steps[-1] == "20,20.0"  # a frame of an offline run is one optimisation step
    return jobs


def test_record_offline_resume_then_online(workdir: Path) -> None:
    env = {"MINARI_DATASETS_PATH": str(workdir / "datasets")}
    run_rlrun(*SAC, cwd=workdir)
    (sac,) = run_dirs(workdir)
    record(sac, "rlrun/pendulum/tiny-v0", workdir, env)

    # every continuous offline algorithm, in one sweep over their presets
    presets = "bc,iql,td3_bc,cql"
    run_rlrun("-m", f"+experiment={presets}", "dataset=rlrun/pendulum/tiny-v0", *OFFLINE,
              cwd=workdir, env=env)  # fmt: skip
    jobs = offline_jobs(workdir, 4)
    iql = next(j for j in jobs if "iql" in (j / ".hydra" / "overrides.yaml").read_text())

    # resumed: 10 more steps, from its checkpoint
    run_rlrun(f"resume={iql}", "trainer.total_frames=30", cwd=workdir, env=env)
    assert summary(iql)["frames"] == 30
    steps = (iql / "csv" / "scalars" / "train" / "optim_steps.csv").read_text().split()
    assert steps[-1] == "30,30.0"

    # online, from the offline networks, sampling the dataset and the collected frames; with a
    # negligible learning rate, its policy acts as the offline one did
    online = ["+experiment=iql", "dataset=rlrun/pendulum/tiny-v0", "collector=sync",
              f"init_from={iql}", "trainer.total_frames=400", "collector.frames_per_batch=200",
              "replay_buffer.offline_anneal_frames=400", "optim.lr=1e-12",
              "replay_buffer.batch_size=32", "eval.every_frames=0",
              "trainer.progress_bar=false"]  # fmt: skip
    proc = run_rlrun(*online, cwd=workdir, env=env)
    assert "rlrun: networks from" in proc.stdout
    run = next(r for r in run_dirs(workdir) if r not in (sac,))
    done = summary(run)
    assert done["status"] == "completed" and done["frames"] == 400
    assert done["train_return_last"] is not None  # it collected episodes
    obs = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0], [-1.0, 0.0, -3.0]])
    offline_actions = rlrun.load(iql)(obs)
    online_actions = rlrun.load(run)(obs)
    torch.testing.assert_close(online_actions, offline_actions, atol=1e-4, rtol=0)
    manifest = json.loads(
        next((run / "checkpoints").glob("checkpoint-*/manifest.json")).read_text()
    )
    assert "replay_buffer" in manifest["components"]  # the collected frames, not the dataset

    # a run's own replay buffer is a dataset too
    run_rlrun("+experiment=td3_bc", f"dataset={sac}", *OFFLINE, cwd=workdir, env=env)
    assert summary(max(run_dirs(workdir), key=lambda p: p.stat().st_mtime))["frames"] == 20


def test_discrete_offline_and_mismatched_spaces(workdir: Path) -> None:
    env = {"MINARI_DATASETS_PATH": str(workdir / "datasets")}
    run_rlrun(*DQN, cwd=workdir)
    (dqn,) = run_dirs(workdir)
    record(dqn, "rlrun/cartpole/tiny-v0", workdir, env)
    run_rlrun("-m", "+experiment=cql_discrete,iql_discrete", "dataset=rlrun/cartpole/tiny-v0",
              *OFFLINE, cwd=workdir, env=env)  # fmt: skip
    bc = ["+experiment=bc", "env=cartpole", "env.num_envs=1", "dataset=rlrun/cartpole/tiny-v0",
          "policy._target_=rlrun.policies.make_actor_critic"]  # fmt: skip
    run_rlrun("-m", *bc, *OFFLINE, cwd=workdir, env=env)
    offline_jobs(workdir, 3)

    # a CartPole dataset for a Pendulum run: one line, exit 2
    proc = run_rlrun("+experiment=iql", "dataset=rlrun/cartpole/tiny-v0", *OFFLINE, cwd=workdir,
                     env=env, check=False)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rlrun: error: dataset=rlrun/cartpole/tiny-v0: its observations have shape (4,), the "
        "env's (3,) (continuous); record a dataset of this env, or choose the env it was "
        "recorded in (env.id=...)."
    ]
    # networks of another algorithm: one line, exit 2
    proc = run_rlrun("+experiment=iql", "env=cartpole", "env.num_envs=1", f"init_from={dqn}",
                     "dataset=rlrun/cartpole/tiny-v0", *OFFLINE, cwd=workdir, env=env,
                     check=False)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("rlrun: error: init_from=") and "do not fit" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
