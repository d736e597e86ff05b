"""rlrun as a user installs it: a wheel built from this checkout, installed into a fresh
virtualenv beside an existing torch (here: the test environment's packages), run from a folder
that is not a clone, configs included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_installs_and_trains_from_any_folder(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("rlrun-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped = [
        "rlrun/conf/config.yaml",
        "rlrun/conf/experiment/ppo.yaml",
        "rlrun/algorithms/ppo.py",
        "hydra_plugins/rlrun_sweepers/basic_sweeper.py",
    ]
    assert [name for name in shipped if name not in names] == []
    assert any(n.endswith("licenses/LICENSE") for n in names)

    fresh = tmp_path / "venv"
    venv.create(fresh, with_pip=True)  # pip from the interpreter's bundled wheel: offline
    site = Path(sysconfig.get_path("purelib", vars={"base": str(fresh), "platbase": str(fresh)}))
    # torch, TorchRL, Hydra, ... "already there": this environment's packages, behind the venv's
    # own (its .pth files unread, so this checkout's editable install does not come along)
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    bin_dir = fresh / "bin"
    subprocess.run(
        [bin_dir / "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True,
    )  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run = subprocess.run(
        [bin_dir / "rlrun", "+experiment=ppo", "trainer.total_frames=2048",
         "trainer.progress_bar=false"],
        cwd=elsewhere, capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    (summary,) = elsewhere.glob("outputs/*/*/summary.json")
    assert json.loads(summary.read_text())["status"] == "completed"
    where = subprocess.run(
        [str(bin_dir / "python"), "-c", "import rlrun; print(rlrun.__file__)"],
        cwd=elsewhere, capture_output=True, text=True, env=env, check=True,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(site)), where.stdout  # the wheel's, not the clone
