"""MuJoCo benchmark: SAC and TD3 speed against lean PyTorch loops, and learning runs set beside
published learning curves.

- Speed: ``rlrun +experiment=sac_mujoco`` and ``td3_mujoco`` on HalfCheetah-v5 for ``--frames``
  frames (the first ``--random`` random), and ``baselines/plain_torch_sac.py`` and
  ``plain_torch_td3.py`` (the same algorithms and network shapes, one update per frame, batch
  256) in the same run, in ``--repeats`` rounds: frames/s over the whole run, update steps/s
  once learning started, and each rlrun run's ratio to its plain loop's within each round (the
  goal: 0.9x or more).
- Learning (``--only learning``): the presets as a user runs them, one ``rlrun -m`` sweep per
  preset over envs and ``--seeds``, two jobs side by side (joblib launcher): ``sac_mujoco`` and
  ``td3_mujoco`` on HalfCheetah-v5 and Hopper-v5, ``ppo_mujoco`` on Hopper-v5, each for its budget
  (``--sac-frames``, ``--td3-frames``, ``--ppo-frames``), with a deterministic evaluation of 10
  episodes every 10000 frames. Beside the final evaluation: the published curves of
  ``baselines/published_curves.json`` at the same step count (the TD3 paper's, and
  rl-baselines3-zoo's trained agents'), linearly interpolated between their evaluation steps.
  CleanRL, whose hyperparameters the presets take, publishes its curves on W&B only.

Writes ``bench/results/mujoco.json`` and ``mujoco.md`` (speed) and, with ``learning``,
``mujoco_learning.json`` and ``mujoco_learning.md`` (a run without it leaves those as they are:
learning takes about an hour on 2 cores, speed minutes). Usage:
    python bench/bench_mujoco.py [--only speed learning] [--frames 4000] [--random 1000]
        [--repeats 3] [--seeds 0 1 2] [--sac-frames 30000] [--td3-frames 50000]
        [--ppo-frames 102400]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
from pathlib import Path

from common import run_rlrun, run_script, series, sweep, updates_per_s, write, write_markdown

HERE = Path(__file__).resolve().parent


def speed(preset: str, frames: int, random: int, root: Path) -> dict:
    out = run_rlrun(
        [f"+experiment={preset}", f"trainer.total_frames={frames}",
         f"collector.init_random_frames={random}", "collector.frames_per_batch=500",
         "checkpoint.backend=none"],
        root,
    )  # fmt: skip
    return {"fps": round(out["fps"], 1), "updates_per_s": round(updates_per_s(out["run_dir"]), 1)}


ENV_IDS = {"halfcheetah": "HalfCheetah", "hopper": "Hopper"}
PUBLISHED = json.loads((HERE / "baselines" / "published_curves.json").read_text())


def published_at(curve: list[list[float]], frames: int) -> float | None:
    """A published curve's return at ``frames`` env steps, linear between its evaluations (None
    outside the steps it evaluated)."""
    for (s0, r0), (s1, r1) in itertools.pairwise(curve):
        if s0 <= frames <= s1:
            return round(r0 + (r1 - r0) * (frames - s0) / (s1 - s0), 1)
    return None


def learning(preset: str, envs: list[str], frames: int, seeds: list[int], root: Path) -> dict:
    """One seed-and-env sweep of ``preset``; per env the final evaluation of each seed, the
    evaluation curve, and the published curves' returns at the same frame count."""
    args = [f"+experiment={preset}", f"env={','.join(envs)}", f"seed={','.join(map(str, seeds))}",
            f"trainer.total_frames={frames}", "eval=default", "eval.episodes=10",
            f"eval.every_frames={min(frames, 10000)}"]  # fmt: skip
    out = root / preset
    out.mkdir()
    wall, jobs = sweep(args, out, 2)
    algo = preset.removesuffix("_mujoco")
    rows = {}
    for env in envs:
        runs = [(o["seed"], job) for o, job in jobs if o["env"] == env]
        curves = {seed: series(job, "episode_return", "eval") for seed, job in runs}
        final = {seed: curve[-1][1] for seed, curve in curves.items()}
        name = ENV_IDS[env]
        published = {
            source: published_at(data["curves"][key], frames)
            for source, data in PUBLISHED.items()
            if source != "_about" and (key := f"{algo} {name}") in data["curves"]
        }
        published = {source: v for source, v in published.items() if v is not None}
        rows[f"{preset} {name}-v5"] = {
            "frames": frames,
            "final_eval": {seed: round(v, 1) for seed, v in final.items()},
            "mean": round(statistics.fmean(final.values()), 1),
            "published": published,
            "eval_curves": curves,
        }
    return {"rows": rows, "sweep_wall_s": round(wall, 1)}


# each rlrun preset timed here, and its plain PyTorch loop (``baselines/``)
PLAIN = {"sac_mujoco": "plain PyTorch SAC", "td3_mujoco": "plain PyTorch TD3"}


