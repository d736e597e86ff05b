"""Off-policy benchmark: DQN on CartPole-v1, SAC on Pendulum-v1, replay-buffer sampling speed.

- DQN: frames until the mean training return (last 5 logged batches) reaches 475, per seed,
  through the real ``rlrun +experiment=dqn`` (target: median of 3 seeds within 100k frames).
- SAC: after 20k frames, the deterministic policy's mean return over 20 evaluation episodes
  (target: -200 or better), beside the mean of the last 5 training episodes (noisy: a Pendulum
  episode's return depends on its random start).
- Sampling: samples/s of ``rlrun.builders.buffers.make_replay_buffer`` with and without a transform
  (one that returns ``device=None``) and prefetch.

Writes ``bench/results/offpolicy.json``. Usage:
    python bench/bench_offpolicy.py [--seeds 0 1 2] [--only dqn sac sampling]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLRUN = str(Path(sys.executable).with_name("rlrun"))
RESULTS = Path(__file__).parent / "results" / "offpolicy.json"


def _returns(run_dir: Path) -> list[tuple[int, float]]:
    path = run_dir / "csv" / "scalars" / "train" / "episode_return.csv"
    with path.open() as f:
        return [(int(float(frames)), float(ret)) for frames, ret in csv.reader(f)]


def _rlrun(run_dir: Path, *overrides: str) -> float:
    """Run rlrun into ``run_dir``; return its wall time."""
    t0 = time.perf_counter()
    subprocess.run(
        [
            RLRUN,
            *overrides,
            "trainer.progress_bar=false",
            "checkpoint.backend=none",
            f"hydra.run.dir={run_dir}",
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "RL_WARNINGS": "0"},
    )
    return time.perf_counter() - t0


def bench_dqn(seeds: list[int], frames: int, root: Path) -> dict:
    per_seed = []
    for seed in seeds:
        run_dir = root / f"dqn_{seed}"
        wall = _rlrun(run_dir, "+experiment=dqn", f"seed={seed}", f"trainer.total_frames={frames}")
        curve = _returns(run_dir)
        hit = None
        for i in range(len(curve)):
            window = [r for _, r in curve[max(0, i - 4) : i + 1]]
            if len(window) == 5 and statistics.mean(window) >= 475:
                hit = curve[i][0]
                break
        per_seed.append(
            {
                "seed": seed,
                "frames_to_475": hit,
                "wall_s": round(wall, 1),
                "final_return": curve[-1][1] if curve else None,
            }
        )
    reached = sorted(s["frames_to_475"] or float("inf") for s in per_seed)
    median = statistics.median(reached)
    return {
        "task": "CartPole-v1",
        "budget_frames": frames,
        "median_frames_to_475": None if median == float("inf") else median,
        "target": "median <= 100000",
        "seeds": per_seed,
    }


def bench_sac(seeds: list[int], frames: int, root: Path) -> dict:
    per_seed = []
    for seed in seeds:
        run_dir = root / f"sac_{seed}"
        wall = _rlrun(
            run_dir,
            "+experiment=sac",
            f"seed={seed}",
            f"trainer.total_frames={frames}",
            f"eval.every_frames={frames}",
            "eval.episodes=20",
        )
        last = [r for _, r in _returns(run_dir)[-5:]]
        summary = json.loads((run_dir / "summary.json").read_text())
        per_seed.append(
            {
                "seed": seed,
                "eval_return_20_episodes": summary["eval_return_last"],
                "train_return_last5": statistics.mean(last),
                "wall_s": round(wall, 1),
            }
        )
    return {
        "task": "Pendulum-v1",
        "frames": frames,
        "median_return": statistics.median(s["eval_return_20_episodes"] for s in per_seed),
        "target": ">= -200",
        "seeds": per_seed,
    }


def bench_sampling(root: Path, n: int = 100_000, batch: int = 256, draws: int = 300) -> dict:
    import torch
    from common import composed
    from omegaconf import OmegaConf
    from tensordict import TensorDict

    from rlrun.builders.buffers import make_replay_buffer
    from rlrun.builders.devices import Placement

    torch.set_num_threads(1)
    data = TensorDict(
        {
            "observation": torch.randn(n, 4),
            "action": torch.randint(2, (n,)),
            "next": {
                "observation": torch.randn(n, 4),
                "reward": torch.randn(n, 1),
                "done": torch.zeros(n, 1, dtype=torch.bool),
            },
        },
        batch_size=[n],
    )
    scale = {"_target_": "bench_offpolicy.ScaleObservation"}
    out = {}
    for name, transforms, prefetch in [
        ("plain", [], None),
        ("transform", [scale], None),
        ("prefetch4", [], 4),
        ("transform_prefetch4", [scale], 4),
    ]:
        cfg = OmegaConf.merge(
            composed().replay_buffer,
            {"size": n, "batch_size": batch, "transforms": transforms, "prefetch": prefetch},
        )
        rb = make_replay_buffer(cfg, root, Placement.on_cpu())
        rb.extend(data)
        for _ in range(20):
            rb.sample()
        t0 = time.perf_counter()
        for _ in range(draws):
            rb.sample()
        out[name] = round(draws * batch / (time.perf_counter() - t0))
    return {"batch_size": batch, "buffer_items": n, "samples_per_s": out}


class ScaleObservation:
    """A user-style transform: returns a new TensorDict with ``device=None``."""

    def __call__(self, td):
        from tensordict import TensorDict

        out = TensorDict(dict(td.items()), batch_size=td.batch_size, device=None)
        out["observation"] = td["observation"] * 0.5
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--dqn-frames", type=int, default=100_000)
    parser.add_argument("--sac-frames", type=int, default=20_000)
    parser.add_argument("--only", nargs="+", default=["sampling", "sac", "dqn"])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in args.only:
            if name == "sampling":
                results["sampling"] = bench_sampling(root)
            elif name == "sac":
                results["sac"] = bench_sac(args.seeds, args.sac_frames, root)
            elif name == "dqn":
                results["dqn"] = bench_dqn(args.seeds, args.dqn_frames, root)
            results["machine"] = f"{os.cpu_count()} CPU cores, torch threads 1 per run"
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(results, indent=2) + "\n")
            print(json.dumps({name: results[name]}, indent=2), flush=True)


if __name__ == "__main__":
    main()
