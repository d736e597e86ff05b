"""``rlrun eval RUN [key=value ...]``: a trained policy on more episodes, another checkpoint or
a variant of its env, after training.

Env and policy are rebuilt from the run's saved config (``rlrun/commands/loading.py``), the weights
come from the newest intact checkpoint (or ``checkpoint=``), and the episodes run side by side with
the deterministic policy exactly as the in-run evaluation runs them
(``rlrun.builders.evaluation.run_episodes``; same env seed, so a run's own settings give its in-run
numbers back). Results go to a folder of their own, ``<run>/eval/<date>_<time>/`` (``eval.json``,
and ``episode.mp4`` with ``video=true``); nothing else in the run is touched. A sweep folder
evaluates each of its jobs, one line each.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rlrun.builders.imports import import_unprobed
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import run_config, run_folders, shown, split_options

if TYPE_CHECKING:
    from rlrun.commands.loading import Trained

USAGE = """\
Usage: rlrun eval RUN_OR_SWEEP_FOLDER [key=value ...]

Evaluate a trained policy deterministically; writes RUN/eval/<date>_<time>/eval.json.
  episodes=10          episodes, run side by side (one sub-env each)
  video=false          true: render one episode to episode.mp4 (pip install 'rlrun[video]')
  max_steps=N          steps per episode at most (default: the run's eval.max_steps)
  checkpoint=NAME      best | step_N | a checkpoint folder (default: the newest intact one)
  KEY=VALUE            any key of the run's saved config: device=cpu env.id=... seed=3
"""
OPTIONS = ("episodes", "video", "max_steps", "checkpoint")
DEFAULT_EPISODES = 10


def positive_int(key: str, value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"{key}={value} must be a whole number >= 1.")
    return int(value)


def eval_overrides(options: dict[str, str]) -> list[str]:
    """``episodes``, ``video`` and ``max_steps`` as overrides of the run's ``eval`` group (so
    ``rlrun/validation.py`` checks ``eval.video`` against the env's render modes)."""
    episodes = positive_int("episodes", options.get("episodes", str(DEFAULT_EPISODES)))
    overrides = [f"eval.episodes={episodes}"]
    if "max_steps" in options:
        overrides.append(f"eval.max_steps={positive_int('max_steps', options['max_steps'])}")
    video = options.get("video", "false").lower()
    if video not in ("true", "false"):
        raise ConfigError(f"video={options['video']} must be true or false.")
    if video == "true" and importlib.util.find_spec("moviepy") is None:
        raise ConfigError("video=true needs the moviepy package: pip install 'rlrun[video]'.")
    return [*overrides, f"eval.video={video}"]


def new_folder(run_dir: Path) -> Path:
    """``<run>/eval/<date>_<time>`` (``-2``, ``-3`` ... when that second is taken)."""
    base = run_dir / "eval" / time.strftime("%Y-%m-%d_%H-%M-%S")
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{base.name}-{n}")
    return folder


def evaluate(trained: Trained, overrides: list[str]) -> dict:
    """Run the episodes (and the video), write the eval folder; the eval.json content."""
    from rlrun.builders.evaluation import Evaluator, run_episodes
    from rlrun.builders.videos import FPS, write_mp4

    cfg = trained.cfg.eval
    env = trained.make_env(num_envs=cfg.episodes)
    try:
        episodes = run_episodes(env, trained.policy, cfg.max_steps)
        returns, lengths = (t.cpu().double().numpy() for t in episodes)
    finally:
        env.close()
    folder = new_folder(trained.run_dir)
    result = {
        "run": str(trained.run_dir),
        "checkpoint": str(trained.checkpoint),
        "frames": trained.frames,
        "env_id": trained.cfg.env.id,
        "overrides": overrides,
        "device": str(trained.device),
        "env_seed": trained.cfg.seed + 1,  # the in-run evaluation's env seed
        "deterministic": True,
        "episodes": int(cfg.episodes),
        "max_steps": int(cfg.max_steps),
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        "length_mean": float(lengths.mean()),
        "returns": returns.tolist(),
        "lengths": lengths.astype(int).tolist(),
        "video": None,
    }
    try:
        if cfg.video:
            evaluator = Evaluator(cfg, trained.make_env, trained.policy, folder, lambda _: None)
            write_mp4(evaluator.render_episode().numpy(), folder / "episode.mp4", FPS)
            result["video"] = "episode.mp4"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    result["folder"] = folder
    return result


def describe(result: dict) -> str:
    """``return 58.8 ± 22.9 (min 39, max 104), length 58.8 over 10 episodes``."""
    return (
        f"return {result['return_mean']:.4g} ± {result['return_std']:.3g} "
        f"(min {result['return_min']:.4g}, max {result['return_max']:.4g}), "
        f"length {result['length_mean']:.4g} over {result['episodes']} episode"
        + ("s" if result["episodes"] != 1 else "")
    )


def main(args: list[str]) -> int:
    """``rlrun eval``: each run (or each job of a sweep) evaluated, one line each."""
    if not args or args[0] in ("--help", "-h"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    options, overrides = split_options(args[1:], OPTIONS, "eval")
    overrides = [*eval_overrides(options), *overrides]
    runs = run_folders(Path(args[0]), "eval")
    failed = 0
    for run_dir in runs:
        try:
            cfg = run_config(run_dir, overrides, None)  # its keys checked before torch is imported
            loading = import_unprobed("rlrun.commands.loading")  # TorchRL, without probes
            trained = loading.rebuild(run_dir, cfg, options.get("checkpoint"))
            result = evaluate(trained, args[1:])
        except ConfigError as err:
            if len(runs) == 1:
                raise
            print(f"rlrun eval: {shown(run_dir)}: error: {err}", file=sys.stderr)
            failed += 1
            continue
        where = shown(result["folder"] / "eval.json")
        if len(runs) == 1:
            print(
                f"rlrun eval: {shown(run_dir)}: {trained.checkpoint.name} "
                f"({trained.frames} frames) on {trained.cfg.env.id}, deterministic, "
                f"device {trained.device}"
            )
            print(f"rlrun eval: {describe(result)} -> {where}")
        else:
            print(f"rlrun eval: {run_dir.name}: {describe(result)} -> {where}")
    if failed:
        print(f"rlrun eval: {failed} of {len(runs)} jobs could not be evaluated.", file=sys.stderr)
    return 1 if failed else 0
