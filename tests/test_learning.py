"""One short learning check per family of algorithms, through the console script: on-policy
(PPO), recurrent against memoryless (LSTM and MLP on masked CartPole), value-based (DQN),
max-entropy off-policy (SAC), deterministic off-policy (TD3), offline (IQL from a dataset
that ``rlrun record`` made of the SAC run) and teams of agents (MAPPO and IPPO, QMIX and VDN,
MADDPG, MASAC and IDDPG; IPPO in a turn-based game). Each asserts a return that an untrained policy
cannot reach: a random policy averages about 22 an episode on CartPole-v1 and about -1200 on
Pendulum-v1. Small networks and fixed seeds keep each check to a minute or so on 2 cores; the
presets at their full budgets are ``rlrun check``'s (bench/results/references.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import EXAMPLES, run_dirs, run_rlrun, summary

pytestmark = pytest.mark.slow

RANDOM_CARTPOLE = 22.0  # mean return of uniform random actions
RANDOM_PENDULUM = -1200.0
QUIET = ["trainer.progress_bar=false", "checkpoint.backend=none"]


def pendulum(frames: int) -> list[str]:
    """Pendulum-v1 for ``frames``: 1000 random, then one update a frame, 64x64 networks at lr
    1e-3, one evaluation of 5 episodes at the end."""
    return ["env=pendulum", f"trainer.total_frames={frames}", "collector.frames_per_batch=200",
            "collector.init_random_frames=1000", "policy.hidden_sizes=[64,64]", "optim.lr=1e-3",
            f"eval.every_frames={frames}", "eval.episodes=5", "seed=0",
            "trainer.progress_bar=false"]  # fmt: skip


def test_ppo_learns_cartpole(workdir: Path) -> None:
    """On-policy: the preset's PPO, 30k frames."""
    run_rlrun("+experiment=ppo", "trainer.total_frames=30720", "seed=1", *QUIET, cwd=workdir,
              timeout=600)  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    s = summary(run_dir)
    assert s["status"] == "completed"
    assert s["train_return_best"] > 150, s  # random: RANDOM_CARTPOLE


def test_lstm_learns_masked_cartpole_where_a_memoryless_policy_cannot(workdir: Path) -> None:
    """Recurrent against memoryless: the ppo_lstm preset with its LSTM and with an MLP, on
    CartPole without velocities, 12k frames each, one sweep. Best batch returns, seeds 0, 1, 2:
    LSTM 226, 181, 152; MLP 69.8, 77.7, 71.4 (2026-11-28; at 20k frames LSTM 461, 454, 500, MLP
    76.6, 75, 72.4, 2026-11-27; the MLP peaks near 65 over 150k frames)."""
    sweep = workdir / "sweep"
    run_rlrun("-m", "+experiment=ppo_lstm", "policy=lstm,mlp", "trainer.total_frames=12288",
              "seed=0", f"hydra.sweep.dir={sweep}", *QUIET, cwd=workdir,
              timeout=600)  # fmt: skip
    lstm, mlp = (summary(sweep / job)["train_return_best"] for job in ("0", "1"))
    assert lstm > 120 and RANDOM_CARTPOLE < mlp < 100, (lstm, mlp)  # beyond any MLP's best


def test_sac_learns_pendulum_and_iql_learns_from_its_recording(workdir: Path) -> None:
    """Max-entropy off-policy, then offline: SAC learns Pendulum in 4000 frames (evaluation at
    4000: -202.0, -198.8, -198.5 for seeds 0, 1, 2, 2026-11-28); 10 episodes of its policy,
    recorded as a Minari dataset, teach IQL as much in 1500 steps (evaluation -132.0, -173.5,
    -197.5 for seeds 0, 1, 2; -207.8, -129.8, -179.6 at 1000; 2026-11-28; TD3+BC needs more:
    -615 at 3000 steps, 2026-11-27)."""
    env = {"MINARI_DATASETS_PATH": str(workdir / "datasets")}
    run_rlrun("+experiment=sac", *pendulum(4000), cwd=workdir, timeout=600)
    (sac,) = run_dirs(workdir)
    assert summary(sac)["eval_return_last"] > RANDOM_PENDULUM / 3, summary(sac)

    run_rlrun("record", str(sac), "episodes=10", "id=rlrun/pendulum/learned-v0", cwd=workdir,
              env=env)  # fmt: skip
    run_rlrun("+experiment=iql", "dataset=rlrun/pendulum/learned-v0",
              "trainer.total_frames=1500", "collector.frames_per_batch=500",
              "policy.hidden_sizes=[64,64]", "eval.every_frames=1500", "eval.episodes=5",
              "seed=0", *QUIET, cwd=workdir, env=env, timeout=600)  # fmt: skip
    (offline,) = (run for run in run_dirs(workdir) if run != sac)
    assert summary(offline)["eval_return_last"] > RANDOM_PENDULUM / 3, summary(offline)


