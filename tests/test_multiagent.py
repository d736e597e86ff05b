"""Teams of agents through the real ``rlrun`` console script: a VMAS scenario trained by MAPPO
with TensorBoard logs, continued by ``resume=``, evaluated (team return) and exported (the
per-agent policy over the agent dimension); IPPO on a PettingZoo env with worker processes;
QMIX and VDN on discrete actions; MADDPG, IDDPG, MASAC and ISAC; teams of two groups of agents
(MAPPO, MADDPG, MASAC); and the refusals that name the fix. Learning (MAPPO, IPPO, IDDPG):
``tests/test_learning.py``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import built, csv_series, run_dirs, run_rlrun, summary
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
    (group,) = tensorboard_series(run, "train/agents/episode_return")  # its one group's
    assert group == pytest.approx(logged)

    proc = run_rlrun(f"resume={run}", "trainer.total_frames=800", cwd=workdir)
    assert "resumed from" in proc.stdout + proc.stderr
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 800

    proc = run_rlrun("eval", str(run), "episodes=4", cwd=workdir)
    (result,) = run.glob("eval/*/eval.json")
    returns = json.loads(result.read_text())["returns"]
    assert len(returns) == 4 and all(math.isfinite(r) for r in returns)

    proc = run_rlrun("record", str(run), "episodes=1", cwd=workdir, check=False)
    assert proc.returncode == 2 and "whose episodes a Minari dataset cannot hold" in proc.stderr

    run_rlrun("export", str(run), "format=onnx", cwd=workdir)
    specs = json.loads((run / "export" / "policy.onnx.json").read_text())
    assert specs["inputs"][0] == {
        "name": "agents_observation", "shape": ["batch", 3, 18], "dtype": "float32"
    }  # fmt: skip
    assert specs["action"]["shape"] == [3, 2] and specs["action"]["encoding"] == "continuous"
    assert specs["verified"]["runtime"] == "onnxruntime"


def test_mappo_trains_a_team_of_two_groups(workdir: Path) -> None:
    """MPE's speaker and listener differ in what they observe and do: ``env.group_map=by_type``
    makes them two groups, each trained by its own loss; each group's return and loss terms are
    logged; eval and an ONNX export (each group's observation in, its action out). (A team of
    groups resumes: the MADDPG test below.)"""
    run_rlrun("env=pettingzoo", "env.id=mpe2.simple_speaker_listener_v4", "~env.kwargs.N",
              "env.group_map=by_type", "algo=mappo", "env.num_envs=4",
              "collector.frames_per_batch=100", "algo.minibatch_size=50", "algo.epochs=1",
              "trainer.total_frames=200", "trainer.progress_bar=false", cwd=workdir)  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 200
    team = [v for _, v in csv_series(run, "train/episode_return")]
    groups = {g: [v for _, v in csv_series(run, f"train/{g}/episode_return")] for g in GROUPS}
    assert len(team) == 2 and all(len(v) == 2 for v in groups.values())
    # the team's reward: the mean of its groups' (one agent each)
    assert team == pytest.approx([(s + li) / 2 for s, li in zip(*groups.values(), strict=True)])
    for group in GROUPS:
        assert all(math.isfinite(v) for _, v in csv_series(run, f"train/loss_objective_{group}"))
    run_rlrun("eval", str(run), "episodes=2", cwd=workdir)
    (result,) = run.glob("eval/*/eval.json")
    assert json.loads(result.read_text())["lengths"] == [25, 25]
    run_rlrun("export", str(run), "format=onnx", cwd=workdir)
    specs = json.loads((run / "export" / "policy.onnx.json").read_text())
    assert [i["name"] for i in specs["inputs"]] == [f"{g}_observation" for g in GROUPS]
    assert [(o["name"], o["shape"]) for o in specs["outputs"]] == [
        ("listener_action", ["batch", 1, 5]), ("speaker_action", ["batch", 1, 3])
    ]  # fmt: skip
    # each group's observation and action described: the listener hears and moves (5
    # continuous components), the speaker sees the goal's colour and speaks (3)
    described = {g: (b["observation"]["shape"], b["action"]) for g, b in specs["groups"].items()}
    box = {"encoding": "continuous", "low": 0.0, "high": 1.0}
    assert described == {
        "listener": ([1, 11], {"shape": [1, 5], **box}),
        "speaker": ([1, 3], {"shape": [1, 3], **box}),
    }
    assert specs["observation"] is None and specs["action"] is None


GROUPS = ("listener", "speaker")  # MPE simple_speaker_listener's agent types, in TorchRL's order


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
    run_rlrun("-m", "env=vmas", *TEAM[1:], "env.kwargs.continuous_actions=false", "algo=qmix,vdn",
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
              "trainer.total_frames=400", "eval.every_frames=400", "eval.episodes=2",
              f"hydra.sweep.dir={sweep}", cwd=workdir)  # fmt: skip
    for job, algo in enumerate(("maddpg", "iddpg", "masac", "isac")):
        run = sweep / str(job)
        s = summary(run)
        assert s["frames"] == 400 and math.isfinite(s["eval_return_last"]), (algo, s)
        terms = sorted(t.stem for t in (run / "csv" / "scalars" / "train").glob("loss_*.csv"))
        losses = [v for t in terms for _, v in csv_series(run, f"train/{t}")]
        assert len(terms) >= 2 and all(math.isfinite(v) for v in losses), (algo, terms)


def test_off_policy_teams_of_two_groups_train_and_resume(workdir: Path) -> None:
    """MPE's simple_adversary in two groups (``by_type``: the adversary, the two agents, whose
    observations differ): MADDPG and MASAC, one sweep, each group its own loss, target critics
    and (MADDPG) exploration noise; MADDPG then resumes, its groups' target critics and noise
    restored from the checkpoint."""
    sweep = workdir / "sweep"
    run_rlrun("-m", "algo=maddpg,masac", "env=pettingzoo", "env.id=mpe2.simple_adversary_v3",
              "~env.kwargs.N", "env.group_map=by_type", "env.num_envs=4",
              "collector.frames_per_batch=100", "collector.init_random_frames=100",
              "replay_buffer.size=1000", "replay_buffer.batch_size=64", "trainer.total_frames=200",
              "policy.hidden_sizes=[32,32]", "eval.every_frames=200", "eval.episodes=2",
              f"hydra.sweep.dir={sweep}", cwd=workdir)  # fmt: skip
    for job, (algo, term) in enumerate((("maddpg", "loss_value"), ("masac", "loss_qvalue"))):
        run = sweep / str(job)
        assert math.isfinite(summary(run)["eval_return_last"]), algo
        for group in ("adversary", "agent"):
            losses = [v for _, v in csv_series(run, f"train/{term}_{group}")]
            assert len(losses) == 2 and all(map(math.isfinite, losses)), (algo, group)
    run_rlrun(f"resume={sweep / '0'}", "trainer.total_frames=300", cwd=workdir)
    assert summary(sweep / "0")["frames"] == 300
    assert len(csv_series(sweep / "0", "train/loss_value_agent")) == 3


def test_a_prioritized_replay_of_two_groups_reads_the_largest_td_error(tmp_path: Path) -> None:
    """One prioritized replay buffer for a team of two groups: each transition's priority is the
    largest TD error of all agents of both groups (TorchRL's sampler takes the largest over one
    group's agents), written where the buffer reads it; after training, sampling favours some
    transitions (their importance weights differ; with no priorities back they were all 1)."""
    overrides = [
        "algo=maddpg", "env=pettingzoo", "env.id=mpe2.simple_adversary_v3", "~env.kwargs.N",
        "env.group_map=by_type", "env.num_envs=4", "collector.frames_per_batch=100",
        "collector.init_random_frames=100", "replay_buffer.size=1000",
        "replay_buffer.batch_size=64", "replay_buffer.sampler=prioritized",
        "trainer.total_frames=300", "policy.hidden_sizes=[32,32]", "eval.every_frames=0",
    ]  # fmt: skip
    with built(tmp_path, *overrides) as (_, trainer):
        trainer.train()
        batch = trainer.replay_buffer.sample()
        assert batch["priority_weight"].unique().numel() > 1
        trainer.loss_module(batch)
    largest = [batch[group, "td_error"].flatten(1).amax(1) for group in ("adversary", "agent")]
    torch.testing.assert_close(batch["td_error"], torch.stack(largest).amax(0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["env=vmas", "env.id=navigaton", "algo=mappo"],
         "env.id=navigaton is not a VMAS scenario (nearest: navigation)."),
        (["env=vmas", "algo=ppo"], "algo=ppo trains one agent, but env.backend=vmas"),
        (["env=pettingzoo", "env.id=mpe2.simple_sprad_v3", "algo=mappo"],
         "env.id=mpe2.simple_sprad_v3 is not an importable module"),
        (["env=tictactoe", "algo=ippo", "~env.opponents.player_2"],
         "env.id=pettingzoo.classic.tictactoe_v3 is a turn-based game: rlrun trains one of its "
         "agents against the others, set as opponents; it has 2 learning (player_1, player_2). "
         "Set env.opponents, e.g. +env.opponents.player_2=random."),
        (["env=tictactoe", "algo=ippo", "+env.opponents.player_3=random"],
         "env.opponents names player_3, not agents of env.id=pettingzoo.classic.tictactoe_v3"),
        (["env=tictactoe", "algo=ippo", "env.opponents.player_2=greedy"],
         "env.opponents.player_2=greedy: an opponent plays random (a uniformly random legal "
         "move) or a policy file from rlrun export RUN format=torchscript (path/policy.pt)."),
        (["env=tictactoe", "algo=maddpg"],
         "has a Discrete one; use algo=ippo or algo=mappo or algo=qmix or algo=vdn."),
        (["env=pettingzoo", "algo=mappo", "+env.opponents.agent_0=random"],
         "env.opponents is for turn-based games; env.id=mpe2.simple_spread_v3 is a parallel env"),
        (["algo=mappo"], "algo=mappo trains a team of agents, but env.id=CartPole-v1 has one"),
        (["+experiment=maddpg_navigation", "algo=sac"], "algo=sac trains one agent"),
        (["+experiment=mappo_navigation", "algo=maddpg"],
         "+experiment=mappo_navigation sets algo.minibatch_size, which algo=maddpg does not have "
         "(a preset is made for its own algorithm): use +experiment=maddpg_navigation"),
        (["env=vmas", "algo=qmix"], "gives Box ones: set env.kwargs.continuous_actions=false"),
        (["+experiment=maddpg_navigation", "env.kwargs.continuous_actions=false"],
         "gives Discrete ones: set env.kwargs.continuous_actions=true"),
        (["env=pettingzoo", "algo=mappo", "env.kwargs={n_agents: 2}"],
         "add it with +env.kwargs.n_agents=... (and drop one env.kwargs has with"),
        (["env=pettingzoo", "env.id=mpe2.simple_speaker_listener_v4", "~env.kwargs.N",
          "algo=ippo"],
         "agents differ in what they observe or do (speaker_0, listener_0), so they cannot form "
         "one group: set env.group_map=by_type"),
        (["+experiment=maddpg_navigation", "env=pettingzoo", "env.id=mpe2.simple_adversary_v3",
          "~env.kwargs.N"],
         "env.kwargs do not fit mpe2.simple_adversary_v3.parallel_env: raw_env.__init__() got an "
         "unexpected keyword argument"),
        (["env.group_map=one_per_agent"],
         "env.group_map=one_per_agent groups a team's agents; env.id=CartPole-v1 has one agent"),
        (["+experiment=mappo_navigation", "policy=lstm"],
         "algo=mappo cannot train a recurrent policy (policy=lstm); use policy=mlp."),
    ],
)  # fmt: skip
def test_a_team_mistake_is_one_line(args: list[str], message: str, workdir: Path) -> None:
    proc = run_rlrun(*args, cwd=workdir, check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and not (workdir / "outputs").exists()


def test_a_team_algorithm_of_ones_own_without_groups_is_refused_them() -> None:
    """Every shipped team algorithm trains several groups; a user's own that does not declare
    ``groups`` is refused ``env.group_map=by_type`` in one line naming those that do."""
    from dataclasses import replace

    from omegaconf import OmegaConf

    from rlrun.algorithms import shipped
    from rlrun.checks.algorithms import check_groups
    from rlrun.errors import ConfigError

    env = {"group_map": "by_type", "backend": "vmas", "id": "navigation"}
    cfg = OmegaConf.create({"env": env, "algo": {"name": "my_qmix"}})
    fits = "iddpg, ippo, isac, maddpg, mappo, masac, qmix, vdn"
    message = rf"^algo=my_qmix trains one group .* use algo=<one of: {fits}>\.$"
    with pytest.raises(ConfigError, match=message):
        check_groups(cfg, replace(shipped()["qmix"], groups=False))


def test_a_turn_based_game_is_its_learners_turns_against_a_random_opponent() -> None:
    """``rlrun/builders/turns.py``: the learner sees its own turns only, the opponent's moves
    made in between (before its first turn too, when the opponent starts), and is paid at the
    end whoever made the last move. A uniformly random legal player_1 of tic-tac-toe against
    a random player_2 wins about 58% of games and loses 29% (mean return about 0.29)."""
    from pettingzoo.classic import tictactoe_v3

    from rlrun.builders.turns import AgainstOpponents

    rng = np.random.default_rng(0)
    for learner, opponent, first_moves, most in (
        ("player_1", "player_2", 9, 5),  # moves first: 3 to 5 moves a game
        ("player_2", "player_1", 8, 4),  # after player_1's first move: 2 to 4
    ):
        env = AgainstOpponents(tictactoe_v3.env(), {opponent: "random"}, "tictactoe_v3")
        returns = []
        for game in range(1000):
            _, infos = env.reset(seed=game)
            assert infos[learner]["action_mask"].sum() == first_moves
            total, turns, over = 0.0, 0, False
            while not over:
                move = rng.choice(np.flatnonzero(infos[learner]["action_mask"]))
                _, rewards, terminated, truncated, infos = env.step({learner: move})
                total, turns = total + rewards[learner], turns + 1
                over = terminated[learner] or truncated[learner]
            assert most - 2 <= turns <= most and total in (-1.0, 0.0, 1.0)
            returns.append(total)
        if learner == "player_1":
            assert 0.22 < np.mean(returns) < 0.37, np.mean(returns)
            assert 0.52 < np.mean(np.array(returns) == 1) < 0.64


def test_a_turn_based_game_trains_within_its_masks_exports_and_plays_the_file(
    workdir: Path,
) -> None:
    """Tic-tac-toe against a random player (``env=tictactoe``) with QMIX: random first frames,
    epsilon-greedy and greedy moves all within the game's action mask (the env stops the run at
    the first illegal move), then evaluated and exported, the file taking the mask beside the
    observation. Then that file as player_2's opponent (``env.opponents.player_1=<policy.pt>``):
    it plays player_1's moves (the file's deterministic move on player_1's view), player_2
    trains against it, and a file of another game is refused in one line."""
    pytest.importorskip("pettingzoo")
    from pettingzoo.classic import tictactoe_v3

    from rlrun.builders.turns import AgainstOpponents

    run_rlrun("env=tictactoe", "algo=qmix", "trainer.total_frames=1024",
              "collector.frames_per_batch=256", "collector.init_random_frames=256",
              "algo.eps_anneal_frames=512", "trainer.progress_bar=false",
              "checkpoint.every_frames=0", cwd=workdir)  # fmt: skip
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 1024
    run_rlrun("eval", str(run), "episodes=10", cwd=workdir)
    (played,) = (run / "eval").glob("*/eval.json")
    assert json.loads(played.read_text())["episodes"] == 10
    proc = run_rlrun("export", str(run), "format=torchscript", cwd=workdir)
    assert "verified on 128 real observations" in proc.stdout
    sidecar = json.loads((run / "export" / "policy.pt.json").read_text())
    assert [i["name"] for i in sidecar["inputs"]] == ["agents_observation", "agents_action_mask"]
    file = run / "export" / "policy.pt"
    policy = torch.jit.load(str(file))
    legal = torch.randint(9, (16,))
    mask = torch.nn.functional.one_hot(legal, 9).bool().unsqueeze(1)  # one legal move each
    assert torch.equal(policy(torch.randn(16, 1, 18), mask).reshape(-1), legal)
    env = AgainstOpponents(tictactoe_v3.env(), {"player_1": str(file)}, "tictactoe_v3")
    for seed in range(3):  # player_1's first two moves, replayed on a game of one's own
        env.reset(seed=seed)
        same = tictactoe_v3.env()
        same.reset(seed=seed)
        for turn in range(2):
            view = same.observe("player_1")
            move = policy(
                torch.as_tensor(view["observation"], dtype=torch.float32).reshape(1, 1, -1),
                torch.as_tensor(view["action_mask"]).bool().reshape(1, 1, -1),
            )
            same.step(int(move.reshape(-1)[0]))
            theirs, ours = same.observe("player_2"), env.game.observe("player_2")
            assert np.array_equal(theirs["observation"], ours["observation"]), (seed, turn)
            if turn == 0:  # player_2's first legal move, in both games
                mine = int(np.flatnonzero(theirs["action_mask"])[0])
                same.step(mine)
                env.step({"player_2": mine})
    against = ["env=tictactoe", "algo=ippo", "~env.opponents.player_2",
               f"+env.opponents.player_1={file}", "trainer.progress_bar=false"]  # fmt: skip
    run_rlrun(*against, "trainer.total_frames=512", cwd=workdir)
    trained = [r for r in run_dirs(workdir) if r != run]
    assert [summary(r)["status"] for r in trained] == ["completed"]
    other = workdir / "other.pt"
    other.write_bytes(file.read_bytes())
    described = json.loads((run / "export" / "policy.pt.json").read_text())
    described["action"]["n"] = 7  # connect four's moves
    (workdir / "other.pt.json").write_text(json.dumps(described))
    against[3] = f"+env.opponents.player_1={other}"
    proc = run_rlrun(*against, cwd=workdir, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        f"rlrun: error: env.opponents.player_1={other} is not a policy of one "
        "pettingzoo.classic.tictactoe_v3 agent: it takes ['batch', 1, 18] and plays among 7 "
        "moves, where player_1 sees ['batch', 1, 18] and plays among 9 (export a run of "
        "env.id=pettingzoo.classic.tictactoe_v3 with format=torchscript)."
    )
