"""Recurrent benchmark: memory on masked CartPole (velocities hidden), through the real ``rlrun``.

- ``rlrun +experiment=ppo_lstm``: frames and seconds until the mean training return of a batch's
  finished episodes first reaches 450, per seed (target: median of 3 seeds within 100k frames,
  the preset's budget).
- ``rlrun +experiment=ppo env=cartpole_masked`` (the MLP preset) with the same frame budget: the
  best batch return it reaches (expected: far below, it plateaus near 50-150).

Seconds are training wall time up to that frame (the sum of each batch's frames / fps), without
process start-up. Writes ``bench/results/recurrent.json``. Usage:
    python bench/bench_recurrent.py [--seeds 0 1 2] [--frames 100000] [--jobs 3]
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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

RLRUN = str(Path(sys.executable).with_name("rlrun"))
RESULTS = Path(__file__).parent / "results" / "recurrent.json"
PRESETS = {
    "ppo_lstm": ["+experiment=ppo_lstm"],
    "ppo_mlp": ["+experiment=ppo", "env=cartpole_masked"],
}


def _scalar(run_dir: Path, name: str) -> list[tuple[int, float]]:
    path = run_dir / "csv" / "scalars" / "train" / f"{name}.csv"
    with path.open() as f:
        return [(int(float(frames)), float(value)) for frames, value in csv.reader(f)]


def run_one(preset: str, seed: int, frames: int, threshold: float, root: Path) -> dict:
    """Train one seed of ``preset`` for ``frames``; read its curve back from the CSV logger."""
    run_dir = root / f"{preset}_{seed}"
    subprocess.run(
        [
            RLRUN,
            *PRESETS[preset],
            f"seed={seed}",
            f"trainer.total_frames={frames}",
            "trainer.progress_bar=false",
            "trainer.num_threads=1",
            "logger=csv",
            "checkpoint.backend=none",
            f"hydra.run.dir={run_dir}",
        ],
        check=True,
        capture_output=True,
        env={**os.environ, "RL_WARNINGS": "0"},
    )
    returns = _scalar(run_dir, "episode_return")
    seconds, last, elapsed = {}, 0, 0.0
    for step, fps in _scalar(run_dir, "fps"):
        elapsed += (step - last) / fps
        seconds[step], last = elapsed, step
    hit = next(((f, r) for f, r in returns if r >= threshold), None)
    summary = json.loads((run_dir / "summary.json").read_text())
    return {
        "seed": seed,
        f"frames_to_{threshold:g}": hit[0] if hit else None,
        f"seconds_to_{threshold:g}": round(seconds[hit[0]], 1) if hit else None,
        "best_return": max((r for _, r in returns), default=None),
        "final_return": returns[-1][1] if returns else None,
        "frames": summary["frames"],
        "wall_s": summary["wall_time_s"],
    }


def median_or_none(values: list[float | None]) -> float | None:
    """Median where a missing value (never reached) counts as infinitely late."""
    median = statistics.median(v if v is not None else float("inf") for v in values)
    return None if median == float("inf") else median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--threshold", type=float, default=450.0)
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one core each)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    key = f"frames_to_{args.threshold:g}"
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(args.jobs) as pool:
        runs = {
            (preset, seed): pool.submit(
                run_one, preset, seed, args.frames, args.threshold, Path(tmp)
            )
            for preset in PRESETS
            for seed in args.seeds
        }
        seeds = {p: [runs[p, s].result() for s in args.seeds] for p in PRESETS}
    lstm, mlp = seeds["ppo_lstm"], seeds["ppo_mlp"]
    results = {
        "task": "CartPole-v1, velocities hidden (env=cartpole_masked)",
        "budget_frames": args.frames,
        "ppo_lstm": {
            f"median_{key}": median_or_none([s[key] for s in lstm]),
            f"median_seconds_to_{args.threshold:g}": median_or_none(
                [s[f"seconds_to_{args.threshold:g}"] for s in lstm]
            ),
            "target": f"median {key} <= {args.frames}",
            "seeds": lstm,
        },
        "ppo_mlp": {
            "median_best_return": statistics.median(s["best_return"] or 0.0 for s in mlp),
            "target": "far below 450 (plateau near 50-150)",
            "seeds": mlp,
        },
        "machine": f"{os.cpu_count()} CPU cores, {args.jobs} run(s) at once, 1 torch thread each",
        "load_average_1m_at_end": round(os.getloadavg()[0], 1),  # a shared machine is slower
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
