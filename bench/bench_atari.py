"""Atari benchmark: env stepping per backend against raw envpool, PPO training speed, and a short
learning check against random play.

- Env only (``--env-steps`` steps of ``--num-envs`` Pong envs, random actions, in this process):
  raw ``envpool.make(...).step`` with the options rlrun gives envpool; rlrun's training env on
  ``env.backend=envpool`` and on ``gym_vector`` (``rlrun.builders.envs.make_env``: the preprocessing
  plus step counter, game score, end of life and reward clipping), stepped by TorchRL's ``rollout``.
  Frames are agent steps (4 emulator frames each).
- PPO: ``rlrun +experiment=ppo_atari`` for ``--frames`` frames on each backend: frames/s of the
  whole run (collection and the Nature CNN's updates on the CPU).
- Learning (``--learn-frames``, 0 to skip): ``ppo_atari`` on Breakout (envpool), one seed sweep
  with the seeds side by side (joblib launcher); per seed the mean training game score of the
  last 10 games, beside random play's mean over 20 games.

Writes ``bench/results/atari.json`` and ``atari.md`` (speed) and, with ``--learn-frames``,
``atari_learning.json`` and ``atari_learning.md`` (a run without it leaves those as they are:
learning takes hours, speed minutes). Usage:
    python bench/bench_atari.py [--env-steps 2000] [--num-envs 8] [--frames 8192]
                                [--learn-frames 0] [--seeds 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch
from common import run_rlrun, series, sweep, write, write_markdown


def env_cfg(*overrides: str):
    """The ``env`` node ``rlrun +experiment=ppo_atari OVERRIDES`` would build."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlrun.commandline import register_configs

    GlobalHydra.instance().clear()
    register_configs()
    with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
        return compose("config", overrides=["+experiment=ppo_atari", *overrides]).env


def raw_envpool(steps: int, num_envs: int) -> float:
    import envpool
    import numpy as np

    from rlrun.builders.envpool_env import _atari_kwargs

    env = envpool.make(
        "Pong-v5", env_type="gymnasium", num_envs=num_envs, **_atari_kwargs(env_cfg().atari)
    )
    env.reset()
    rng = np.random.default_rng(0)
    actions = rng.integers(0, env.action_space.n, size=(steps, num_envs))
    start = time.perf_counter()
    for action in actions:
        env.step(action)
    return steps * num_envs / (time.perf_counter() - start)


def rlrun_env(backend: str, steps: int, num_envs: int) -> float:
    from torchrl.envs.utils import RandomPolicy

    from rlrun.builders.envs import make_env

    env = make_env(env_cfg(f"env.backend={backend}", f"env.num_envs={num_envs}"), seed=0)
    policy = RandomPolicy(env.full_action_spec["action"])
    env.rollout(50, policy, break_when_any_done=False)  # warm-up
    start = time.perf_counter()
    env.rollout(steps, policy, break_when_any_done=False)
    fps = steps * num_envs / (time.perf_counter() - start)
    env.close()
    return fps


def random_play(games: int) -> float:
    """Breakout's mean game score under uniformly random actions (the evaluation env)."""
    from torchrl.envs.utils import RandomPolicy

    from rlrun.builders.envs import make_env

    env = make_env(env_cfg("env=breakout", "env.num_envs=1"), seed=0, training=False)
    policy, scores = RandomPolicy(env.full_action_spec["action"]), []
    while len(scores) < games:
        td = env.rollout(27000, policy, break_when_any_done=True)
        scores.append(td["next", "reward"].sum().item())
    return sum(scores) / len(scores)


def ppo_speed(backend: str, frames: int, root: Path) -> dict:
    out = run_rlrun(
        ["+experiment=ppo_atari", f"env.backend={backend}", f"trainer.total_frames={frames}",
         "checkpoint.backend=none"],
        root,
    )  # fmt: skip
    return {"fps": round(out["fps"], 1), "maxrss_mb": round(out["maxrss_mb"])}


def learning(frames: int, seeds: list[int], root: Path) -> dict:
    """One ``rlrun -m`` seed sweep, its jobs side by side (one job per seed); per seed the mean
    training game score of the last 10 games."""
    args = ["+experiment=ppo_atari", "env=breakout", "env.backend=envpool",
            f"seed={','.join(map(str, seeds))}", f"trainer.total_frames={frames}"]  # fmt: skip
    wall, jobs = sweep(args, root, len(seeds))
    runs = {}
    for overrides, job in jobs:
        played = (job / "csv" / "scalars" / "train" / "episode_return.csv").exists()
        games = [value for _, value in series(job, "episode_return")][-10:] if played else []
        mean = round(sum(games) / len(games), 2) if games else None
        runs[overrides["seed"]] = {"last_10_games": mean}
    return {"runs": runs, "sweep_wall_s": round(wall, 1)}


def speed_table(results: dict) -> str:
    env = results["env_only"]
    raw = env["raw envpool"]
    lines = [
        "### Atari speed (`bench/bench_atari.py`)",
        "",
        f"Env only: Pong, {results['num_envs']} envs, random actions, agent steps/s "
        f"({results['env_steps']} steps per env).",
        "",
        "| path | steps/s | vs raw envpool |",
        "|---|---|---|",
        *(f"| {name} | {fps:.0f} | {fps / raw:.2f}x |" for name, fps in env.items()),
        "",
        f"PPO (`+experiment=ppo_atari`, {results['frames']} frames, CPU):",
        "",
        "| backend | frames/s | peak RSS (MB) |",
        "|---|---|---|",
        *(f"| {b} | {r['fps']} | {r['maxrss_mb']} |" for b, r in results["ppo"].items()),
    ]
    return "\n".join(lines) + "\n"


def learning_table(results: dict) -> str:
    lines = [
        "### Atari learning (`bench/bench_atari.py --learn-frames`)",
        "",
        f"`ppo_atari` on Breakout (envpool), {results['learn_frames']} frames per seed; random "
        f"play scores {results['random_play']:.2f} per game (mean of 20 games).",
        "",
        "| run | mean score, last 10 training games |",
        "|---|---|",
        *(f"| seed {k} | {v['last_10_games']} |" for k, v in results["runs"].items()),
        "",
        f"The {len(results['runs'])} seeds ran side by side (`hydra/launcher=joblib`) in "
        f"{results['sweep_wall_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def publish(name: str, results: dict, text: str) -> None:
    write(name, results)
    write_markdown(name, text)
    print(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--env-steps", type=int, default=2000)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--frames", type=int, default=8192)
    parser.add_argument("--learn-frames", type=int, default=0)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args()
    torch.set_num_threads(1)  # as rlrun's runs (trainer.num_threads)
    results: dict = {
        "num_envs": args.num_envs,
        "env_steps": args.env_steps,
        "frames": args.frames,
        "env_only": {
            "raw envpool": raw_envpool(args.env_steps, args.num_envs),
            "rlrun env.backend=envpool": rlrun_env("envpool", args.env_steps, args.num_envs),
            "rlrun env.backend=gym_vector": rlrun_env("gym_vector", args.env_steps, args.num_envs),
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        results["ppo"] = {b: ppo_speed(b, args.frames, root) for b in ("envpool", "gym_vector")}
        publish("atari", results, speed_table(results))
        if args.learn_frames:
            learned = {
                "learn_frames": args.learn_frames,
                "random_play": random_play(20),
                **learning(args.learn_frames, args.seeds, root),
            }
            publish("atari_learning", learned, learning_table(learned))


if __name__ == "__main__":
    main()
