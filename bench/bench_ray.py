"""collector=ray against the other collectors: PPO CartPole frames/s at 1, 2 and 4 workers,
Ray's start-up cost, the weight-sync time per batch, and what they predict for a cluster.

    python bench/bench_ray.py [--frames 49152] [--workers 1 2 4] [--repeats 3]

Every run is the real console script, ``rlrun +experiment=ppo`` (training included), with the
same batch layout whatever the worker count: 16 envs in all (``env.num_envs=16/workers`` per
worker) and 512 frames per batch. frames/s is ``summary.json``'s (from the first batch on);
start-up is its ``first_batch_s``. The same run's speed moved by up to a third from one run to
the next on a shared 2-core machine (2026-11-24: multi_sync at 2 workers 3295-4469 frames/s), so
the runs go in rounds, each round running every collector once: the table gives each collector's
median and range, and ray's ratio to multi_sync within each round. In one process, with
``collector=ray`` built as rlrun builds it, the script then times a worker's collection rate on
its own and the trained weights' sync (``update_policy_weights_`` until every worker applied
them) after a batch. The cluster table is arithmetic on those figures (the formula is printed
with it), not a measurement. Writes bench/results/ray.json and ray.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from common import RESULTS, machine, run_rlrun

ENVS, BATCH = 16, 512
CLUSTER = (8, 64, 512)


def training_run(kind: str, workers: int, frames: int) -> dict:
    args = ["+experiment=ppo", f"collector={kind}", f"trainer.total_frames={frames}"]
    args += ["logger=none", "checkpoint.backend=none", "ray.num_cpus=4"]
    if kind != "sync":
        args += [f"collector.num_workers={workers}", f"env.num_envs={ENVS // workers}"]
    with tempfile.TemporaryDirectory() as tmp:
        result = run_rlrun(args, Path(tmp))
    return {k: result[k] for k in ("fps", "first_batch_s", "process_s", "frames")}


def ray_start_s(repeats: int = 3) -> float:
    """Median seconds of ``ray.init()`` + ``ray.shutdown()`` of a local Ray (as rlrun starts it)."""
    import ray

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        ray.init(num_cpus=4, include_dashboard=False, logging_level="warning")
        ray.shutdown()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def worker_and_sync(workers: int, batches: int = 20) -> dict:
    """One ``collector=ray`` built as rlrun builds it: frames/s per worker collecting alone
    (no training), and seconds per weight sync to all workers."""
    import ray
    import torch
    from hydra import compose, initialize_config_module
    from tensordict import TensorDict

    from rlrun.builders.collectors import make_collector
    from rlrun.builders.devices import Placement
    from rlrun.builders.envs import make_env
    from rlrun.builders.policies import build_policy
    from rlrun.commandline import register_configs

    register_configs()
    overrides = ["+experiment=ppo", "collector=ray", f"collector.num_workers={workers}"]
    overrides += [f"env.num_envs={ENVS // workers}", f"collector.frames_per_batch={BATCH}"]
    with initialize_config_module("rlrun.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    env_cfg, policy_cfg = cfg.env, cfg.policy
    ray.init(num_cpus=4, include_dashboard=False, logging_level="warning")
    try:
        env = make_env(env_cfg, seed=0)
        where = Placement.on_cpu()
        ac = build_policy(
            policy_cfg, env.observation_spec, env.full_action_spec["action"], where.learner
        )
        policy = ac.rollout_policy("collect")
        collector = make_collector(
            cfg.collector, env, policy, BATCH * (batches + 1), where, env_cfg=env_cfg,
            policy_cfg=policy_cfg, ray_cfg=cfg.ray,
        )  # fmt: skip
        it = iter(collector)
        next(it)
        start = time.perf_counter()
        collected = sum(next(it).numel() for _ in range(batches))
        collect_s = time.perf_counter() - start
        syncs = []
        for _ in range(batches):
            with torch.no_grad():
                for p in policy.parameters():
                    p.add_(1e-3)
            t = time.perf_counter()
            collector.update_policy_weights_(TensorDict.from_module(policy).data)
            collector._weight_sync_schemes["policy"].await_acks()  # until every worker has them
            syncs.append(time.perf_counter() - t)
        collector.shutdown()
    finally:
        ray.shutdown()
    return {
        "collect_fps": collected / collect_s,
        "per_worker_fps": collected / collect_s / workers,
        "sync_s": statistics.median(syncs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=49152)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    setups = [("sync", 1)] + [(k, w) for w in args.workers for k in ("multi_sync", "ray")]
    rounds = []
    for _ in range(args.repeats):
        rounds.append({f"{k}/{w}": training_run(k, w, args.frames) for k, w in setups})
        print(rounds[-1], flush=True)
    runs = {name: _median_run([r[name] for r in rounds]) for name in rounds[0]}
    ratios = {w: [r[f"ray/{w}"]["fps"] / r[f"multi_sync/{w}"]["fps"] for r in rounds]
              for w in args.workers}  # fmt: skip
    probes = {w: worker_and_sync(w) for w in args.workers}
    start_s = ray_start_s()
    # the learner's own time per batch: what the one-process run spends beyond collecting
    sync_run = runs["sync/1"]
    learn_s = BATCH / sync_run["fps"] - BATCH / probes[1]["collect_fps"]
    learn_s = max(learn_s, 0.0)
    # sync time vs workers: least squares line through the measured points
    ws = list(probes)
    slope = statistics.linear_regression(ws, [probes[w]["sync_s"] for w in ws]).slope
    base = statistics.mean(probes[w]["sync_s"] for w in ws) - slope * statistics.mean(ws)
    per_worker = probes[min(ws)]["per_worker_fps"]  # one worker with a core to itself
    model = {}
    for n in CLUSTER:
        batch = BATCH * n // min(ws)  # each worker keeps its own batch share as workers grow
        t = batch / (n * per_worker) + (base + slope * n) + learn_s * batch / BATCH
        model[n] = {"frames_per_batch": batch, "fps": batch / t, "sync_s": base + slope * n}
    report = {
        "machine": machine(),
        "frames": args.frames,
        "layout": f"{ENVS} envs in all, {BATCH} frames per batch",
        "repeats": args.repeats,
        "runs": runs,
        "rounds": rounds,
        "ray_to_multi_sync": ratios,
        "ray_start_s": start_s,
        "probes": probes,
        "learn_s_per_batch": learn_s,
        "sync_line": {"base_s": base, "per_worker_s": slope},
        "cluster_model": model,
    }
    (RESULTS / "ray.json").write_text(json.dumps(report, indent=2) + "\n")
    (RESULTS / "ray.md").write_text(table(report))
    print(table(report))


def _median_run(runs: list[dict]) -> dict:
    """One collector's runs: the median of each figure, and the range of frames/s."""
    med = {key: statistics.median(run[key] for run in runs) for key in ("fps", "first_batch_s")}
    return {**med, "fps_min": min(r["fps"] for r in runs), "fps_max": max(r["fps"] for r in runs)}


