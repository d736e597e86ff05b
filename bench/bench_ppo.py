"""PPO on CartPole-v1: rlrun against hand-written loops, all figures from the same run.

- training frames/s, identical hyperparameters: rlrun vs plain PyTorch+gymnasium vs plain TorchRL
- frames and seconds to a mean return of 475 (median of 3 seeds): rlrun's preset vs the plain loop
- env-only collection steps/s: rlrun's env + TorchRL collector vs raw gymnasium vector stepping
- `rlrun --help` wall time, launch-to-first-batch time, peak RSS of a PPO run

Usage: .venv/bin/python bench/bench_ppo.py [--seeds 3] [--frames 150000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    BIN,
    composed,
    first_reach,
    median,
    run_rlrun,
    run_script,
    write,
    write_markdown,
)

HERE = Path(__file__).resolve().parent
# The hyperparameters every implementation shares in the speed comparison (the plain loops'
# defaults; the ppo preset is tuned separately, for wall-clock time to 475).
SHARED = {
    "num_envs": 8,
    "steps_per_env": 128,
    "epochs": 4,
    "minibatches": 4,
    "lr": 1e-3,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "ent_coef": 0.01,
}


# rlrun as the speed comparison runs it: the default one-process collector, and TorchRL's
# MultiAsyncCollector (2 worker processes of 8 envs; each batch comes from one worker, whose
# policy may be one update behind; PPO's ratio is taken against the stored log-probs).
RLRUN_VARIANTS = {"rlrun": [], "rlrun_async": ["collector=async", "collector.num_workers=2"]}
BASELINES = ("plain_torch", "plain_torchrl")


def rlrun_same_hparams(seed: int, frames: int) -> list[str]:
    minibatch = SHARED["num_envs"] * SHARED["steps_per_env"] // SHARED["minibatches"]
    return [
        "+experiment=ppo",
        f"seed={seed}",
        f"trainer.total_frames={frames}",
        f"env.num_envs={SHARED['num_envs']}",
        f"collector.frames_per_batch={SHARED['num_envs'] * SHARED['steps_per_env']}",
        f"algo.epochs={SHARED['epochs']}",
        f"algo.minibatch_size={minibatch}",
        f"optim.lr={SHARED['lr']}",
        f"algo.gamma={SHARED['gamma']}",
        f"algo.gae_lambda={SHARED['gae_lambda']}",
        f"algo.entropy_coef={SHARED['ent_coef']}",
        "optim.anneal_lr=false",
        "optim.kwargs.eps=1e-8",
        "logger=csv",
        "checkpoint.backend=none",
    ]


def baseline_args(seed: int, frames: int) -> list[str]:
    return [
        f"--seed={seed}",
        f"--num-envs={SHARED['num_envs']}",
        f"--steps-per-env={SHARED['steps_per_env']}",
        f"--epochs={SHARED['epochs']}",
        f"--minibatches={SHARED['minibatches']}",
        f"--lr={SHARED['lr']}",
        f"--gamma={SHARED['gamma']}",
        f"--gae-lambda={SHARED['gae_lambda']}",
        f"--ent-coef={SHARED['ent_coef']}",
        f"--total-frames={frames}",
    ]


def training(seeds: int, frames: int) -> dict:
    rows: dict[str, list[dict]] = {name: [] for name in (*RLRUN_VARIANTS, *BASELINES)}
    for seed in range(seeds):
        for name, extra in RLRUN_VARIANTS.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = run_rlrun(rlrun_same_hparams(seed, frames) + extra, Path(tmp))
                reach_frames, reach_s = first_reach(out["run_dir"], 475)
            rows[name].append(
                {
                    "seed": seed,
                    "fps": out["fps"],
                    "frames_to_target": reach_frames,
                    "seconds_to_target": reach_s,
                    "best_return": out["train_return_best"],
                    "maxrss_mb": out["maxrss_mb"],
                    "first_batch_s": out["first_batch_s"],
                }
            )
        for name in BASELINES:
            res = run_script(HERE / "baselines" / f"{name}_ppo.py", baseline_args(seed, frames))
            rows[name].append(res)
    table = {
        name: {
            "fps_median": statistics.median(r["fps"] for r in rs),
            "frames_to_475_median": median([r["frames_to_target"] for r in rs]),
            "seconds_to_475_median": median([r["seconds_to_target"] for r in rs]),
            "runs": rs,
        }
        for name, rs in rows.items()
    }
    torch_fps = table["plain_torch"]["fps_median"]
    for name in table:
        table[name]["fps_vs_plain_torch"] = table[name]["fps_median"] / torch_fps
    return table


def preset_to_target(seeds: int) -> dict:
    """The tuned preset as a user runs it: seconds and frames to 475 (median of seeds)."""
    runs = []
    for seed in range(seeds):
        with tempfile.TemporaryDirectory() as tmp:
            out = run_rlrun(
                ["+experiment=ppo", f"seed={seed}", "checkpoint.backend=none"], Path(tmp)
            )
            reach_frames, reach_s = first_reach(out["run_dir"], 475)
            runs.append(
                {"seed": seed, "frames_to_target": reach_frames, "seconds_to_target": reach_s}
            )
    return {
        "frames_to_475_median": median([r["frames_to_target"] for r in runs]),
        "seconds_to_475_median": median([r["seconds_to_target"] for r in runs]),
        "runs": runs,
    }


def collection(num_envs: int = 128, rounds: int = 7, steps: int = 64) -> dict:
    """Env-only steps/s with random actions: rlrun's env and collector vs raw gymnasium.

    The two alternate in short rounds and the ratio is the median of the rounds' ratios: this
    machine's speed drifts by up to 1.7x between minutes, which a raw-then-ours order would
    read as a ratio change. ``steps``: vector steps per round, for each side.
    """
    import gymnasium
    import numpy as np
    import torch
    from tensordict import TensorDictBase
    from torchrl.envs.utils import RandomPolicy

    from rlrun.builders.collectors import make_collector
    from rlrun.builders.devices import Placement
    from rlrun.builders.envs import make_env

    vec = gymnasium.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    vec.reset(seed=0)
    rng = np.random.default_rng(0)

    class RandomActions(torch.nn.Module):  # rlrun's collectors take an nn.Module policy
        def __init__(self) -> None:
            super().__init__()
            self.random = RandomPolicy(env.full_action_spec)

        def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
            return self.random(tensordict)

    cfg = composed(  # the config `rlrun +experiment=ppo` runs
        "+experiment=ppo",
        f"env.num_envs={num_envs}",
        f"collector.frames_per_batch={num_envs * steps}",
    )
    env = make_env(cfg.env, seed=0)
    collector = make_collector(
        cfg.collector,
        env,
        RandomActions(),
        -1,
        Placement.on_cpu(),
        env_cfg=cfg.env,
        policy_cfg=cfg.policy,
    )
    batches = iter(collector)
    next(batches)  # warm-up
    raw, ours = [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(steps):
            vec.step(rng.integers(0, 2, size=num_envs))
        raw.append(steps * num_envs / (time.perf_counter() - start))
        start = time.perf_counter()
        frames = next(batches).numel()
        ours.append(frames / (time.perf_counter() - start))
    collector.shutdown()
    return {
        "num_envs": num_envs,
        "rounds": rounds,
        "raw_gymnasium_sps": statistics.median(raw),
        "rlrun_collector_sps": statistics.median(ours),
        "ratio": statistics.median(o / r for o, r in zip(ours, raw, strict=True)),
    }


def help_time(repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([str(BIN / "rlrun"), "--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--frames", type=int, default=150_000)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    results = {
        "command": "make bench (bench/bench_ppo.py)",
        "shared_hparams": SHARED,
        "help_s": help_time(),
        "collection": collection(),
        # at the speed comparison's 8 envs, where TorchRL's per-step bookkeeping weighs most
        "collection_shared": collection(SHARED["num_envs"], steps=SHARED["steps_per_env"]),
        "training": training(args.seeds, args.frames),
        "preset": preset_to_target(args.seeds),
    }
    write("ppo", results)
    write_markdown("ppo", markdown(results))


def markdown(r: dict) -> str:
    t = r["training"]

    def fmt(x: float | None, spec: str = ".0f") -> str:
        return "not reached" if x is None else format(x, spec)

    lines = [
        "### PPO, CartPole-v1",
        "",
        f"Same hyperparameters everywhere: {r['shared_hparams']}; median of "
        f"{len(t['rlrun']['runs'])} seeds.",
        "",
        "| implementation | training frames/s | vs plain PyTorch | frames to 475 "
        "| seconds to 475 |",
        "|---|---|---|---|---|",
    ]
    for name in (*RLRUN_VARIANTS, *BASELINES):
        row = t[name]
        lines.append(
            f"| {name} | {row['fps_median']:.0f} | {row['fps_vs_plain_torch']:.2f}x | "
            f"{fmt(row['frames_to_475_median'])} | {fmt(row['seconds_to_475_median'], '.1f')} |"
        )
    p = r["preset"]
    rss = max(run["maxrss_mb"] for run in t["rlrun"]["runs"])
    first = statistics.median(run["first_batch_s"] for run in t["rlrun"]["runs"])
    lines += [
        "",
        f"- `rlrun +experiment=ppo` (tuned preset): {fmt(p['frames_to_475_median'])} frames, "
        f"{fmt(p['seconds_to_475_median'], '.1f')} s of training to a mean return of 475 (median).",
        *(
            f"- Env-only collection at {c['num_envs']} envs: rlrun {c['rlrun_collector_sps']:.0f} "
            f"steps/s vs raw gymnasium {c['raw_gymnasium_sps']:.0f} steps/s ({c['ratio']:.2f}x; "
            f"{1e6 * c['num_envs'] / c['rlrun_collector_sps']:.0f} against "
            f"{1e6 * c['num_envs'] / c['raw_gymnasium_sps']:.0f} µs a vector step)."
            for c in (r["collection"], r.get("collection_shared"))
            if c is not None
        ),
        f"- `rlrun --help`: {r['help_s']:.2f} s; launch to first collected batch: {first:.1f} s; "
        f"peak RSS of a PPO run: {rss:.0f} MB.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
