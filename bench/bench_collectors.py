"""Collection frames/s on CartPole: rlrun's sync, multi_sync and async collectors beside the raw
gymnasium step rate of the same env (8 CartPoles in a sync vector env), in one run.

    python bench/bench_collectors.py [--frames 32768] [--out bench/results/collectors.json]

Collectors run rlrun's default PPO actor (MLP 64x64) with no training in between; the timer
starts after a first batch, so worker start-up (spawned processes re-import torch and torchrl)
is reported apart as ``startup_s``. Every rate is frames (env steps) per second of wall time.
The raw gymnasium rate is taken right before each collector, so on a shared machine each
``fraction_of_raw`` compares two numbers measured under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import gymnasium
import numpy as np
import torch
from common import composed

from rlrun.algorithms import policy_config
from rlrun.builders.collectors import make_collector
from rlrun.builders.devices import Placement
from rlrun.builders.envs import make_env
from rlrun.builders.policies import build_policy

ENV = composed().env  # CartPole-v1, gym_vector backend, 8 envs: the env group's default


def raw_gymnasium(frames: int) -> float:
    """Steps/s of the bare gymnasium vector env with random actions (no torch at all)."""
    env = gymnasium.make_vec(
        ENV.id,
        num_envs=ENV.num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gymnasium.vector.AutoresetMode.SAME_STEP},
    )
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps = frames // ENV.num_envs
    actions = rng.integers(0, 2, size=(steps, ENV.num_envs))
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    elapsed = time.perf_counter() - start
    env.close()
    return steps * ENV.num_envs / elapsed


def collector_rate(kind: str, frames: int, frames_per_batch: int, num_workers: int) -> dict:
    """Frames/s of one rlrun collector kind, after its first batch."""
    run = composed(f"collector={kind}", f"collector.frames_per_batch={frames_per_batch}",
                   f"collector.num_workers={num_workers}")  # fmt: skip
    env_cfg, policy_cfg, cfg = run.env, policy_config(run), run.collector
    env = make_env(env_cfg, seed=0)
    where = Placement.on_cpu()
    ac = build_policy(
        policy_cfg, env.observation_spec, env.full_action_spec["action"], where.learner
    )
    total = frames + frames_per_batch
    t0 = time.perf_counter()
    collector = make_collector(
        cfg, env, ac.rollout_policy(), total, where, env_cfg=env_cfg, policy_cfg=policy_cfg
    )
    batches = iter(collector)
    next(batches)  # first batch: workers started and warm
    startup = time.perf_counter() - t0
    start, collected = time.perf_counter(), 0
    for batch in batches:
        collected += batch.numel()
    elapsed = time.perf_counter() - start
    collector.shutdown()
    return {"fps": collected / elapsed, "frames": collected, "startup_s": round(startup, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=32768)
    parser.add_argument("--frames-per-batch", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench/results/collectors.json"))
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = {}
    for kind in ("sync", "multi_sync", "async"):
        raw = raw_gymnasium(args.frames)  # right before: both see the same machine load
        rate = collector_rate(kind, args.frames, args.frames_per_batch, args.workers)
        results[kind] = {**rate, "gymnasium_raw_fps": raw, "fraction_of_raw": rate["fps"] / raw}
        print(f"{kind:10s} {rate['fps']:8.0f} frames/s   raw gymnasium just before {raw:8.0f}")
    report = {
        "env": f"{ENV.id} x{ENV.num_envs} (gymnasium sync vector env)",
        "policy": "rlrun default MLP actor 64x64, cpu, torch threads 1",
        "frames_per_batch": args.frames_per_batch,
        "num_workers": args.workers,
        "cpus": os.cpu_count(),
        "load_avg_1min_at_end": os.getloadavg()[0],
        "machine": platform.platform(),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
