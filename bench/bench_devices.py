"""Devices and the update step: frames/s of the same runs on the CPU and on CUDA, with and without
``algo.compile`` and ``algo.cudagraphs``, beside a plain PyTorch loop of the same shape run in the
same call on the same machine.

Runs ``rlrun`` as a user does, one case after another: PPO on CartPole (16 and 256 envs), SAC on
Pendulum and HalfCheetah, TD3 on HalfCheetah, DQN on CartPole. Reports, per case and variant,
frames/s over the whole run (compiling included), the steady rate (median ``train/fps`` over the
second half of the batches) and update steps/s once learning started; for the plain loops
(``baselines/plain_torch_sac.py``, ``plain_torch_td3.py`` and ``plain_torch_dqn.py``),
frames/s over the run and update steps/s. CUDA variants run only where CUDA is; elsewhere the
table says they were not run.

Anchor (LeanRL on an H100, their figures): SAC 725 frames/s, TD3 936 and continuous PPO 1,774
frames/s with compile + CUDA graphs, from 127, 272 and 652 without.

``--pairs N`` then runs rlrun's eager CPU run and the plain CPU loop alternately N times per
case and reports the median ratio of their update steps/s (a noisy host moves a single run by
10%).

Writes ``bench/results/devices.json`` and ``devices.md``. Usage:
    .venv/bin/python bench/bench_devices.py [--only ppo16 sac] [--scale 0.5] [--pairs 4]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from common import (
    RESULTS,
    machine,
    run_rlrun,
    run_script,
    series,
    updates_per_s,
    write,
    write_markdown,
)

HERE = Path(__file__).resolve().parent
CASES = {
    "ppo16": ["+experiment=ppo", "trainer.total_frames=20480"],
    "ppo256": ["+experiment=ppo", "env.num_envs=256", "collector.frames_per_batch=8192",
               "algo.minibatch_size=2048", "trainer.total_frames=81920"],
    "sac": ["+experiment=sac", "collector.init_random_frames=1000", "trainer.total_frames=4000"],
    "sac_halfcheetah": ["+experiment=sac_mujoco", "collector.init_random_frames=1000",
                        "collector.frames_per_batch=500", "trainer.total_frames=4000"],
    "td3_halfcheetah": ["+experiment=td3_mujoco", "collector.init_random_frames=1000",
                        "collector.frames_per_batch=500", "trainer.total_frames=4000"],
    "dqn": ["+experiment=dqn", "trainer.total_frames=20480"],
}  # fmt: skip
# the plain PyTorch loop beside each case: script, its arguments (frames scaled as the case's)
BASELINES = {
    "sac": ("plain_torch_sac.py", ["--env", "Pendulum-v1", "--random", "1000", "--frames", "4000"]),
    "sac_halfcheetah": ("plain_torch_sac.py", ["--random", "1000", "--frames", "4000"]),
    "td3_halfcheetah": ("plain_torch_td3.py", ["--random", "1000", "--frames", "4000"]),
    # rlrun flushes denormal floats (trainer.flush_denormal), so does its baseline here
    "dqn": ("plain_torch_dqn.py", ["--random", "1024", "--frames", "20480", "--flush-denormal"]),
}
EAGER = ["algo.compile=false", "algo.cudagraphs=false"]  # each variant as named, not auto's pick
VARIANTS = {
    "cpu": ["device=cpu", *EAGER],
    "cpu+compile": ["device=cpu", "algo.compile=true", "algo.cudagraphs=false"],
    "cuda": ["device=cuda", *EAGER],
    "cuda+compile": ["device=cuda", "algo.compile=true", "algo.cudagraphs=false"],
    "cuda+cudagraphs": ["device=cuda", "algo.compile=false", "algo.cudagraphs=true"],
    "cuda+compile+cudagraphs": ["device=cuda", "algo.compile=true", "algo.cudagraphs=true"],
}
PLAIN = {"plain cpu": "cpu", "plain cuda": "cuda"}


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
    return {
        "fps_run": result["fps"],
        "fps_steady": steady,
        "updates_per_s": updates_per_s(result["run_dir"]),
        "frames": result["frames"],
    }


def plain(case: str, device: str, scale: float) -> dict | None:
    """The plain PyTorch loop of ``case`` on ``device`` (None where the case has none)."""
    if case not in BASELINES:
        return None
    script, args = BASELINES[case]
    frames = args.index("--frames") + 1
    args = [*args[:frames], str(int(int(args[frames]) * scale)), *args[frames + 1 :]]
    out = run_script(HERE / "baselines" / script, [*args, "--device", device])
    return {"fps_run": out["fps"], "fps_steady": None, "updates_per_s": out["updates_per_s"]}


def pairs(case: str, scale: float, root: Path, count: int) -> list[float]:
    """rlrun's eager CPU run and the plain CPU loop, one after the other, ``count`` times: each
    pair's ratio of update steps/s (on a noisy host a single run moves by 10%)."""
    ratios = []
    for _ in range(count):
        ours = measure(scaled(CASES[case], scale), VARIANTS["cpu"], root)["updates_per_s"]
        theirs = plain(case, "cpu", scale)["updates_per_s"]
        ratios.append(ours / theirs)
        print(case, "pair", round(ours, 1), round(theirs, 1), flush=True)
    return ratios


