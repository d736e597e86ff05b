"""PPO end to end through the console script: files written, metrics read back (its learning
check: tests/test_learning.py)."""

from __future__ import annotations

from conftest import TINY, run_dirs, run_rlrun, series, summary


def test_tiny_ppo_run_writes_csv_and_summary(workdir):
    run_rlrun("+experiment=ppo", *TINY, cwd=workdir)
    (run_dir,) = run_dirs(workdir)
    s = summary(run_dir)
    assert s["status"] == "completed"
    assert s["frames"] == 1024
    assert s["fps"] > 0 and s["wall_time_s"] > 0
    assert (run_dir / ".hydra" / "config.yaml").exists()
    returns = series(run_dir, "episode_return")
    assert [step for step, _ in returns] == [512, 1024]
    # CartPole pays 1 a step: each batch's mean return is its mean episode length
    assert returns == series(run_dir, "episode_length")
    for metric in ("episode_length", "fps", "loss_objective", "loss_critic", "loss_entropy"):
        steps = [step for step, _ in series(run_dir, metric)]
        assert steps == sorted(steps) and steps[-1] == 1024, metric
