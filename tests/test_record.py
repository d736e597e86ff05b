"""``rlrun record``: a trained policy's episodes as a Minari dataset, read back with Minari itself
(issue #32, item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import TINY, run_dirs, run_rlrun

minari = pytest.importorskip("minari")


def datasets_env(root: Path) -> dict:
    return {"MINARI_DATASETS_PATH": str(root / "datasets")}


def load(root: Path, dataset_id: str):
    """The dataset as any Minari user loads it (Minari reads its root when called)."""
    import os

    os.environ["MINARI_DATASETS_PATH"] = str(root / "datasets")
    try:
        return minari.load_dataset(dataset_id)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def test_record_a_continuous_policy_with_noise_then_a_discrete_one(workdir: Path) -> None:
    env = datasets_env(workdir)
    sac = ["+experiment=sac", "trainer.total_frames=400", "collector.init_random_frames=200",
           "trainer.progress_bar=false", "replay_buffer.batch_size=32"]  # fmt: skip
    run_rlrun(*sac, cwd=workdir)
    (run,) = run_dirs(workdir)
    proc = run_rlrun("record", str(run), "episodes=3", "noise=0.3", "ref_episodes=2",
                     "id=rlrun/pendulum/medium-v0", cwd=workdir, env=env)  # fmt: skip
    assert "Minari dataset rlrun/pendulum/medium-v0" in proc.stdout
    dataset = load(workdir, "rlrun/pendulum/medium-v0")
    assert dataset.total_episodes == 3 and dataset.total_steps == 600
    episode = next(dataset.iterate_episodes())
    assert episode.observations.shape == (201, 3) and episode.actions.shape == (200, 1)
    assert np.all(np.abs(episode.actions) <= 2.0)  # noise clipped to Pendulum's bounds
    assert episode.truncations[-1] and not episode.terminations.any()
    assert dataset.spec.env_spec.id == "Pendulum-v1"
    record = json.loads((run / "datasets" / "rlrun_pendulum_medium-v0.json").read_text())
    assert record["noise"] == 0.3 and record["episodes"] == 3
    returns = [float(e.rewards.sum()) for e in dataset.iterate_episodes()]
    assert record["return_mean"] == pytest.approx(np.mean(returns))
    score = minari.get_normalized_score(dataset, np.array([record["ref_max_score"]]))
    assert score == pytest.approx(1.0)  # ref scores stored: the policy without noise is 1

    # the same id again: refused, the dataset kept
    proc = run_rlrun("record", str(run), "episodes=1", "id=rlrun/pendulum/medium-v0",
                     cwd=workdir, env=env, check=False)  # fmt: skip
    assert proc.returncode == 2 and "exists already" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert load(workdir, "rlrun/pendulum/medium-v0").total_episodes == 3

    # a discrete policy, default id
    ppo = workdir / "ppo"
    ppo.mkdir()
    run_rlrun("+experiment=ppo", *TINY, cwd=ppo)
    (cartpole,) = run_dirs(ppo)
    run_rlrun("record", str(cartpole), "episodes=2", "ref_episodes=1", cwd=ppo, env=env)
    (written,) = (cartpole / "datasets").glob("*.json")
    name = json.loads(written.read_text())["id"]
    assert name == f"rlrun/cartpole/ppo-{cartpole.name}-v0"
    episode = next(load(workdir, name).iterate_episodes())
    assert set(np.unique(episode.actions)) <= {0, 1}


def test_record_wants_a_run_folder(workdir: Path) -> None:
    (workdir / "outputs").mkdir()
    proc = run_rlrun("record", str(workdir), "episodes=2", cwd=workdir, check=False)
    assert proc.returncode == 2 and "not a run folder" in proc.stderr
