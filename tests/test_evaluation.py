"""Evaluation from the ``eval`` group: episodes run side by side, each counted to its own end."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY, csv_series, run_dirs, run_rlrun, summary


@pytest.mark.parametrize("max_steps", [1000, 5])
def test_each_episode_counts_up_to_its_own_end(workdir: Path, max_steps: int) -> None:
    run_rlrun(
        "+experiment=ppo",
        *TINY,
        "eval.every_frames=512",
        "eval.episodes=4",
        f"eval.max_steps={max_steps}",
        "logger=csv",
        cwd=workdir,
    )
    run = run_dirs(workdir)[0]
    returns = csv_series(run, "eval/episode_return")
    lengths = csv_series(run, "eval/episode_length")
    assert [frames for frames, _ in returns] == [512, 1024]
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