def speed_rounds(frames: int, random: int, repeats: int, root: Path) -> dict:
    """``repeats`` rounds of the four runs one after the other, and each rlrun run's update
    steps/s as a ratio to its plain loop's of the same round (a shared machine moves single
    runs by a fifth or more, measured 2026-11-25; a round's runs share its conditions)."""
    rounds = []
    for _ in range(repeats):
        row = {}
        for preset, plain in PLAIN.items():
            row[f"rlrun {preset}"] = speed(preset, frames, random, root)
            row[plain] = run_script(
                HERE / "baselines" / f"plain_torch_{preset.split('_')[0]}.py",
                ["--frames", str(frames), "--random", str(random)],
            )
            ours = row[f"rlrun {preset}"]
            ours["ratio"] = round(ours["updates_per_s"] / row[plain]["updates_per_s"], 3)
        rounds.append(row)
        print(json.dumps(row), flush=True)
    names = list(rounds[0])
    median = {
        name: {
            key: statistics.median(r[name][key] for r in rounds)
            for key in ("fps", "updates_per_s", "ratio")
            if key in rounds[0][name]
        }
        for name in names
    }
    return {"rounds": rounds, "median": median}


def speed_table(results: dict) -> str:
    speed = results["speed"]
    rows = []
    for name, r in speed["median"].items():
        ratios = [round(row[name]["ratio"], 2) for row in speed["rounds"] if "ratio" in row[name]]
        ratio = f"{r['ratio']:.2f}x ({', '.join(map(str, ratios))})" if ratios else "1"
        rows.append(f"| {name} | {r['fps']:.0f} | {r['updates_per_s']:.0f} | {ratio} |")
    lines = [
        "### mujoco (`python bench/bench_mujoco.py`)",
        "",
        f"HalfCheetah-v5, {results['frames']} frames ({results['random_frames']} random), "
        f"1 torch thread, medians of {len(speed['rounds'])} rounds.",
        "",
        "| run | frames/s | update steps/s | to the plain loop, per round |",
        "|---|---|---|---|",
        *rows,
    ]
    return "\n".join(lines) + "\n"


def learning_table(results: dict, seeds: list[int]) -> str:
    sources = [k for k in PUBLISHED if k != "_about"]
    lines = [
        "### MuJoCo learning (`bench/bench_mujoco.py --only learning`)",
        "",
        f"Final deterministic evaluation (10 episodes) after the frame budget, seeds "
        f"{', '.join(map(str, seeds))}; published curves at the same step count (see "
        "`bench/baselines/published_curves.json`; `-`: none published for that pair).",
        "",
        f"| run | frames | rlrun per seed | rlrun mean | {' | '.join(sources)} |",
        f"|---|---|---|---|{'---|' * len(sources)}",
    ]
    for name, r in results["rows"].items():
        per_seed = ", ".join(f"{v:.0f}" for v in r["final_eval"].values())
        published = " | ".join(
            f"{r['published'][s]:.0f}" if s in r["published"] else "-" for s in sources
        )
        lines.append(f"| {name} | {r['frames']} | {per_seed} | {r['mean']:.0f} | {published} |")
    walls = ", ".join(f"{p} {w:.0f} s" for p, w in results["sweep_wall_s"].items())
    lines += ["", f"Sweep wall time, two jobs side by side: {walls}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=4000)
    parser.add_argument("--random", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3, help="speed: rounds of the four runs")
    parser.add_argument("--only", nargs="+", default=["speed"], choices=["speed", "learning"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--sac-frames", type=int, default=30000)
    parser.add_argument("--td3-frames", type=int, default=50000)
    parser.add_argument("--ppo-frames", type=int, default=102400)  # 50 batches of 2048
    args = parser.parse_args()
    results: dict = {"frames": args.frames, "random_frames": args.random}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "speed" in args.only:
            results["speed"] = speed_rounds(args.frames, args.random, args.repeats, root)
            write("mujoco", results)
            write_markdown("mujoco", speed_table(results))
            print(json.dumps(results))
        if "learning" in args.only:
            plan = (("sac_mujoco", ["halfcheetah", "hopper"], args.sac_frames),
                    ("td3_mujoco", ["halfcheetah", "hopper"], args.td3_frames),
                    ("ppo_mujoco", ["hopper"], args.ppo_frames))  # fmt: skip
            learned: dict = {"rows": {}, "sweep_wall_s": {}}
            for preset, envs, frames in plan:
                out = learning(preset, envs, frames, args.seeds, root)
                learned["rows"].update(out["rows"])
                learned["sweep_wall_s"][preset] = out["sweep_wall_s"]
            write("mujoco_learning", learned)
            text = learning_table(learned, args.seeds)
            write_markdown("mujoco_learning", text)
            print(text)


if __name__ == "__main__":
    main()
