"""Multi-agent benchmark: rlrun's MAPPO, IPPO, MADDPG and IDDPG beside BenchMARL's, same
hyperparameters, same machine, one run.

For each algorithm and seed, ``rlrun +experiment=mappo_<task> algo=<algo>`` (BenchMARL 1.5.2's
hyperparameters: 6000 frames a batch from 10 VMAS envs, 45 passes of 400-frame minibatches, lr
5e-5, 256x256 tanh networks; its task settings) and then BenchMARL itself, in its own virtualenv
(``bench/baselines/benchmarl_vmas.py``, installed as ``benchmarl_requirements.txt`` says) with
the same values, both on one thread, taking turns so that both see the same load. A frame is
one step of one VMAS env, all agents together, in both. MADDPG and IDDPG (``--algorithms iddpg
maddpg``) run ``+experiment=maddpg_<task>`` at the multi-agent guide's quicker settings,
:data:`QUICK_OFF_POLICY`, which BenchMARL gets as the same values: 1200 frames a batch from 60
envs, then 200 updates of 128 frames (BenchMARL's ratio, 1000 per 6000), 64x64 networks, lr
1e-3, a buffer of 100k frames, exploration noise 0.8 to 0.1 over 24k frames.

Per implementation: the team's mean training return (mean over agents of their episode
returns, over the episodes that ended in a batch) against frames, the mean over seeds with a
95% bootstrap interval, and frames/s of training (collection and updates, start-up excluded).
Writes ``bench/results/multiagent.json`` and ``.md`` (``multiagent_<task>`` for a task other
than navigation). Usage:
    python bench/bench_multiagent.py [--task navigation|balance] [--algorithms mappo ippo]
        [--seeds 0 1 2] [--frames 120000] [--benchmarl-python /work/benchmarl-venv/bin/python]
    python bench/bench_multiagent.py --algorithms iddpg --frames 36000 --out multiagent_iddpg
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import BIN, series, write, write_markdown

HERE = Path(__file__).resolve().parent
BENCHMARL = HERE / "baselines" / "benchmarl_vmas.py"
# the VMAS presets' values (rlrun/conf/experiment/_vmas_benchmarl.yaml), as BenchMARL's flags
SAME = ["--frames-per-batch", "6000", "--n-envs", "10", "--epochs", "45",
        "--minibatch-size", "400", "--lr", "5e-5", "--hidden", "256,256"]  # fmt: skip
BATCH = 6000
# off-policy at the guide's quicker settings: (rlrun's overrides, BenchMARL's flags, frames a batch)
QUICK_OFF_POLICY = (
    ["env.num_envs=60", "collector.frames_per_batch=1200", "policy.hidden_sizes=[64,64]",
     "optim.lr=1e-3", "replay_buffer.size=100000", "algo.exploration_sigma_end=0.1",
     "algo.exploration_anneal_frames=24000"],
    ["--frames-per-batch", "1200", "--n-envs", "60", "--hidden", "64,64", "--lr", "1e-3",
     "--updates", "200", "--train-batch", "128", "--memory", "100000", "--sigma-end", "0.1",
     "--anneal-frames", "24000"],
    1200,
)  # fmt: skip
# per algorithm: (rlrun's preset family, rlrun's overrides, BenchMARL's flags, frames a batch)
PROFILES = {
    "mappo": ("mappo", [], SAME, BATCH),
    "ippo": ("mappo", [], SAME, BATCH),
    "maddpg": ("maddpg", *QUICK_OFF_POLICY),
    "iddpg": ("maddpg", *QUICK_OFF_POLICY),
}


def run_rlrun(task: str, algo: str, seed: int, frames: int, root: Path) -> dict:
    """One seed of ``+experiment=<family>_<task> algo=<algo>``: its curve and frames/s."""
    run_dir = root / f"rlrun_{algo}_{seed}"
    family, overrides, _, _ = PROFILES[algo]
    subprocess.run(
        [str(BIN / "rlrun"), f"+experiment={family}_{task}", f"algo={algo}", *overrides,
         f"seed={seed}",
         f"trainer.total_frames={frames}", "trainer.num_threads=1", "trainer.progress_bar=false",
         "logger=csv", "checkpoint.backend=none", f"hydra.run.dir={run_dir}"],
        check=True, capture_output=True, env={**os.environ, "RL_WARNINGS": "0"},
    )  # fmt: skip
    summary = json.loads((run_dir / "summary.json").read_text())
    curve = series(run_dir, "episode_return")
    return {"frames": [f for f, _ in curve], "train_return": [r for _, r in curve],
            "fps": summary["fps"], "wall_time_s": summary["wall_time_s"]}  # fmt: skip


def run_benchmarl(python: str, task: str, algo: str, seed: int, frames: int, root: Path) -> dict:
    """One seed of BenchMARL's ``algo`` on ``task`` with the same values, in its own venv."""
    out = root / f"benchmarl_{algo}_{seed}.json"
    subprocess.run(
        [python, str(BENCHMARL), "--algorithm", algo, "--task", task, "--seed", str(seed),
         "--frames", str(frames), *PROFILES[algo][2], "--threads", "1", "--out", str(out)],
        check=True, capture_output=True,
    )  # fmt: skip
    return json.loads(out.read_text())