def _ratios(workers: int, ratios: list[float]) -> str:
    each = ", ".join(f"{x:.2f}" for x in ratios)
    return f"{workers} worker(s) {each} (median {statistics.median(ratios):.2f})"


def table(r: dict) -> str:
    lines = [
        "### Ray collectors (bench_ray.py)\n",
        f"PPO CartPole, {r['layout']}, {r['frames']} frames per run, training included; "
        f"medians of {r['repeats']} rounds.\n",
        "| collector | workers | frames/s | range | first batch after (s) |",
        "|---|---|---|---|---|",
    ]
    for name, run in r["runs"].items():
        kind, workers = name.split("/")
        spread = f"{run['fps_min']:.0f}-{run['fps_max']:.0f}"
        row = f"| {kind} | {workers} | {run['fps']:.0f} | {spread} | {run['first_batch_s']:.1f} |"
        lines.append(row)
    lines += [
        "",
        "ray / multi_sync within each round: "
        + "; ".join(_ratios(w, xs) for w, xs in r["ray_to_multi_sync"].items())
        + ".\n",
        f"Local Ray start and stop: {r['ray_start_s']:.1f} s. Per batch: weight sync "
        + ", ".join(f"{p['sync_s'] * 1000:.1f} ms at {w} worker(s)" for w, p in r["probes"].items())
        + f"; learner {r['learn_s_per_batch'] * 1000:.0f} ms. Collection alone: "
        + ", ".join(
            f"{p['per_worker_fps']:.0f} frames/s per worker at {w} worker(s)"
            for w, p in r["probes"].items()
        )
        + ".\n",
        "On paper (not measured): a cluster of N one-core workers, each keeping the share of "
        f"{BATCH // int(min(r['probes'], key=int))} frames per batch, with",
        "`fps(N) = B / (B / (N * r) + s(N) + l * B / 512)`, B = 512 N frames per batch, r the "
        "per-worker rate above, s(N) = base + N * slope the weight-sync line fitted to the "
        "measured points, l the learner's time per 512 frames:\n",
        "| workers | frames per batch | weight sync (s) | frames/s |",
        "|---|---|---|---|",
    ]
    for n, m in r["cluster_model"].items():
        lines.append(f"| {n} | {m['frames_per_batch']} | {m['sync_s']:.3f} | {m['fps']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
