"""Helpers shared by the benchmark scripts: run rlrun as a user does, read its results back."""

from __future__ import annotations

import csv
import json
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
RESULTS = Path(__file__).resolve().parent / "results"
MEASURE = (
    "import resource, subprocess, sys, json; p = subprocess.run(sys.argv[1:]);"
    "print(json.dumps({'rc': p.returncode,"
    " 'maxrss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))"
)


def machine() -> str:
    """One line describing where the figures were measured."""
    import os

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def run_rlrun(args: list[str], cwd: Path) -> dict:
    """Run the console script in ``cwd``; return its summary.json plus wall time and peak RSS."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", MEASURE, str(BIN / "rlrun"), *args, "trainer.progress_bar=false"],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - start
    measured = json.loads(proc.stdout.strip().splitlines()[-1])
    if measured["rc"] != 0:
        raise RuntimeError(f"rlrun {' '.join(args)} failed:\n{proc.stderr[-2000:]}")
    run_dir = max((cwd / "outputs").rglob("summary.json"), key=lambda p: p.stat().st_mtime).parent
    summary = json.loads((run_dir / "summary.json").read_text())
    return {**summary, "process_s": elapsed, "maxrss_mb": measured["maxrss_mb"], "run_dir": run_dir}


def sweep(args: list[str], cwd: Path, jobs: int) -> tuple[float, list[tuple[dict, Path]]]:
    """``rlrun -m ARGS`` with ``jobs`` jobs side by side (Hydra's joblib launcher), as a user
    sweeps; returns its wall seconds and each job's overrides (key: value) with its folder."""
    start = time.perf_counter()
    proc = subprocess.run(
        [str(BIN / "rlrun"), "-m", *args, "hydra/launcher=joblib", f"hydra.launcher.n_jobs={jobs}",
         "checkpoint.backend=none", "trainer.progress_bar=false"],
        cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"rlrun -m {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    done = []
    for summary in sorted((cwd / "outputs" / "multirun").rglob("summary.json")):
        overrides = (summary.parent / ".hydra" / "overrides.yaml").read_text().split("\n")
        pairs = (o.removeprefix("- ").split("=", 1) for o in overrides if "=" in o)
        done.append(({k: v for k, v in pairs}, summary.parent))
    return wall, done


def series(run_dir: Path, metric: str, group: str = "train") -> list[tuple[int, float]]:
    """A CSV metric of a run folder as (frames, value) rows."""
    path = run_dir / "csv" / "scalars" / group / f"{metric}.csv"
    with path.open() as f:
        return [(int(float(step)), float(value)) for step, value in csv.reader(f)]


def updates_per_s(run_dir: Path) -> float | None:
    """Optimisation steps per second of training time, from the first learning batch on (the
    first batch that trains, whose steps include compiling, is the clock's start)."""
    steps = dict(series(run_dir, "optim_steps"))
    clock = dict(series(run_dir, "wall_time_s"))
    frames = sorted(f for f in steps if f in clock)
    if len(frames) < 2:
        return None
    first, last = frames[0], frames[-1]
    return (steps[last] - steps[first]) / (clock[last] - clock[first])


def first_reach(run_dir: Path, target: float) -> tuple[int | None, float | None]:
    """Frames and training seconds when ``train/episode_return`` first reaches ``target``."""
    clock = dict(series(run_dir, "wall_time_s"))
    for frames, value in series(run_dir, "episode_return"):
        if value >= target:
            return frames, clock.get(frames)
    return None, None


def run_script(path: Path, args: list[str]) -> dict:
    """Run a baseline script that prints one JSON line at the end."""
    proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{path.name} failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def median(values: list[float | None]) -> float | None:
    """Median that treats a missed target (None) as worse than any number."""
    ordered = sorted(values, key=lambda v: (v is None, v))
    return ordered[len(ordered) // 2]


def write(name: str, data: dict) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"machine": machine(), **data}, indent=2, default=str) + "\n")
    return path


def write_markdown(name: str, text: str) -> Path:
    """A benchmark's table, collected into bench/results/RESULTS.md by run_all.py."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.md"
    path.write_text(text)
    return path


def composed(*overrides: str) -> Any:
    """The config ``rlrun OVERRIDES`` would run (its defaults come from the YAML tree, not the
    schemas), for benchmarks that build rlrun's parts directly."""
    from rlrun.commands.check import compose

    return compose(list(overrides), None)
