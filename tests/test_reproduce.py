"""Runs that say how to reproduce them (issue #33): ``environment.json`` in the run folder, and
``rlrun reproduce RUN`` starting the same run in a new folder and comparing."""

from __future__ import annotations

import json

from conftest import TINY, run_rlrun


def test_a_deterministic_run_reproduces_and_a_changed_one_is_told(workdir) -> None:
    run = workdir / "runs" / "a"
    run_rlrun("+experiment=ppo", "deterministic=true", "seed=3", *TINY, f"hydra.run.dir={run}",
              cwd=workdir)  # fmt: skip
    (start,) = json.loads((run / "environment.json").read_text())["starts"]
    assert start["command"].startswith("rlrun +experiment=ppo deterministic=true seed=3 ")
    assert start["seed"] == 3 and start["deterministic"] is True
    assert start["packages"]["torch"] and start["packages"]["torchrl"] == "0.14.1"
    assert start["host"]["cpu"] and start["host"]["cpus"] >= 1 and start["python"]

    proc = run_rlrun("reproduce", str(run), cwd=workdir)
    assert "rlrun reproduce: environment the same" in proc.stdout
    assert "rlrun reproduce: metrics match (" in proc.stdout
    (new,) = [p for p in (workdir / "outputs").glob("*/*") if p.is_dir()]
    assert json.loads((new / "environment.json").read_text())["starts"][0]["seed"] == 3

    proc = run_rlrun("reproduce", str(run), "optim.lr=0.01", cwd=workdir, check=False)
    assert proc.returncode == 1 and "rlrun reproduce: metrics differ: " in proc.stdout
    assert "train/loss_objective.csv" in proc.stdout


def test_reproduce_wants_a_run_folder(workdir) -> None:
    proc = run_rlrun("reproduce", str(workdir), cwd=workdir, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "not a run folder" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
