"""``env.backend=envpool`` (rlrun/builders/envpool_env.py) on real envpool pools: Atari observations
as the gymnasium backend makes them, lives, episode statistics through TorchRL's transforms and
collector, seeding, MuJoCo specs and the config errors."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("envpool")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import Bounded, Categorical  # noqa: E402
from torchrl.envs import Compose, RewardSum, StepCounter, TransformedEnv  # noqa: E402

from rlrun.builders.envpool_env import make_envpool_env  # noqa: E402
from rlrun.errors import ConfigError  # noqa: E402

ATARI = {
    "noop_max": 30,
    "frame_skip": 4,
    "screen_size": 84,
    "frame_stack": 4,
    "repeat_action_probability": 0.25,
    "episodic_life": True,  # ignored by the backend (a transform's job)
    "clip_rewards": True,  # likewise
}


def env_cfg(env_id: str = "ALE/Pong-v5", max_episode_steps: int | None = None, **over):
    atari = ATARI if env_id.startswith("ALE/") else None
    node = {"id": env_id, "num_threads": 2, "max_episode_steps": max_episode_steps}
    return OmegaConf.create({**node, "atari": atari, **over})


def with_stats(env):
    return TransformedEnv(env, Compose(StepCounter(), RewardSum()))


def one_batch(env, steps: int, seed: int):
    """``steps`` steps of every env of ``env`` (seeded), collected by TorchRL's Collector."""
    env.set_seed(seed)
    frames = env.batch_size.numel() * steps
    collector = Collector(env, None, frames_per_batch=frames, total_frames=frames)
    try:
        (batch,) = list(collector)
    finally:
        collector.shutdown()
    return batch


def check_episodes(data) -> int:
    """Per env row: at each done step, episode_reward is the sum of that episode's raw rewards
    and step_count its length (both restart after it). Returns the number of episodes."""
    episodes = 0
    for row in data.unbind(0):
        total, length = 0.0, 0
        for step in row.unbind(0):
            total += step["next", "reward"].item()
            length += 1
            assert step["next", "step_count"].item() == length
            if step["next", "done"].item():
                assert step["next", "episode_reward"].item() == pytest.approx(total)
                total, length, episodes = 0.0, 0, episodes + 1
    return episodes


def test_pong_observation_stack_and_lives() -> None:
    env = make_envpool_env(env_cfg(max_episode_steps=15), 2)
    assert env.batch_size == torch.Size([2])
    assert isinstance(env.action_spec, Categorical) and env.action_spec.space.n == 6
    reset = env.reset()
    assert reset["observation"].shape == (2, 4, 84, 84)
    assert reset["observation"].dtype == torch.uint8
    assert reset["lives"].shape == (2, 1) and reset["lives"].dtype == torch.int64
    data = env.rollout(40, break_when_any_done=False)
    obs, nxt = data["observation"], data["next", "observation"]
    assert nxt.shape == (2, 40, 4, 84, 84) and nxt.dtype == torch.uint8
    # one new frame per step: frame k of step t+1 is frame k+1 of step t, also on the first
    # step of an episode (a finished env is reset at once, not on envpool's next step)
    done = data["next", "done"].squeeze(-1)
    assert done[:, 14].all() and done[:, 29].all() and done.sum() == 4
    assert torch.equal(nxt[:, :, :3], obs[:, :, 1:])
    assert torch.equal(obs[:, 1:][~done[:, :-1]], nxt[:, :-1][~done[:, :-1]])
    assert (nxt[:, :, 3] != nxt[:, :, 2]).any()  # the frames do change (not a trivial pass)
    assert data["next", "lives"].shape == (2, 40, 1)


def test_breakout_lives_from_envpool() -> None:
    env = make_envpool_env(
        env_cfg("ALE/Breakout-v5", atari={**ATARI, "repeat_action_probability": 0.0}), 2
    )
    assert env.reset()["lives"].flatten().tolist() == [5, 5]
    data = env.rollout(30, break_when_any_done=False)
    lives = data["next", "lives"]
    assert lives.shape == (2, 30, 1) and ((lives >= 0) & (lives <= 5)).all()


def test_rollout_episode_statistics_with_truncation() -> None:
    env = with_stats(make_envpool_env(env_cfg(max_episode_steps=100), 2))
    env.set_seed(0)
    data = env.rollout(250, break_when_any_done=False)
    done, truncated = data["next", "done"], data["next", "truncated"]
    # time limit: truncated (not terminated) at each env's 100th step, and again at 200
    assert done[:, 99].all() and done[:, 199].all() and torch.equal(done, truncated)
    assert not data["next", "terminated"].any()
    assert data["next", "reward"].ne(0).any()  # Pong scores within 100 steps
    assert check_episodes(data) == 4


