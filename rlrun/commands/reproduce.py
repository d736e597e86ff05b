"""``rlrun reproduce RUN [KEY=VALUE ...]``: the same run again, in a new folder, and how it
compares.

The run's saved command-line overrides (``.hydra/overrides.yaml``: its seed among them) go to a
new ``rlrun`` process, with any new ones on top; its own folder is a fresh default one. Then
the two runs' ``environment.json`` (``rlrun/folders/provenance.py``) are compared (package versions,
source commit, CPU, GPUs), and, for a ``deterministic=true`` run, their metrics: every CSV
series but the timing ones, byte for byte. Exit status: the new run's when it failed, 1 when a
deterministic run's metrics differ, else 0.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from rlrun.errors import ConfigError
from rlrun.folders.provenance import differences, first_start
from rlrun.folders.run_dirs import RUN_CONFIG, is_run_dir, shown

USAGE = """\
Usage: rlrun reproduce RUN [KEY=VALUE ...]

Start RUN's command again (its saved overrides, its seed) in a new folder, then report what
differs: the environment (packages, source commit, CPU, GPUs) and, for a deterministic=true run,
the metrics (every CSV series but the timing ones).
"""
TIMED = ("train/fps.csv", "train/wall_time_s.csv", "train/update_warmup_s.csv")
FOLDER_LINE = "rlrun: run folder "


def metric_files(run_dir: Path) -> dict[str, bytes]:
    """The run's CSV series by name, timing ones left out."""
    scalars = run_dir / "csv" / "scalars"
    files = {p.relative_to(scalars).as_posix(): p.read_bytes() for p in scalars.rglob("*.csv")}
    return {name: data for name, data in files.items() if name not in TIMED}


def saved_overrides(run_dir: Path) -> list[str]:
    """What the run was started with, less how it was continued (``resume=``, its folder)."""
    saved = yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text()) or []
    return [str(o) for o in saved if not str(o).startswith(("resume=", "hydra.run.dir="))]


def start_again(overrides: Sequence[str]) -> tuple[int, Path | None]:
    """``rlrun OVERRIDES`` in a new process, its output passed through; its exit status and
    run folder."""
    proc = subprocess.Popen([sys.executable, "-m", "rlrun", *overrides], stdout=subprocess.PIPE,
                            text=True, bufsize=1)  # fmt: skip
    folder = None
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        if line.startswith(FOLDER_LINE) and folder is None:
            folder = Path(line[len(FOLDER_LINE) :].strip())
    return proc.wait(), folder


def compare(old: Path, new: Path) -> int:
    """Print what differs between the runs ``old`` and ``new``; 1 when the metrics of a
    deterministic run differ."""
    before, after = first_start(old), first_start(new)
    if before is None:
        print(f"rlrun reproduce: {shown(old)} has no environment.json (an older rlrun's run)")
    else:
        changed = differences(before, after or {})
        print("rlrun reproduce: environment " + ("; ".join(changed) if changed else "the same"))
    if before is None or not before.get("deterministic"):
        print("rlrun reproduce: metrics not compared (the run was not deterministic=true)")
        return 0
    a, b = metric_files(old), metric_files(new)
    differ = sorted(name for name in set(a) | set(b) if a.get(name) != b.get(name))
    if not differ:
        print(f"rlrun reproduce: metrics match ({len(a)} series, byte for byte)")
        return 0
    print(f"rlrun reproduce: metrics differ: {', '.join(differ)}")
    return 1


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if argv else 2
    run_dir = Path(argv[0]).expanduser()
    if not is_run_dir(run_dir):
        raise ConfigError(
            f"rlrun reproduce {run_dir}: not a run folder (no {RUN_CONFIG} there); give one "
            "run's folder (of a sweep: one of its job folders)."
        )
    for arg in argv[1:]:
        if "=" not in arg or arg.startswith("-"):
            raise ConfigError(f"rlrun reproduce: {arg} is not key=value; see rlrun reproduce -h.")
    status, new = start_again([*saved_overrides(run_dir), *argv[1:]])
    if status != 0 or new is None:
        return status or 1
    return compare(run_dir, new)
