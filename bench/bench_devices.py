"""Devices and the update step: frames/s of the same runs on the CPU and on CUDA, with and without
``algo.compile`` and ``algo.cudagraphs``.

Runs ``rlrun`` as a user does, one case after another: PPO on CartPole (16 and 256 envs), SAC on
Pendulum, DQN on CartPole. Reports, per case and variant, frames/s over the whole run (compiling
included) and the steady rate (median ``train/fps`` over the second half of the batches). CUDA
variants run only where CUDA is; elsewhere the table says they were not run.

Anchor (LeanRL on an H100, their figures): SAC 725 frames/s and continuous PPO 1,774 frames/s with
compile + CUDA graphs, from 127 and 652 without. Goal for rlrun's SAC on a GPU: 500 frames/s.

Writes ``bench/results/devices.json`` and ``devices.md``. Usage:
    .venv/bin/python bench/bench_devices.py [--only ppo16 sac] [--scale 0.5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import torch
from common import run_rlrun, series, write, write_markdown

CASES = {
    "ppo16": ["+experiment=ppo", "trainer.total_frames=20480"],
    "ppo256": ["+experiment=ppo", "env.num_envs=256", "collector.frames_per_batch=8192",
               "algo.minibatch_size=2048", "trainer.total_frames=81920"],
    "sac": ["+experiment=sac", "collector.init_random_frames=1000", "trainer.total_frames=4000"],
    "dqn": ["+experiment=dqn", "trainer.total_frames=20480"],
}  # fmt: skip
VARIANTS = {
    "cpu": ["device=cpu"],
    "cpu+compile": ["device=cpu", "algo.compile=true"],
    "cuda": ["device=cuda"],
    "cuda+compile": ["device=cuda", "algo.compile=true"],
    "cuda+cudagraphs": ["device=cuda", "algo.cudagraphs=true"],
    "cuda+compile+cudagraphs": ["device=cuda", "algo.compile=true", "algo.cudagraphs=true"],
}


def scaled(args: list[str], scale: float) -> list[str]:
    """Fewer (or more) frames: ``trainer.total_frames`` times ``scale``."""
    out = []
    for arg in args:
        if arg.startswith("trainer.total_frames="):
            arg = f"trainer.total_frames={int(int(arg.split('=')[1]) * scale)}"
        out.append(arg)
    return out


def measure(case: list[str], variant: list[str], root: Path) -> dict:
    result = run_rlrun([*case, *variant, "checkpoint.backend=none"], root)
    fps = [value for _, value in series(result["run_dir"], "fps")]
    steady = statistics.median(fps[len(fps) // 2 :]) if fps else None
    return {"fps_run": result["fps"], "fps_steady": steady, "frames": result["frames"]}


def table(results: dict) -> str:
    lines = [
        "### Devices and the update step",
        "",
        "frames/s over the whole run (compiling included) / steady (median `train/fps`, second "
        "half of the batches). `--` where not run.",
        "",
        "| case | " + " | ".join(VARIANTS) + " |",
        "|---|" + "---|" * len(VARIANTS),
    ]
    for case, row in results.items():
        cells = []
        for variant in VARIANTS:
            r = row.get(variant)
            cells.append(f"{r['fps_run']:.0f} / {r['fps_steady']:.0f}" if r else "--")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every run's frames")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only:
            results[case] = {}
            for name, variant in VARIANTS.items():
                if name.startswith("cuda") and not cuda:
                    continue
                results[case][name] = measure(scaled(CASES[case], args.scale), variant, Path(tmp))
                print(case, name, results[case][name], flush=True)
    device = torch.cuda.get_device_name(0) if cuda else "none (CUDA variants not run)"
    write("devices", {"gpu": device, "cases": CASES, "variants": VARIANTS, "results": results})
    write_markdown("devices", table(results) + f"\nGPU: {device}.\n")


if __name__ == "__main__":
    main()
