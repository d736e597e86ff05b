"""Evaluation from the ``eval`` group: episodes run side by side, each counted to its own end."""

from __future__ import annotations

from pathlib import Path

from conftest import TINY, csv_series, run_dirs, run_rlrun, summary
from omegaconf import OmegaConf


def test_each_episode_counts_up_to_its_own_end(workdir: Path) -> None:
    """Episodes cut at eval.max_steps=5 and run to their end (1000): one sweep. Evaluations
    come after the first batch past each multiple of eval.every_frames (384: batches of 256
    end at 512 and 768), not every_frames after the last one (512, then 1024)."""
    run_rlrun("-m", "+experiment=ppo", *TINY, "collector.frames_per_batch=256",
              "eval.every_frames=384", "eval.episodes=4", "eval.max_steps=1000,5",
              "logger=csv", cwd=workdir)  # fmt: skip
    runs = {int(OmegaConf.load(r / ".hydra" / "config.yaml").eval.max_steps): r
            for r in run_dirs(workdir)}  # fmt: skip
    assert sorted(runs) == [5, 1000]
    for max_steps, run in runs.items():
        check_episode_ends(run, max_steps)


def check_episode_ends(run: Path, max_steps: int) -> None:
    returns = csv_series(run, "eval/episode_return")
    lengths = csv_series(run, "eval/episode_length")
    assert [frames for frames, _ in returns] == [512, 768]
    for (_, ret), (_, length) in zip(returns, lengths, strict=True):
        # CartPole pays 1 per step: return == length means no step after an episode's end
        # was counted and none before it was lost, although the 4 episodes end apart.
        assert ret == length
        if max_steps == 5:  # every episode is cut at max_steps (CartPole lasts 8+ steps)
            assert length == 5
        else:
            assert 8 <= length <= 500
    assert summary(run)["eval_return_last"] == returns[-1][1]
    assert (run / "checkpoints" / "best").is_dir()
