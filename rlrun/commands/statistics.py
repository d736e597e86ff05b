"""A sweep's results as the field now reports them (Agarwal et al., "Deep RL at the edge of the
statistical precipice", 2021), computed by their library, rliable (the ``report`` extra).

Per setting of the sweep (the overrides that vary, seeds aside; ``rlrun/commands/report.py`` groups
them), each seed's final return is one run of one task. The table gives the IQM, mean, median
and optimality gap, each with a 95% stratified bootstrap confidence interval (:data:`REPS`
resamples, seeded, so a report is the same each time); the optimality gap is measured against
the env's ``reward_threshold`` in gymnasium's registry (CartPole-v1: 475), in return units, where
every job of the sweep has the same env and that env has one. Between every two settings (past
:data:`MAX_PAIRED` settings: the best against each other), the probability that a run of the
first ends above a run of the second, with its interval. Two plots:
``sample_efficiency.png`` (the IQM over seeds against frames, with its interval band) and
``performance_profile.png`` (the fraction of runs above each return).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPS = 2000  # bootstrap resamples (rliable's default is 50000: minutes for a large sweep)
SEED = 0
CURVE_POINTS = 40  # frames at which the sample-efficiency curve is bootstrapped
MAX_PAIRED = 6  # settings compared pairwise; past that, the best against each of the others


def _estimates(scores: Mapping[str, Any], func) -> tuple[dict, dict]:
    from rliable import library as rly

    state = np.random.RandomState(SEED)
    with warnings.catch_warnings():  # arch's notice that RandomState will be replaced
        warnings.simplefilter("ignore", FutureWarning)
        return rly.get_interval_estimates(scores, func, reps=REPS, random_state=state)


def interval_table(scores: Mapping[str, np.ndarray], threshold: float | None) -> list[dict]:
    """One row per setting: each aggregate and its 95% interval. ``scores``: setting ->
    ``[runs, 1]`` final returns."""
    from rliable import metrics

    names = ["iqm", "mean", "median"] + (["optimality_gap"] if threshold is not None else [])

    def aggregates(x: np.ndarray) -> np.ndarray:
        found = [metrics.aggregate_iqm(x), metrics.aggregate_mean(x), metrics.aggregate_median(x)]
        if threshold is not None:
            found.append(metrics.aggregate_optimality_gap(x, gamma=threshold))
        return np.array(found)

    points, intervals = _estimates(scores, aggregates)
    rows = []
    for setting in scores:
        row: dict = {"setting": setting, "runs": len(scores[setting])}
        for i, name in enumerate(names):
            row[name] = float(points[setting][i])
            row[f"{name}_low"] = float(intervals[setting][0, i])
            row[f"{name}_high"] = float(intervals[setting][1, i])
        rows.append(row)
    return rows


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's ``metrics.probability_of_improvement`` (the Mann-Whitney U statistic over
    ``n * m``, averaged over tasks) in array operations: the same numbers, without a SciPy test
    per task per resample (30 s for 4 settings here, 2026-11-25)."""
    wins = (x[:, None, :] > y[None, :, :]).mean(axis=(0, 1))
    ties = (x[:, None, :] == y[None, :, :]).mean(axis=(0, 1))
    return float((wins + 0.5 * ties).mean())


def improvement_table(scores: Mapping[str, np.ndarray], iqms: Mapping[str, float]) -> list[dict]:
    """P(a run of X ends above a run of Y), with its interval: for every ordered pair of
    settings, or, past :data:`MAX_PAIRED` settings, the best by IQM against each other."""
    if len(scores) <= MAX_PAIRED:
        ordered = list(itertools.permutations(scores, 2))
    else:
        best = max(iqms, key=iqms.__getitem__)
        ordered = [(best, other) for other in scores if other != best]
    pairs = {f"{x} > {y}": (scores[x], scores[y]) for x, y in ordered}
    if not pairs:
        return []
    points, intervals = _estimates(pairs, probability_of_improvement)
    return [
        {
            "comparison": pair,
            "probability": float(np.ravel(points[pair])[0]),
            "low": float(np.ravel(intervals[pair])[0]),
            "high": float(np.ravel(intervals[pair])[1]),
        }
        for pair in pairs
    ]


