"""``deterministic=true`` (issue #33): two runs with the same seed, in separate processes, write
the same metrics byte for byte (PPO, PPO-LSTM, DQN, SAC; the in-process collector on the CPU);
another seed does not. Timing-dependent parts are named at start."""

from __future__ import annotations

from pathlib import Path

from conftest import run_rlrun
from omegaconf import OmegaConf

from rlrun.builders.determinism import timing_dependent
from rlrun.commands.reproduce import metric_files as metrics

PRESETS = ["ppo", "ppo_lstm", "dqn", "sac"]
SMALL = ["deterministic=true", "trainer.total_frames=256", "collector.frames_per_batch=256",
         "collector.init_random_frames=0", "replay_buffer.batch_size=32",
         "policy.hidden_sizes=[32,32]", "checkpoint.backend=none",
         "trainer.progress_bar=false"]  # fmt: skip


def test_same_seed_same_metrics_other_seed_other_metrics(workdir: Path) -> None:
    sweep = f"+experiment={','.join(PRESETS)}"
    run_rlrun("-m", sweep, "seed=0,1", *SMALL, "hydra.sweep.dir=first", cwd=workdir)
    run_rlrun("-m", sweep, "seed=0", *SMALL, "hydra.sweep.dir=again", cwd=workdir)
    for n, preset in enumerate(PRESETS):  # jobs: (preset, seed) in order; again: seed 0 only
        seed0, seed1, again = (workdir / "first" / str(2 * n), workdir / "first" / str(2 * n + 1),
                               workdir / "again" / str(n))  # fmt: skip
        assert OmegaConf.load(again / ".hydra" / "config.yaml").algo.name in preset
        assert metrics(seed0) == metrics(again) and len(metrics(seed0)) > 5, preset
        assert metrics(seed0)["train/grad_norm.csv"] != metrics(seed1)["train/grad_norm.csv"], (
            preset
        )


def test_what_cannot_be_deterministic_is_named() -> None:
    cfg = OmegaConf.create({
        "collector": {"kind": "multi_sync"}, "replay_buffer": {"prefetch": 2},
        "trainer": {"learner_backend": "local"},
    })  # fmt: skip
    found = timing_dependent(cfg)
    assert len(found) == 2 and found[0].startswith("collector=multi_sync")
