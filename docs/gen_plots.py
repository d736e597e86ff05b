"""The benchmark page's plots, drawn at every ``make docs`` from the JSON that ``make bench``
left in ``bench/results/``: the pictures always show the committed figures, and nothing is
measured again.

mkdocs-gen-files runs this file during the build; each plot is ``benchmarks/<name>.png``.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"


def bars(ax: Any, values: dict[str, float], ylabel: str) -> None:
    """One bar per label, its value written above it."""
    shown = ax.bar(list(values), list(values.values()), color="tab:blue")
    ax.bar_label(shown, fmt="%.0f")
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelrotation=15)


def ppo_speed(ax: Any, data: dict) -> None:
    """PPO CartPole: training frames/s of rlrun and the plain loops (bench_ppo.py)."""
    bars(ax, {k: v["fps_median"] for k, v in data["training"].items()}, "training frames/s")
    ax.set_title(f"PPO CartPole-v1, median of 3 seeds\n{data['machine']}", fontsize=9)


def ray_speed(ax: Any, data: dict) -> None:
    """Collectors at 1, 2 and 4 workers (bench_ray.py)."""
    bars(ax, {k: v["fps"] for k, v in data["runs"].items()}, "frames/s (collector/workers)")
    ax.set_title(f"PPO CartPole-v1 with training, medians\n{data['machine']}", fontsize=9)


def mujoco_speed(ax: Any, data: dict) -> None:
    """SAC and TD3 update steps/s against plain PyTorch SAC and TD3 loops (bench_mujoco.py)."""
    medians = data["speed"]["median"]
    bars(ax, {k: v["updates_per_s"] for k, v in medians.items()}, "update steps/s")
    ax.set_title(f"HalfCheetah-v5, median of 3 rounds\n{data['machine']}", fontsize=9)


def atari_speed(ax: Any, data: dict) -> None:
    """Pong env stepping, envpool against rlrun's two backends (bench_atari.py)."""
    bars(ax, data["env_only"], "agent steps/s")
    ax.set_title(f"Pong, {data['num_envs']} envs, random actions\n{data['machine']}", fontsize=9)


def mujoco_learning(ax: Any, data: dict) -> None:
    """Evaluation return against frames, one line per preset and env, the mean of 3 seeds."""
    for name, row in data["rows"].items():
        curves = list(row["eval_curves"].values())
        frames = [f for f, _ in curves[0]]
        means = [sum(c[i][1] for c in curves) / len(curves) for i in range(len(frames))]
        ax.plot(frames, means, marker="o", label=name)
    ax.set_xlabel("frames")
    ax.set_ylabel("evaluation return (mean of 3 seeds)")
    ax.legend(fontsize=8)
    ax.set_title(f"MuJoCo presets as a user runs them\n{data['machine']}", fontsize=9)


PLOTS: dict[str, tuple[str, Callable[[Any, dict], None]]] = {
    "ppo_speed": ("ppo.json", ppo_speed),
    "ray_speed": ("ray.json", ray_speed),
    "mujoco_speed": ("mujoco.json", mujoco_speed),
    "atari_speed": ("atari.json", atari_speed),
    "mujoco_learning": ("mujoco_learning.json", mujoco_learning),
}


def png(draw: Callable[[Any, dict], None], data: dict) -> bytes:
    """One plot as PNG bytes."""
    fig, ax = plt.subplots(figsize=(7, 4), layout="constrained")
    draw(ax, data)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs it with run_path
    import mkdocs_gen_files

    for name, (source, draw) in PLOTS.items():
        with mkdocs_gen_files.open(f"benchmarks/{name}.png", "wb") as out:
            out.write(png(draw, json.loads((RESULTS / source).read_text())))