def bootstrap(values: list[float], n: int = 10_000) -> list[float]:
    """95% percentile bootstrap interval of the mean over seeds."""
    rng = random.Random(0)
    means = sorted(statistics.fmean(rng.choices(values, k=len(values))) for _ in range(n))
    return [means[int(0.025 * n)], means[int(0.975 * n) - 1]]


def at(run: dict, frames: int) -> float | None:
    """The run's return in the batch that ended at ``frames`` (None: no episode ended)."""
    value = dict(zip(run["frames"], run["train_return"], strict=True)).get(frames)
    return None if value is None or value != value else value


def summarise(runs: list[dict], points: list[int]) -> dict:
    """Mean over seeds with its 95% interval at each of ``points`` frames; mean frames/s."""
    out: dict = {"fps": statistics.fmean(r["fps"] for r in runs), "at": {}}
    for frames in points:
        values = [v for r in runs if (v := at(r, frames)) is not None]
        if values:
            out["at"][frames] = {"mean": statistics.fmean(values), "ci95": bootstrap(values),
                                 "seeds": values}  # fmt: skip
    return out


def table(task: str, results: dict, points: list[int]) -> str:
    head = " | ".join(f"return at {p // 1000}k frames" for p in points)
    families = sorted({PROFILES[algo][0] for algo in results})
    same = " and ".join(
        f"{f}_{task}'s" + (", at the guide's quicker settings" if f == "maddpg" else "")
        for f in families
    )
    lines = [
        f"### Multi-agent: VMAS {task}, rlrun beside BenchMARL\n",
        "Team return (mean over agents), mean of the seeds with a 95% bootstrap interval; "
        f"frames/s of training on one thread. Same hyperparameters ({same}; "
        "BenchMARL 1.5.2's defaults otherwise), same machine, runs alternating.\n",
        f"| algorithm | implementation | {head} | frames/s |",
        "|---|---|" + "---|" * len(points) + "---|",
    ]
    for algo, by_impl in results.items():
        for impl, s in by_impl.items():
            cells = []
            for p in points:
                cell = s["at"].get(p)
                cells.append(
                    f"{cell['mean']:.3f} [{cell['ci95'][0]:.3f}, {cell['ci95'][1]:.3f}]"
                    if cell
                    else "-"
                )
            lines.append(f"| {algo} | {impl} | {' | '.join(cells)} | {s['fps']:.0f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", choices=["navigation", "balance"], default="navigation")
    p.add_argument("--out", help="results name in bench/results (default: multiagent[_<task>])")
    p.add_argument("--algorithms", nargs="+", choices=sorted(PROFILES), default=["mappo", "ippo"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--frames", type=int, default=120_000)
    p.add_argument("--benchmarl-python", default=os.environ.get(
        "BENCHMARL_PYTHON", "/work/benchmarl-venv/bin/python"))  # fmt: skip
    args = p.parse_args()
    batch = max(PROFILES[algo][3] for algo in args.algorithms)
    frames = -(-args.frames // batch) * batch
    have_benchmarl = Path(args.benchmarl_python).exists()
    if not have_benchmarl:
        print(f"no BenchMARL at {args.benchmarl_python}: rlrun only (see {BENCHMARL.name})",
              file=sys.stderr)  # fmt: skip
    raw: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-marl-") as tmp:
        for algo in args.algorithms:
            for seed in args.seeds:
                raw.setdefault(algo, {}).setdefault("rlrun", []).append(
                    run_rlrun(args.task, algo, seed, frames, Path(tmp))
                )
                if have_benchmarl:
                    raw[algo].setdefault("BenchMARL", []).append(
                        run_benchmarl(
                            args.benchmarl_python, args.task, algo, seed, frames, Path(tmp)
                        )
                    )
                print(f"{algo} seed {seed} done", flush=True)
    # VMAS's 100-step episodes end every 6000 frames (60 envs, or 10 envs in 6000-frame batches)
    points = [frames // 4 // BATCH * BATCH, frames // 2 // BATCH * BATCH, frames]
    results = {a: {i: summarise(r, points) for i, r in by.items()} for a, by in raw.items()}
    command = "python bench/bench_multiagent.py " + " ".join(sys.argv[1:])
    name = args.out or ("multiagent" if args.task == "navigation" else f"multiagent_{args.task}")
    write(name, {"command": command.strip(), "task": args.task, "frames": frames,
                 "seeds": args.seeds, "results": results, "runs": raw})  # fmt: skip
    write_markdown(name, table(args.task, results, points) + f"\n`{command.strip()}`\n")
    print(table(args.task, results, points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
