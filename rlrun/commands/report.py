"""``rlrun report FOLDER``: a sweep (or a single run) turned into tables and plots.

It reads what every run folder already holds (``summary.json``, ``.hydra/overrides.yaml`` and the
CSV logger's ``csv/scalars/<metric>.csv``) and writes, into FOLDER:
``report.md`` (the tables, also printed), ``jobs.csv`` (one row per job), ``settings.csv`` (seeds of
the same settings aggregated) and ``returns.png`` (return against frames per setting, mean and
spread over seeds). A run still training (or stopped without ``summary.json``) is reported from
its CSV logs so far; its lock is never taken (``rlrun/folders/folder_lock.py``).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import yaml

from rlrun.commands import references, statistics
from rlrun.commands.references import Job, Setting
from rlrun.folders.folder_lock import held_by

# summary.json keys shown per job, in this order (see rlrun.run.write_summary).
SUMMARY_KEYS = (
    "train_return_last",
    "train_return_best",
    "eval_return_last",
    "frames",
    "fps",
    "wall_time_s",
    "status",
)
SEED_KEYS = ("seed",)
REPORT_FILES = (
    "report.md",
    "jobs.csv",
    "settings.csv",
    "returns.png",
    "statistics.csv",
    "improvement.csv",
    "sample_efficiency.png",
    "performance_profile.png",
)


def iqm(values: np.ndarray) -> float:
    """Interquartile mean: the mean of the middle half (robust to one lucky or unlucky seed)."""
    x = np.sort(values)
    cut = int(math.floor(0.25 * len(x)))
    return float(x[cut : len(x) - cut].mean())


def read_curve(run_dir: Path, metric: str) -> np.ndarray | None:
    path = run_dir / "csv" / "scalars" / f"{metric}.csv"
    if not path.is_file() or path.stat().st_size == 0:
        return None
    return np.loadtxt(path, delimiter=",", ndmin=2)


def read_job(run_dir: Path, metric: str) -> Job:
    overrides_file = run_dir / ".hydra" / "overrides.yaml"
    overrides = yaml.safe_load(overrides_file.read_text()) if overrides_file.is_file() else []
    # ``resume=`` says how a job was continued (a resumed sweep adds it), not what it trained
    overrides = [str(o) for o in overrides or [] if not str(o).startswith("resume=")]
    curve = read_curve(run_dir, metric)
    summary_file = run_dir / "summary.json"
    if summary_file.is_file():
        summary = json.loads(summary_file.read_text())
    else:  # training now (it holds its folder), or stopped before it could write one
        summary = partial_summary(curve, running=held_by(run_dir) is not None)
    return Job(run_dir, overrides, summary, curve)


def partial_summary(curve: np.ndarray | None, running: bool) -> dict:
    """What the CSV logs say of a run without ``summary.json`` so far."""
    status = "running" if running else "stopped without a summary"
    if curve is None or not len(curve):
        return {"status": status}
    return {
        "frames": int(curve[-1, 0]),
        "train_return_last": float(curve[-1, 1]),
        "train_return_best": float(curve[:, 1].max()),
        "status": status,
    }


def find_jobs(folder: Path, metric: str) -> list[Job]:
    """Every run folder (one holding its saved config) under ``folder``, itself included:
    finished, stopped, or still training."""
    dirs = []
    # os.walk skips what vanishes mid-walk (a running job deleting an old checkpoint), where
    # rglob raised FileNotFoundError (CI, 2026-11-26).
    for here, subdirs, _ in os.walk(folder):
        if (Path(here) / ".hydra" / "config.yaml").is_file():
            dirs.append(Path(here))
        subdirs[:] = [d for d in subdirs if d != ".hydra"]
    dirs.sort(key=lambda p: [(0, int(s), "") if s.isdigit() else (1, 0, s) for s in p.parts])
    return [read_job(d, metric) for d in dirs]


def group_by_setting(jobs: list[Job]) -> list[Setting]:
    """Name each job by the overrides that vary across the sweep (seeds aside) and group them."""
    common = set.intersection(*(set(j.overrides) for j in jobs)) if jobs else set()
    settings: dict[str, Setting] = {}
    for job in jobs:
        varying = [
            o
            for o in job.overrides
            if o not in common and o.split("=", 1)[0].lstrip("+~") not in SEED_KEYS
        ]
        job.setting = " ".join(varying) or "(all jobs)"
        settings.setdefault(job.setting, Setting(job.setting)).jobs.append(job)
    return list(settings.values())


def final_return(job: Job) -> float | None:
    """The job's final return: evaluation when it ran, else training."""
    for key in ("eval_return_last", "train_return_last"):
        value = job.summary.get(key)
        if value is not None:
            return float(value)
    return None