def test_td3_learns_pendulum(workdir: Path) -> None:
    """Deterministic off-policy: TD3 (the td3_mujoco preset's algorithm) on Pendulum."""
    run_rlrun("+experiment=td3_mujoco", *pendulum(7000), "algo.gamma=0.98", cwd=workdir,
              timeout=600)  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["eval_return_last"] > RANDOM_PENDULUM / 3, summary(run)


def test_dqn_learns_cartpole(workdir: Path) -> None:
    """Value-based: the preset's DQN with 64x64 networks, epsilon annealed over 5000 frames."""
    run_rlrun("+experiment=dqn", "trainer.total_frames=12000", "algo.eps_anneal_frames=5000",
              "collector.init_random_frames=1000", "policy.hidden_sizes=[64,64]",
              "eval.every_frames=12000", "eval.episodes=5", "seed=0", *QUIET, cwd=workdir,
              timeout=600)  # fmt: skip
    (run,) = run_dirs(workdir)
    # seeds 0, 1, 2 gave 117.8, 140 and 184.2 (2026-11-27); an untrained greedy policy ~10
    assert summary(run)["eval_return_last"] > 4 * RANDOM_CARTPOLE, summary(run)


def test_mappo_and_ippo_teams_learn_navigation(workdir: Path) -> None:
    """A team of agents: mappo_navigation with MAPPO and with IPPO, one sweep, 48k frames each
    (60 envs, 64x64 networks, lr 3e-4, 10 passes a batch). A uniformly random team returns
    -0.49 (200 episodes, 2 seeds), an untrained one -0.84 in its first batch; last batch
    returns, seeds 0, 1, 2 (2026-11-27): MAPPO 0.61, 0.44, 0.40; IPPO 0.66, 0.55, 0.56."""
    pytest.importorskip("vmas")
    sweep = workdir / "sweep"
    run_rlrun("-m", "+experiment=mappo_navigation", "algo=mappo,ippo", "env.num_envs=60",
              "policy.hidden_sizes=[64,64]", "optim.lr=3e-4", "algo.epochs=10",
              "trainer.total_frames=48000", "seed=0", f"hydra.sweep.dir={sweep}", *QUIET,
              cwd=workdir, timeout=600)  # fmt: skip
    mappo, ippo = (summary(sweep / job)["train_return_best"] for job in ("0", "1"))
    assert mappo > 0.2 and ippo > 0.2, (mappo, ippo)  # random: -0.49


def test_qmix_and_vdn_teams_learn_a_cooperative_game(workdir: Path) -> None:
    """Value decomposition, one sweep: QMIX and VDN on a PettingZoo team game of the user's own
    (``examples/my_lab/team_targets.py``: 2 agents, each paid the share of agents that picked
    the target it was shown), as one group and (``mixed=true``, ``env.group_map=by_type``) as
    two groups of unlike agents, a mixer each; 2048 frames, epsilon from 0.8 to 0.01 over 1536.
    A random team earns 2.5 an episode, a perfect one 10; a greedy evaluation of 20 episodes
    gave 10 for both, seeds 0, 1, 2, either way (2026-11-27). (On VMAS navigation neither beats
    a random team within a test's budget, as in BenchMARL's own VMAS results for Q-learning
    methods.)"""
    pytest.importorskip("pettingzoo")
    sweep = workdir / "sweep"
    run_rlrun("-m", "algo=qmix,vdn", "+env.kwargs.mixed=false,true", "env=pettingzoo",
              "env.id=my_lab.team_targets", "~env.kwargs.N", "~env.kwargs.continuous_actions",
              "+env.kwargs.n_agents=2", "+env.kwargs.n_targets=4", "env.kwargs.max_cycles=10",
              "env.group_map=by_type", "trainer.total_frames=2048",
              "collector.frames_per_batch=512", "algo.eps_anneal_frames=1536",
              "eval.every_frames=2048", "eval.episodes=20", "seed=0", f"hydra.sweep.dir={sweep}",
              *QUIET, cwd=workdir, env={"PYTHONPATH": str(EXAMPLES)})  # fmt: skip
    returns = [summary(sweep / str(job))["eval_return_last"] for job in range(4)]
    assert all(r > 8 for r in returns), returns  # random: 2.5
    for job, losses in (("0", ["loss"]), ("1", ["loss_picker", "loss_scout"])):
        logged = sorted(f.stem for f in (sweep / job / "csv/scalars/train").glob("loss*.csv"))
        assert logged == losses, (job, logged)  # one mixer, or one per group