def iqm_curves(curves: Mapping[str, list[np.ndarray]]) -> dict[str, tuple]:
    """Per setting: frames, IQM over seeds and its interval, on a grid where every seed has a
    value (``curves``: setting -> each seed's ``[n, 2]`` rows of frames, return)."""
    import scipy.stats

    found = {}
    for setting, runs in curves.items():
        if not runs:  # no seed of this setting logged two points yet
            continue
        end = min(c[-1, 0] for c in runs)
        start = max(c[0, 0] for c in runs)
        if end <= start:
            continue
        frames = np.linspace(start, end, CURVE_POINTS)
        values = np.stack([np.interp(frames, c[:, 0], c[:, 1]) for c in runs])  # [runs, points]

        def per_point(x: np.ndarray) -> np.ndarray:  # metrics.aggregate_iqm of each column
            return scipy.stats.trim_mean(x, proportiontocut=0.25, axis=0)

        points, intervals = _estimates({setting: values}, per_point)
        found[setting] = (frames, points[setting], intervals[setting])
    return found


def plot_sample_efficiency(curves: Mapping[str, tuple], metric: str, path: Path) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not curves:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for setting, (frames, iqm, interval) in curves.items():
        (line,) = ax.plot(frames, iqm, label=setting)
        ax.fill_between(frames, interval[0], interval[1], color=line.get_color(), alpha=0.2)
    ax.set_xlabel("frames")
    ax.set_ylabel(f"IQM of {metric} (95% CI)")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def plot_performance_profile(scores: Mapping[str, np.ndarray], path: Path) -> bool:
    """The fraction of runs whose final return exceeds each value, per setting, with bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import library as rly
    from rliable import plot_utils

    every = np.concatenate([s.ravel() for s in scores.values()])
    if every.size < 2 or every.min() == every.max():
        return False
    taus = np.linspace(every.min(), every.max(), 50)
    profiles, cis = rly.create_performance_profile(dict(scores), taus, reps=REPS)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_utils.plot_performance_profiles(
        profiles, taus, performance_profile_cis=cis, ax=ax, xlabel="final return",
        ylabel="fraction of runs above", labelsize="medium", ticklabelsize="small",
    )  # fmt: skip
    ax.legend(list(profiles), fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def reward_threshold(run_dirs: list[Path]) -> tuple[str, float] | None:
    """The env id and gymnasium's ``reward_threshold`` when every run has the same env and it
    has one."""
    import gymnasium
    from omegaconf import OmegaConf

    ids = {str(OmegaConf.load(d / ".hydra" / "config.yaml").env.id) for d in run_dirs}
    if len(ids) != 1:
        return None
    (env_id,) = ids
    try:
        threshold = gymnasium.spec(env_id).reward_threshold
    except gymnasium.error.Error:  # not registered in this process (env.imports)
        return None
    return None if threshold is None else (env_id, float(threshold))


def available() -> bool:
    """rliable (the ``report`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("rliable") is not None


@dataclass
class Statistics:
    """What :func:`summarize` found: rows for ``statistics.csv`` and ``improvement.csv``, the
    reference of the optimality gap (env id, reward_threshold), the plots it wrote."""

    rows: list[dict]
    improvement: list[dict]
    reference: tuple[str, float] | None
    plots: list[str]


def summarize(
    finals: Mapping[str, list[float]],
    curves: Mapping[str, list[np.ndarray]],
    run_dirs: list[Path],
    metric: str,
    folder: Path,
) -> Statistics | None:
    """The statistics of a sweep's settings (``finals``: setting -> each seed's final return;
    ``curves``: setting -> each seed's curve), plots written into ``folder``; None without
    rliable (the ``report`` extra) or without any final return."""
    scores = {name: np.array(v, dtype=float)[:, None] for name, v in finals.items() if v}
    if not available() or not scores:
        return None
    reference = reward_threshold(run_dirs)
    rows = interval_table(scores, reference[1] if reference else None)
    plots = []
    if plot_sample_efficiency(iqm_curves(curves), metric, folder / "sample_efficiency.png"):
        plots.append("sample_efficiency.png")
    if plot_performance_profile(scores, folder / "performance_profile.png"):
        plots.append("performance_profile.png")
    iqms = {row["setting"]: row["iqm"] for row in rows}
    return Statistics(rows, improvement_table(scores, iqms), reference, plots)