def aggregate(setting: Setting) -> dict:
    """Mean, std and IQM over seeds of the final and best returns; frames and frames/s means."""
    finals = np.array([r for j in setting.jobs if (r := final_return(j)) is not None])
    bests = np.array(
        [j.summary["train_return_best"] for j in setting.jobs if j.summary.get("train_return_best")]
    )
    fps = [j.summary["fps"] for j in setting.jobs if j.summary.get("fps")]
    row: dict = {
        "setting": setting.name,
        "jobs": len(setting.jobs),
        "failed": sum(j.summary.get("status") == "failed" for j in setting.jobs),
    }
    row["final_mean"] = float(finals.mean()) if finals.size else None
    row["final_std"] = float(finals.std()) if finals.size else None
    row["final_iqm"] = iqm(finals) if finals.size else None
    row["best_mean"] = float(bests.mean()) if bests.size else None
    row["frames_mean"] = float(np.mean([j.summary.get("frames", 0) for j in setting.jobs]))
    row["fps_mean"] = float(np.mean(fps)) if fps else None
    return row


def job_row(job: Job, root: Path) -> dict:
    row = {"job": str(job.path.relative_to(root)) or ".", "setting": job.setting}
    row["overrides"] = " ".join(job.overrides)
    row.update({key: job.summary.get(key) for key in SUMMARY_KEYS})
    row["error"] = job.summary.get("error", "")
    return row


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(rows: Sequence[dict], columns: Sequence[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fmt(r[c]) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def write_csv(path: Path, rows: Sequence[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot(settings: list[Setting], metric: str, path: Path) -> bool:
    """Mean curve per setting with a band of one std over seeds; False when no job has a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for setting in settings:
        curves = [j.curve for j in setting.jobs if j.curve is not None and len(j.curve)]
        if not curves:
            continue
        frames = np.unique(np.concatenate([c[:, 0] for c in curves]))
        values = np.stack(  # each seed on the common frame grid; NaN outside its own range
            [np.interp(frames, c[:, 0], c[:, 1], left=np.nan, right=np.nan) for c in curves]
        )
        mean, std = np.nanmean(values, axis=0), np.nanstd(values, axis=0)
        (line,) = ax.plot(frames, mean, label=f"{setting.name} (n={len(curves)})")
        ax.fill_between(frames, mean - std, mean + std, color=line.get_color(), alpha=0.2)
        drawn = True
    if drawn:
        ax.set_xlabel("frames")
        ax.set_ylabel(metric)
        ax.legend(fontsize="small")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return drawn


def interval(value: float, low: float, high: float) -> str:
    return f"{value:.4g} [{low:.4g}, {high:.4g}]"


def statistics_text(found: statistics.Statistics | None, folder: Path) -> str:
    """The report's statistics section; ``statistics.csv`` and ``improvement.csv`` written."""
    if found is None:
        return "\n## Statistics\n\nNot computed: pip install 'rlrun[report]' (rliable).\n"
    write_csv(folder / "statistics.csv", found.rows)
    names = ["iqm", "mean", "median"] + (["optimality_gap"] if found.reference else [])
    table = [
        {"setting": r["setting"], "runs": r["runs"]}
        | {n: interval(r[n], r[f"{n}_low"], r[f"{n}_high"]) for n in names}
        for r in found.rows
    ]
    gap = ""
    if found.reference:
        env_id, threshold = found.reference
        gap = f" Optimality gap: how far below {env_id}'s reward_threshold {threshold:g} runs end."
    text = (
        "\n## Statistics\n\nFinal returns per setting: estimate [95% stratified bootstrap "
        f"interval] (rliable, {statistics.REPS} resamples, seed {statistics.SEED}).{gap}\n\n"
        f"{markdown(table, list(table[0]))}\n"
    )
    if found.improvement:
        write_csv(folder / "improvement.csv", found.improvement)
        pairs = [
            {"comparison": r["comparison"], "P(improvement)": interval(r["probability"], r["low"],
                                                                       r["high"])}
            for r in found.improvement
        ]  # fmt: skip
        text += (
            "\nProbability that a run of the first setting ends above one of the second:\n\n"
            f"{markdown(pairs, list(pairs[0]))}\n"
        )
    return text + "".join(f"\n![{p[:-4]}]({p})\n" for p in found.plots)


def report(folder: Path, metric: str = "train/episode_return") -> str:
    """Write the report files into ``folder`` and return the Markdown text."""
    return build_report(folder, metric)[0]


def build_report(
    folder: Path, metric: str = "train/episode_return", reference_overrides: Sequence[str] = ()
) -> tuple[str, list[references.Comparison]]:
    """Write the report files into ``folder``; the Markdown text and each setting's comparison
    with its preset's reference (``reference.KEY=VALUE`` overrides applied)."""
    jobs = find_jobs(folder, metric)
    if not jobs:
        raise FileNotFoundError(f"no run folder (with .hydra/config.yaml) under {folder}")
    settings = group_by_setting(jobs)
    job_rows = [job_row(j, folder) for j in jobs]
    setting_rows = [aggregate(s) for s in settings]
    write_csv(folder / "jobs.csv", job_rows)
    write_csv(folder / "settings.csv", setting_rows)
    job_cols = ["job", "setting", *SUMMARY_KEYS]
    text = f"# Report: {folder}\n\n## Jobs\n\n{markdown(job_rows, job_cols)}\n"
    text += f"\n## Settings (over seeds)\n\n{markdown(setting_rows, list(setting_rows[0]))}\n"
    failed = [r for r in job_rows if r["status"] != "completed"]
    if failed:
        lines = [f"- {r['job']}: {fmt(r['error'])}" for r in failed]
        text += "\n## Jobs that did not complete\n\n" + "\n".join(lines) + "\n"
    if plot(settings, metric, folder / "returns.png"):
        text += f"\n![{metric}](returns.png)\n"
    finals = {s.name: [r for j in s.jobs if (r := final_return(j)) is not None] for s in settings}
    curves = {s.name: [j.curve for j in s.jobs if j.curve is not None and len(j.curve) > 1]
              for s in settings}  # fmt: skip
    found = statistics.summarize(finals, curves, [j.path for j in jobs], metric, folder)
    text += statistics_text(found, folder)
    comparisons = references.compare_all(settings, reference_overrides)
    text += references.section(comparisons)
    (folder / "report.md").write_text(text)
    return text, comparisons


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="rlrun report",
        description="Tables (report.md, jobs.csv, settings.csv) and a plot (returns.png) of a "
        "sweep or run folder, written into that folder.",
    )
    parser.add_argument("folder", type=Path, help="a sweep folder outputs/multirun/... or a run")
    parser.add_argument(
        "--metric",
        default="train/episode_return",
        help="CSV logger metric to plot against frames (default: train/episode_return)",
    )
    args = parser.parse_args(list(argv))
    if not args.folder.is_dir():
        print(f"rlrun report: error: {args.folder} is not a folder.", file=sys.stderr)
        return 2
    try:
        text = report(args.folder, args.metric)
    except FileNotFoundError as err:
        print(f"rlrun report: error: {err}", file=sys.stderr)
        return 2
    print(text, end="")
    written = [f for f in REPORT_FILES if (args.folder / f).is_file()]
    print(f"\nWritten into {args.folder}: {', '.join(written)}")
    return 0