def test_mappo_learns_with_a_group_per_kind_of_agent(workdir: Path) -> None:
    """Groups that learn: MAPPO on the same game with two kinds of agents (``mixed=true``: a
    scout and a picker, whose observations differ), ``env.group_map=by_type``: each group its
    own networks and loss. 3072 frames; a greedy evaluation of 20 episodes gave 10, 10 and 9.0
    for seeds 0, 1, 2 (2026-11-27; random team: 2.5)."""
    pytest.importorskip("pettingzoo")
    run_rlrun("algo=mappo", "env=pettingzoo", "env.id=my_lab.team_targets", "~env.kwargs.N",
              "~env.kwargs.continuous_actions", "+env.kwargs.n_agents=2", "+env.kwargs.mixed=true",
              "env.kwargs.max_cycles=10", "env.group_map=by_type", "trainer.total_frames=3072",
              "collector.frames_per_batch=512", "algo.minibatch_size=128", "algo.epochs=10",
              "optim.lr=3e-3", "eval.every_frames=3072", "eval.episodes=20", "seed=0", *QUIET,
              cwd=workdir, env={"PYTHONPATH": str(EXAMPLES)})  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["eval_return_last"] > 8  # random: 2.5


def test_ippo_learns_tictactoe_against_a_random_player(workdir: Path) -> None:
    """A turn-based game with action masks (``+experiment=ippo_tictactoe``: PettingZoo's
    tic-tac-toe, rlrun playing player_1, a random legal player_2 moving inside each step), IPPO
    with a masked categorical, 6144 frames (the preset's 10240: 0.90, 0.81, 0.88 in a
    deterministic evaluation of 100 games, seeds 0, 1, 2, 2026-11-27; a sweep to 8192 frames
    gave 0.87, 0.85, 0.68 at 6144, 2026-11-28). A random player_1 averages 0.29 (+1 a win, -1
    a loss)."""
    pytest.importorskip("pettingzoo")
    run_rlrun("+experiment=ippo_tictactoe", "trainer.total_frames=6144", "eval.every_frames=6144",
              "seed=0", *QUIET, cwd=workdir)  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["eval_return_last"] > 0.6, summary(run)  # random: 0.29


def test_continuous_off_policy_teams_learn_a_team_game(workdir: Path) -> None:
    """Continuous off-policy for a team, one sweep: MADDPG's and MASAC's critics that see the
    whole team, IDDPG's per-agent ones, on the continuous version of the user's team game
    (``continuous=true``: each of 2 agents answers a target point in [-1, 1], the team paid one
    minus their mean distance), 3072 frames, 2 updates per 4 frames. A random team earns 3.3
    an episode, the best answer that ignores the target (0, an untrained deterministic
    actor's) 5, a perfect team 10; a deterministic evaluation of 20 episodes, seeds 0, 1, 2:
    MADDPG 9.76, 9.73, 9.71; MASAC 7.97, 8.09, 8.11 (2026-11-28; at 4096 frames: 9.80-9.84 and
    8.40-8.48); IDDPG 9.50, 9.74, 9.65 (2026-11-28, 05:08 UTC). IDDPG on VMAS navigation:
    docs/benchmarks.md."""
    pytest.importorskip("pettingzoo")
    sweep = workdir / "sweep"
    run_rlrun("-m", "algo=maddpg,masac,iddpg", "env=pettingzoo", "env.id=my_lab.team_targets",
              "~env.kwargs.N", "~env.kwargs.continuous_actions", "+env.kwargs.continuous=true",
              "+env.kwargs.n_agents=2", "env.kwargs.max_cycles=10", "trainer.total_frames=3072",
              "collector.frames_per_batch=512", "algo.utd_ratio=0.5", "eval.every_frames=3072",
              "eval.episodes=20", "seed=0", f"hydra.sweep.dir={sweep}", *QUIET, cwd=workdir,
              env={"PYTHONPATH": str(EXAMPLES)})  # fmt: skip
    returns = [summary(sweep / job)["eval_return_last"] for job in ("0", "1", "2")]
    assert all(r > 7.5 for r in returns), returns  # random: 3.3; ignoring the target: 5
