"""Atari as published recipes run it: the standard preprocessing (uint8 stacks of 84x84 frames),
clipped rewards and episodic life for the loss only while logged returns stay game scores, the
Nature CNN scaling frames on the learner's device, and both presets through the console script."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from conftest import built, compose, cpu_placement, run_dirs, run_rlrun, run_without, summary
from torchrl.collectors import Collector
from torchrl.envs.utils import RandomPolicy

from rlrun.algorithms import declared
from rlrun.builders.atari import END_OF_LIFE
from rlrun.builders.buffers import make_replay_buffer
from rlrun.builders.cnn import make_cnn_actor_critic
from rlrun.builders.envs import make_env
from rlrun.builders.training import Context

pytest.importorskip("ale_py")

QUIET = ["trainer.progress_bar=false", "checkpoint.every_frames=0"]
TINY_PPO = [
    *QUIET,
    "env.num_envs=2",
    "trainer.total_frames=256",
    "collector.frames_per_batch=128",
    "algo.minibatch_size=64",
    "algo.epochs=1",
]
TINY_DQN = [
    *QUIET,
    "trainer.total_frames=192",
    "collector.frames_per_batch=64",
    "collector.init_random_frames=64",
    "replay_buffer.size=1000",
    "algo.utd_ratio=0.05",
]


def env_cfg(*overrides: str):
    return compose("+experiment=ppo_atari", *overrides).env


def test_observations_are_uint8_stacks_that_shift_one_frame_per_step_and_restart_on_reset():
    env = make_env(env_cfg("env.num_envs=2"), seed=0)
    assert env.observation_spec["observation"].shape == (2, 4, 84, 84)
    td = env.reset()
    obs = td["observation"]
    assert obs.dtype == torch.uint8 and obs.shape == (2, 4, 84, 84)
    assert all(torch.equal(obs[:, k], obs[:, 3]) for k in range(3))  # padded with the reset frame
    for _ in range(5):
        td = env.rand_step(td)
        new = td["next", "observation"]
        assert torch.equal(new[:, :3], obs[:, 1:])  # the oldest frame dropped, one new at the end
        td = td["next"]
        obs = new
    assert not torch.equal(obs[:, 3], obs[:, 0])  # Pong's ball and paddles moved
    td = env.reset()
    assert all(torch.equal(td["observation"][:, k], td["observation"][:, 3]) for k in range(3))
    env.close()


def test_training_rewards_are_clipped_while_the_logged_return_is_the_game_score():
    """Space Invaders pays 5 to 30 points per alien: the same actions on a training env and on an
    evaluation env, truncated at 150 steps, show clipped rewards and identical game scores."""
    overrides = ("env=atari", "env.id=ALE/SpaceInvaders-v5", "env.num_envs=1")
    cfg = env_cfg(*overrides, "env.max_episode_steps=150")
    train, raw = make_env(cfg, seed=3), make_env(cfg, seed=3, training=False)
    torch.manual_seed(0)
    actions = RandomPolicy(train.action_spec)
    a = train.rollout(150, actions, break_when_any_done=False)[0]  # the one env
    torch.manual_seed(0)
    b = raw.rollout(150, actions, break_when_any_done=False)[0]
    assert torch.equal(a["observation"], b["observation"])  # same game
    assert b["next", "reward"].max() >= 5  # points were scored
    assert set(a["next", "reward"].unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert a["next", "done"][-1].all()  # truncated by the time limit, in agent steps
    game_score = b["next", "reward"].sum()
    assert a["next", "episode_reward"][-1].item() == game_score.item()
    assert b["next", "episode_reward"][-1].item() == game_score.item()


def test_a_lost_life_ends_the_losss_episode_not_the_game():
    env = make_env(env_cfg("env=breakout", "env.num_envs=1"), seed=0)
    td = env.rollout(400, break_when_any_done=True)[0]  # the one env
    lives, next_lives = td["lives"], td["next", "lives"]
    lost = (lives > next_lives).reshape(-1)
    assert td["lives"][0].item() == 5 and lost.any()  # random play loses lives
    end_of_life = td["next", END_OF_LIFE].reshape(-1)
    done = td["next", "done"].reshape(-1)
    assert torch.equal(end_of_life, lost | done)
    assert not done[lost.nonzero()[0]].any()  # the game went on after the first lost life
    env.close()


def test_the_losses_end_episodes_at_a_lost_life(tmp_path: Path) -> None:
    cfg = compose("+experiment=ppo_atari", *TINY_PPO)
    env = make_env(cfg.env)
    ac = make_cnn_actor_critic(
        observation_spec=env.observation_spec, action_spec=env.full_action_spec["action"]
    )
    ppo = declared(cfg.algo)(cfg.algo, Context(ac, 128, torch.device("cpu")))
    ppo.episodes_end_at(END_OF_LIFE)
    (gae,) = ppo.advantages
    for keys in (ppo.loss.tensor_keys, gae.tensor_keys):  # loss and GAE
        assert keys.done == END_OF_LIFE and keys.terminated == END_OF_LIFE
    with built(tmp_path, "+experiment=dqn_atari", *TINY_DQN) as (_, trainer):  # run.py's wiring
        keys = trainer.loss_module.value_estimator.tensor_keys
        assert keys.done == END_OF_LIFE and keys.terminated == END_OF_LIFE


def test_the_cnn_reads_floats_in_0_1_on_the_learner_while_buffers_keep_uint8(tmp_path: Path):
    seen: list[torch.Tensor] = []
    with built(tmp_path, "+experiment=dqn_atari", *TINY_DQN) as (_, trainer):
        conv = next(m for m in trainer.collector.policy.modules() if isinstance(m, torch.nn.Conv2d))
        conv.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
        trainer.train()
        stored = trainer.replay_buffer.storage[:8]
    assert stored["frame"].dtype == torch.uint8 and stored["frame"].shape == (8, 1, 84, 84)
    assert stored["next", "frame"].dtype == torch.uint8
    assert seen and all(x.dtype == torch.float32 and x.device.type == "cpu" for x in seen)
    assert all(0.0 <= x.min() and x.max() <= 1.0 for x in seen)
    assert any(x.max() > 0.1 for x in seen)  # real frames, not zeros


def test_the_replay_buffer_stores_single_frames_and_samples_the_collected_stacks(tmp_path: Path):
    """dqn_atari's buffer keeps each frame once; every sampled observation and next observation
    is the stack the agent saw, across episode starts (short episodes) and several envs."""
    cfg = compose(
        "+experiment=dqn_atari", "env.num_envs=2", "env.max_episode_steps=12",
        "replay_buffer.size=1000",
    )  # fmt: skip
    env = make_env(cfg.env, seed=0)
    collector = Collector(
        env, RandomPolicy(env.full_action_spec["action"]), frames_per_batch=96, total_frames=192,
        track_traj_ids=True,
    )  # fmt: skip
    rb = make_replay_buffer(cfg.replay_buffer, tmp_path, cpu_placement(), cfg.env.atari)
    collected = []
    for batch in collector:
        collected.append(batch.reshape(-1))
        rb.extend(batch.reshape(-1))
    collector.shutdown()
    collected = torch.cat(collected)
    stored = rb.storage[: len(rb)]
    assert "observation" not in stored.keys() and stored["frame"].shape == (192, 1, 84, 84)
    for _ in range(10):
        sample = rb.sample()
        index = sample["index"]
        assert sample["observation"].shape == (32, 4, 84, 84)
        assert torch.equal(sample["observation"], collected["observation"][index])
        assert torch.equal(sample["next", "observation"], collected["next", "observation"][index])


@pytest.mark.parametrize("preset", ["ppo_atari", "dqn_atari"])
def test_preset_tiny_run_on_envpool(preset: str, workdir: Path):
    """Each preset on envpool's Atari; on the default backend (gym_vector), the runs of the
    resume and playback tests below."""
    tiny = TINY_PPO if preset == "ppo_atari" else TINY_DQN
    run_rlrun(f"+experiment={preset}", "env.backend=envpool", *tiny, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    result = summary(run_dir)
    frames = next(int(o.split("=")[1]) for o in tiny if o.startswith("trainer.total_frames="))
    assert result["status"] == "completed" and result["frames"] == frames


def test_dqn_atari_resumes_from_its_memory_mapped_single_frame_buffer(workdir: Path) -> None:
    """The live memmap files of the first process are in the run folder when it resumes."""
    run_rlrun("+experiment=dqn_atari", *TINY_DQN, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    assert (run_dir / "replay_buffer" / "frame.memmap").exists()
    run_rlrun(f"resume={run_dir}", "trainer.total_frames=256", cwd=workdir)
    result = summary(run_dir)
    assert result["status"] == "completed" and result["frames"] == 256


def test_a_trained_atari_policy_records_a_video_plays_back_and_exports(workdir: Path) -> None:
    """An in-run evaluation video, then ``rlrun eval`` and ``rlrun export`` on the Atari run:
    game scores, and a TorchScript file that takes any batch of uint8 stacks (checked by the
    exporter against the live policy)."""
    run_rlrun(
        "+experiment=ppo_atari", *TINY_PPO, "eval=default", "eval.every_frames=256",
        "eval.episodes=1", "eval.max_steps=30", "eval.video=true", cwd=workdir,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 256
    videos = sorted((run_dir / "videos").glob("*.mp4"))
    assert videos and videos[0].stat().st_size > 1000
    run_rlrun("eval", str(run_dir), "episodes=2", "max_steps=100", cwd=workdir)
    (played,) = (run_dir / "eval").glob("*/eval.json")
    assert json.loads(played.read_text())["episodes"] == 2
    proc = run_rlrun("export", str(run_dir), "format=torchscript", cwd=workdir)
    assert "verified on 128 real observations of ALE/Pong-v5" in proc.stdout
    policy = torch.jit.load(str(run_dir / "export" / "policy.pt"))
    frames = torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8)
    assert policy(frames).shape == (5, 6)  # one-hot over Pong's 6 actions, for 5 stacks


@pytest.mark.parametrize(
    ("module", "args", "expected"),
    [
        ("ale_py", [], "env.id=ALE/Pong-v5 needs the ale_py package: pip install 'rlrun[atari]'."),
        (
            "envpool",
            ["env.backend=envpool"],
            "env.backend=envpool needs the envpool package: pip install 'rlrun[envpool]'.",
        ),
    ],
)
def test_without_an_extra_one_line_names_it(module, args, expected, workdir: Path) -> None:
    proc = run_without(module, "+experiment=ppo_atari", *args, cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == f"rlrun: error: {expected}"
    assert not (workdir / "outputs").exists()