def test_collector_episode_statistics() -> None:
    batch = one_batch(with_stats(make_envpool_env(env_cfg(max_episode_steps=50), 2)), 120, 1)
    assert batch.batch_size == (2, 120)
    obs, nxt = batch["observation"], batch["next", "observation"]
    # no bogus transition from one episode's last observation to the next one's first
    assert torch.equal(nxt[:, :, :3], obs[:, :, 1:])
    assert check_episodes(batch) == 4


def test_hopper_falls_at_different_steps() -> None:
    """Episodes ending at different steps in different envs (partial resets): the done step
    keeps the true last observation, the next step starts from the reset one."""
    batch = one_batch(with_stats(make_envpool_env(env_cfg("Hopper-v5"), 4)), 100, 0)
    terminated = batch["next", "terminated"].squeeze(-1)
    assert not torch.equal(terminated[0], terminated[1]) and terminated.sum() >= 4
    assert torch.equal(terminated, batch["next", "done"].squeeze(-1))  # no time limit here
    final = batch["next", "observation"][terminated]  # Hopper-v5 ends when unhealthy:
    assert ((final[:, 0] < 0.7) | (final[:, 1].abs() > 0.2)).all()  # height, angle
    first = batch["observation"][:, 1:][terminated[:, :-1]]  # each next episode's start
    assert ((first[:, 0] > 1.2) & (first[:, 1].abs() < 0.01)).all()
    assert check_episodes(batch) == terminated.sum()


def test_set_seed_reproducible() -> None:
    def observations(seed: int) -> torch.Tensor:
        env = make_envpool_env(env_cfg(max_episode_steps=15), 2)
        env.set_seed(seed)
        actions = iter(torch.randint(6, (30,), generator=torch.Generator().manual_seed(0)))

        def policy(td):  # the same random actions in every run and every env
            return td.set("action", next(actions).expand(2).clone())

        return env.rollout(30, policy, break_when_any_done=False)["next", "observation"]

    first, again, other = observations(3), observations(3), observations(4)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    # independent per-env streams: seed 4's env 0 is not seed 3's env 1 (envpool's seed + i)
    assert not torch.equal(first[1], other[0])


def test_halfcheetah_specs() -> None:
    env = make_envpool_env(env_cfg("HalfCheetah-v5", max_episode_steps=10), 3)
    spec = env.observation_spec["observation"]
    assert spec.shape == (3, 17) and spec.dtype.is_floating_point
    assert "lives" not in env.observation_spec.keys()
    assert isinstance(env.action_spec, Bounded) and env.action_spec.shape == (3, 6)
    assert env.action_spec.dtype == torch.float32  # as gymnasium's (envpool says float64)
    assert (env.action_spec.space.low == -1).all() and (env.action_spec.space.high == 1).all()
    data = with_stats(env).rollout(12, break_when_any_done=False)
    assert data["next", "observation"].shape == (3, 12, 17)
    assert data["next", "truncated"][:, 9].all() and check_episodes(data) == 3


def test_bad_ids_and_atari_mismatch() -> None:
    with pytest.raises(ConfigError, match="Pong-v5"):
        make_envpool_env(env_cfg("ALE/Pongg-v5"), 1)
    with pytest.raises(ConfigError, match="needs env.atari"):
        make_envpool_env(env_cfg("ALE/Pong-v5", atari=None), 1)
    with pytest.raises(ConfigError, match="not an Atari game"):
        make_envpool_env(env_cfg("Hopper-v5", atari=ATARI), 1)


def test_missing_envpool_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "envpool", None)  # `import envpool` raises ImportError
    with pytest.raises(ConfigError, match=r"pip install 'rlrun\[envpool\]'"):
        make_envpool_env(env_cfg(), 1)


def test_mujoco_presets_run_on_envpool_through_the_console_script(tmp_path) -> None:
    from conftest import run_dirs, run_rlrun, summary

    run_rlrun(
        "+experiment=sac_mujoco", "env.backend=envpool", "trainer.progress_bar=false",
        "checkpoint.every_frames=0", "trainer.total_frames=200", "collector.frames_per_batch=100",
        "collector.init_random_frames=100", "algo.utd_ratio=0.1", "replay_buffer.batch_size=64",
        cwd=tmp_path,
    )  # fmt: skip
    (run_dir,) = run_dirs(tmp_path)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 200
