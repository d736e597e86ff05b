"""Teams of agents through the real ``rlrun`` console script: a VMAS scenario trained by MAPPO
with TensorBoard logs, continued by ``resume=``, evaluated (team return) and exported (the
per-agent policy over the agent dimension); IPPO on a PettingZoo env with worker processes;
QMIX and VDN on discrete actions; MADDPG, IDDPG, MASAC and ISAC; and the refusals that name the
fix. Learning (MAPPO, IPPO, IDDPG): ``tests/test_learning.py``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import csv_series, run_dirs, run_rlrun, summary
from test_loggers import tensorboard_series

pytest.importorskip("vmas")

# mappo_navigation at a test's size: 20 envs x 20 steps a batch (PPO: two minibatches, one pass)
TEAM = [
    "+experiment=mappo_navigation",
    "env.num_envs=20",
    "env.max_episode_steps=20",  # episodes end within a batch: a team return to log
    "collector.frames_per_batch=400",
    "policy.hidden_sizes=[32,32]",
    "trainer.progress_bar=false",
]
SMALL = [*TEAM, "algo.minibatch_size=200", "algo.epochs=1"]


def test_mappo_trains_resumes_evaluates_and_exports_the_team(workdir: Path) -> None:
    run_rlrun(*SMALL, "trainer.total_frames=400", "logger=[csv,tensorboard]", cwd=workdir)
    (run,) = run_dirs(workdir)
    assert summary(run)["frames"] == 400
    (logged,) = tensorboard_series(run, "train/episode_return")  # the team's, at 400 frames
    assert logged[0] == 400 and logged[1] == pytest.approx(summary(run)["train_return_last"])

    proc = run_rlrun(f"resume={run}", "trainer.total_frames=800", cwd=workdir)
    assert "resumed from" in proc.stdout + proc.stderr
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 800

    proc = run_rlrun("eval", str(run), "episodes=4", cwd=workdir)
    (result,) = run.glob("eval/*/eval.json")
    returns = json.loads(result.read_text())["returns"]
    assert len(returns) == 4 and all(math.isfinite(r) for r in returns)

    run_rlrun("export", str(run), "format=onnx", cwd=workdir)
    specs = json.loads((run / "export" / "policy.onnx.json").read_text())
    assert specs["inputs"][0] == {
        "name": "agents_observation", "shape": ["batch", 3, 18], "dtype": "float32"
    }  # fmt: skip
    assert specs["action"]["shape"] == [3, 2] and specs["action"]["encoding"] == "continuous"
    assert specs["verified"]["runtime"] == "onnxruntime"


def test_ippo_trains_a_pettingzoo_team_with_worker_processes(workdir: Path) -> None:
    """MPE's simple_spread through PettingZoo, stepped by two worker processes (4 envs each,
    one after the other), then evaluated in one env of its own."""
    run_rlrun("env=pettingzoo", "algo=ippo", "collector=multi_sync", "collector.num_workers=2",
              "collector.frames_per_batch=400", "algo.minibatch_size=200", "algo.epochs=1",
              "trainer.total_frames=400", "trainer.progress_bar=false", cwd=workdir)  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["frames"] == 400 and summary(run)["train_return_last"] < 0  # distances
    run_rlrun("eval", str(run), "episodes=2", cwd=workdir)
    (result,) = run.glob("eval/*/eval.json")
    assert json.loads(result.read_text())["lengths"] == [25, 25]  # max_cycles


def test_qmix_and_vdn_train_the_team_on_discrete_actions(workdir: Path) -> None:
    """Value decomposition, one sweep: each agent's greedy action among VMAS's discrete ones,
    the mixed team value regressed on the team's reward; finite losses, a greedy evaluation."""
    sweep = workdir / "sweep"
    run_rlrun("-m", *TEAM, "env.kwargs.continuous_actions=false", "algo=qmix,vdn",
              "replay_buffer.batch_size=64", "trainer.total_frames=800", "eval.every_frames=800",
              "eval.episodes=2", f"hydra.sweep.dir={sweep}", cwd=workdir)  # fmt: skip
    for job, algo in (("0", "qmix"), ("1", "vdn")):
        s = summary(sweep / job)
        assert s["frames"] == 800 and math.isfinite(s["eval_return_last"]), (algo, s)
        losses = [v for _, v in csv_series(sweep / job, "train/loss")]
        assert losses and all(math.isfinite(v) for v in losses), algo


def test_continuous_off_policy_teams_train(workdir: Path) -> None:
    """MADDPG, IDDPG, MASAC and ISAC from the maddpg_navigation preset, one sweep: the team's
    frames through the replay buffer and the fused update step, each agent's Q-value on its
    own reward; every loss term finite, a deterministic evaluation."""
    sweep = workdir / "sweep"
    run_rlrun("-m", "+experiment=maddpg_navigation", *TEAM[1:], "algo=maddpg,iddpg,masac,isac",
              "replay_buffer.size=1000", "replay_buffer.batch_size=64",  # the preset's: 1M, 128
              "trainer.total_frames=800", "eval.every_frames=800", "eval.episodes=2",
              f"hydra.sweep.dir={sweep}", cwd=workdir)  # fmt: skip
    for job, algo in enumerate(("maddpg", "iddpg", "masac", "isac")):
        run = sweep / str(job)
        s = summary(run)
        assert s["frames"] == 800 and math.isfinite(s["eval_return_last"]), (algo, s)
        terms = sorted(t.stem for t in (run / "csv" / "scalars" / "train").glob("loss_*.csv"))
        losses = [v for t in terms for _, v in csv_series(run, f"train/{t}")]
        assert len(terms) >= 2 and all(math.isfinite(v) for v in losses), (algo, terms)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["env=vmas", "env.id=navigaton", "algo=mappo"],
         "env.id=navigaton is not a VMAS scenario (nearest: navigation)."),
        (["env=vmas", "algo=ppo"], "algo=ppo trains one agent, but env.backend=vmas"),
        (["env=pettingzoo", "env.id=mpe2.simple_sprad_v3", "algo=mappo"],
         "env.id=mpe2.simple_sprad_v3 is not an importable module"),
        (["algo=mappo"], "algo=mappo trains a team of agents, but env.id=CartPole-v1 has one"),
        (["+experiment=mappo_navigation", "env.kwargs.continuous_actions=false", "algo=sac"],
         "algo=sac trains one agent"),
        (["+experiment=mappo_navigation", "algo=qmix"],
         "gives Box ones: set env.kwargs.continuous_actions=false"),
        (["+experiment=maddpg_navigation", "env.kwargs.continuous_actions=false"],
         "gives Discrete ones: set env.kwargs.continuous_actions=true"),
        (["env=pettingzoo", "algo=mappo", "env.kwargs={n_agents: 2}"],
         "add it with +env.kwargs.n_agents=... (and drop one env.kwargs has with"),
        (["+experiment=mappo_navigation", "policy=lstm"],
         "algo=mappo cannot train a recurrent policy (policy=lstm); use policy=mlp."),
    ],
)  # fmt: skip
def test_a_team_mistake_is_one_line(args: list[str], message: str, workdir: Path) -> None:
    proc = run_rlrun(*args, cwd=workdir, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (workdir / "outputs").exists()
