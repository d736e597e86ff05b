"""Sweep launchers: wall time of a 4-job seed sweep of a short PPO run, basic vs joblib.

Each sweep is the real ``rlrun -m`` console script, run in a temp folder. The basic launcher runs
the jobs one after another in one process; joblib runs them in one worker process per core
(each job with one torch thread). Target: joblib at most 0.6x the sequential time on 2 cores.
Writes bench/results/sweeps.json.

    python bench/bench_sweeps.py [--frames 32768]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RLRUN = str(Path(sys.executable).with_name("rlrun"))
RESULTS = Path(__file__).parent / "results" / "sweeps.json"


def timed_sweep(frames: int, launcher: list[str]) -> float:
    """Seconds for the whole ``rlrun -m`` command; every job must complete."""
    args = ["-m", "+experiment=ppo", "seed=0,1,2,3", f"trainer.total_frames={frames}"]
    args += ["trainer.progress_bar=false", "logger=none", "checkpoint.backend=none", *launcher]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run([RLRUN, *args], cwd=tmp, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if proc.returncode != 0:
            raise SystemExit(f"rlrun {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
        statuses = [json.loads(p.read_text())["status"] for p in Path(tmp).rglob("summary.json")]
        assert statuses == ["completed"] * 4, statuses
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32768, help="frames per job")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    basic = timed_sweep(args.frames, [])
    joblib = timed_sweep(args.frames, ["hydra/launcher=joblib"])
    result = {
        "benchmark": "4-job seed sweep of PPO on CartPole-v1: basic vs joblib launcher",
        "jobs": 4,
        "frames_per_job": args.frames,
        "cpu_count": os.cpu_count(),
        "basic_wall_s": round(basic, 2),
        "joblib_wall_s": round(joblib, 2),
        "joblib_over_basic": round(joblib / basic, 3),
        "target_max_ratio": 0.6,
        "meets_target": joblib / basic <= 0.6,
        "load_avg_1min_before": round(load_before, 2),
        "load_avg_1min_after": round(os.getloadavg()[0], 2),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