def paired(ratios: list[float] | None) -> str:
    """The paired column: the median ratio, its range and the number of pairs."""
    if not ratios:
        return "--"
    low, high = min(ratios), max(ratios)
    return f"{statistics.median(ratios):.2f}x ({low:.2f}-{high:.2f}, {len(ratios)} pairs)"


def cell(r: dict | None) -> str:
    if r is None:
        return "--"
    steady = f" / {r['fps_steady']:.0f}" if r["fps_steady"] is not None else ""
    updates = f" ({r['updates_per_s']:.0f} u/s)" if r.get("updates_per_s") else ""
    return f"{r['fps_run']:.0f}{steady}{updates}"


def table(results: dict) -> str:
    columns = [*VARIANTS, *PLAIN]
    lines = [
        "### Devices and the update step",
        "",
        "frames/s over the whole run (compiling included) / steady (median `train/fps`, second "
        "half of the batches), and (u/s) update steps/s once learning started. `plain`: the "
        "plain PyTorch loop of the same shape and algorithm, frames/s over its run. "
        "`cpu / plain, paired` (with `--pairs`): rlrun's eager CPU run and the plain loop one "
        "after the other, again and again: the median ratio of update steps/s, its range. "
        "`--` where not run.",
        "",
        "| case | " + " | ".join(columns) + " | cpu / plain, paired |",
        "|---|" + "---|" * (len(columns) + 1),
    ]
    for case, row in results.items():
        when = f" ({row['measured']})" if "measured" in row else ""
        cells = [cell(row.get(c)) for c in columns] + [paired(row.get("pairs"))]
        lines.append(f"| {case}{when} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def earlier_rows(device: str, rerun: list[str]) -> dict[str, dict]:
    """The rows of ``devices.json`` that this run leaves as they were (``--only`` reruns some
    cases), where they were measured with the same GPU (or none) on this kind of machine."""
    path = RESULTS / "devices.json"
    if not path.is_file():
        return {}
    earlier = json.loads(path.read_text())
    if earlier.get("gpu") != device or earlier.get("machine") != machine():
        return {}
    return {case: row for case, row in earlier["results"].items() if case not in rerun}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=list(CASES), choices=list(CASES))
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every run's frames")
    parser.add_argument(
        "--pairs", type=int, default=0, help="then alternate the eager CPU run and its plain "
        "loop this many times (cases with a plain loop)"
    )  # fmt: skip
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "none (CUDA variants not run)"
    results = earlier_rows(device, args.only)
    with tempfile.TemporaryDirectory() as tmp:
        for case in args.only:
            results[case] = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
            for name, variant in VARIANTS.items():
                if name.startswith("cuda") and not cuda:
                    continue
                results[case][name] = measure(scaled(CASES[case], args.scale), variant, Path(tmp))
                print(case, name, results[case][name], flush=True)
            for name, plain_device in PLAIN.items():
                if plain_device == "cpu" or cuda:
                    results[case][name] = plain(case, plain_device, args.scale)
                    print(case, name, results[case][name], flush=True)
            if args.pairs and case in BASELINES:
                results[case]["pairs"] = pairs(case, args.scale, Path(tmp), args.pairs)
    write(
        "devices",
        {"gpu": device, "cases": CASES, "variants": VARIANTS, "baselines": BASELINES,
         "results": results},
    )  # fmt: skip
    write_markdown("devices", table(results) + f"\nGPU: {device}.\n")


if __name__ == "__main__":
    main()
