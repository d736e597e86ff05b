"""Where VMAS should step when a GPU is at hand: frames/s of a VMAS scenario stepped with random
actions on each device, at several batch sizes (``num_envs``). rlrun steps VMAS on the CPU (its
envs' single placement, ``rlrun/builders/devices.py``); this measures what stepping on the GPU
would give.

    python bench/bench_vmas_placement.py [--scenario navigation] [--steps 100] [--envs 60 600 6000]

Prints one JSON line per (device, num_envs).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torchrl.envs.libs.vmas import VmasEnv


def frames_per_second(scenario: str, device: str, num_envs: int, steps: int) -> float:
    """Env frames (one joint step of one env) per second over ``steps`` random steps, after 10
    warm-up steps."""
    env = VmasEnv(scenario, num_envs=num_envs, device=device, continuous_actions=True, n_agents=3)
    td = env.reset()
    for _ in range(10):
        td = env.rand_step(td)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        td = env.rand_step(td)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return steps * num_envs / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="navigation")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--envs", type=int, nargs="+", default=[60, 600, 6000])
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for num_envs in args.envs:
        for device in devices:
            fps = frames_per_second(args.scenario, device, num_envs, args.steps)
            row = {"scenario": args.scenario, "device": device, "num_envs": num_envs}
            print(json.dumps({**row, "fps": round(fps)}))


if __name__ == "__main__":
    main()
