"""What a run folder records to be reproduced: ``environment.json``.

Each start of the run (the first, every ``resume=``, a requeued job) appends one entry: the command
line, the seed and ``deterministic``, the rlrun version and, for a source checkout, its commit (with
``dirty`` when it has uncommitted changes), the versions of the packages a result depends on,
Python, and the host's CPU and GPUs. ``rlrun reproduce`` (``rlrun/commands/reproduce.py``) compares
two runs' first entries. Nothing here imports torch until a run is recorded.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

ENVIRONMENT = "environment.json"
COMMAND_ENV = "RLRUN_COMMAND"  # the command line as typed, set by the console script
# what a run's numbers depend on; the env suites where installed
PACKAGES = ("rlrun", "torch", "torchrl", "tensordict", "gymnasium", "numpy", "hydra-core",
            "mujoco", "ale-py", "envpool")  # fmt: skip


def source_commit() -> dict[str, Any] | None:
    """The git commit of rlrun's source when it runs from a checkout (an editable install)."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()  # fmt: skip
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain"],
                                capture_output=True, text=True, timeout=10).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": head, "dirty": bool(status.strip())}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(cfg: DictConfig) -> dict[str, Any]:
    """This process's entry of ``environment.json``."""
    import torch

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "started": datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": os.environ.get(COMMAND_ENV) or shlex.join(["rlrun", *sys.argv[1:]]),
        "seed": int(cfg.seed),
        "deterministic": bool(cfg.deterministic),
        "source": source_commit(),
        "packages": versions,
        "python": platform.python_version(),
        "host": {
            "name": platform.node(),
            "os": platform.platform(),
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "gpus": gpus,
            "cuda_version": torch.version.cuda if gpus else None,
        },
    }


def record_environment(run_dir: Path, cfg: DictConfig) -> None:
    """Append this start's entry to ``<run>/environment.json``."""
    path = run_dir / ENVIRONMENT
    starts = json.loads(path.read_text())["starts"] if path.is_file() else []
    starts.append(environment(cfg))
    path.write_text(json.dumps({"starts": starts}, indent=1) + "\n")


def first_start(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / ENVIRONMENT
    try:
        return json.loads(path.read_text())["starts"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return None


def differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` for each leaf that differs (start time and command aside)."""
    found = []
    for key in sorted(set(old) | set(new)):
        if not prefix and key in ("started", "command"):
            continue
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            found += differences(a, b, f"{prefix}{key}.")
        elif a != b:
            found.append(f"{prefix}{key}: {a} -> {b}")
    return found
