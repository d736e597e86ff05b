"""MuJoCo benchmark: SAC and TD3 speed against a lean PyTorch SAC, and a short learning run.

- Speed: ``rlrun +experiment=sac_mujoco`` and ``td3_mujoco`` on HalfCheetah-v5 for ``--frames``
  frames (the first ``--random`` random), and ``baselines/plain_torch_sac.py`` (the same network
  shapes, one update per frame, batch 256) in the same run: frames/s over the whole run and
  update steps/s once learning started.
- Learning (``--learn-frames``, 0 to skip): the preset's final deterministic evaluation return
  (10 episodes) per seed after that many frames; CleanRL's published 1M-frame figures need about
  4 hours per run here, so this is the start of the curve, not its end.

Writes ``bench/results/mujoco.json`` and ``mujoco.md``. Usage:
    python bench/bench_mujoco.py [--frames 4000] [--random 1000] [--learn-frames 0] [--seeds 0]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from common import RESULTS, machine, run_rlrun, run_script, series

HERE = Path(__file__).resolve().parent


def updates_per_s(run_dir: Path) -> float | None:
    """Optimisation steps per second of training time, from the first learning batch on."""
    steps = dict(series(run_dir, "optim_steps"))
    clock = dict(series(run_dir, "wall_time_s"))
    frames = sorted(f for f in steps if f in clock)
    if len(frames) < 2:
        return None
    first, last = frames[0], frames[-1]
    return (steps[last] - steps[first]) / (clock[last] - clock[first])


def speed(preset: str, frames: int, random: int, root: Path) -> dict:
    out = run_rlrun(
        [f"+experiment={preset}", f"trainer.total_frames={frames}",
         f"collector.init_random_frames={random}", "collector.frames_per_batch=500",
         "checkpoint.backend=none"],
        root,
    )  # fmt: skip
    return {"fps": round(out["fps"], 1), "updates_per_s": round(updates_per_s(out["run_dir"]), 1)}


def learning(preset: str, env: str, frames: int, seed: int, root: Path) -> dict:
    out = run_rlrun(
        [f"+experiment={preset}", f"env={env}", f"seed={seed}", f"trainer.total_frames={frames}",
         "eval=default", f"eval.every_frames={frames}", "eval.episodes=10",
         "checkpoint.backend=none"],
        root,
    )  # fmt: skip
    return {"eval_return": out["eval_return_last"], "wall_s": round(out["process_s"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=4000)
    parser.add_argument("--random", type=int, default=1000)
    parser.add_argument("--learn-frames", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    results: dict = {"machine": machine(), "frames": args.frames, "random_frames": args.random}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results["speed"] = {
            "rlrun sac_mujoco": speed("sac_mujoco", args.frames, args.random, root),
            "rlrun td3_mujoco": speed("td3_mujoco", args.frames, args.random, root),
            "plain PyTorch SAC": run_script(
                HERE / "baselines" / "plain_torch_sac.py",
                ["--frames", str(args.frames), "--random", str(args.random)],
            ),
        }
        if args.learn_frames:
            results["learning"] = {
                f"{preset} {env} seed {seed}": learning(preset, env, args.learn_frames, seed, root)
                for preset, env in (("sac_mujoco", "hopper"), ("td3_mujoco", "hopper"))
                for seed in args.seeds
            }
    (RESULTS / "mujoco.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = [
        f"| {name} | {r['fps']:.0f} | {r['updates_per_s']:.0f} |"
        for name, r in results["speed"].items()
    ]
    table = [
        "### mujoco (`python bench/bench_mujoco.py`)",
        "",
        f"HalfCheetah-v5, {args.frames} frames ({args.random} random), 1 torch thread, CPU.",
        "",
        "| run | frames/s | update steps/s |",
        "|---|---|---|",
        *rows,
    ]
    for name, r in results.get("learning", {}).items():
        table.append(
            f"\nLearning, {args.learn_frames} frames, {name}: eval return {r['eval_return']:.1f}"
        )
    (RESULTS / "mujoco.md").write_text("\n".join(table) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
