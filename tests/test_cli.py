"""The console script as a user meets it: help, printed config, and short errors for mistakes."""

from __future__ import annotations

import time

import pytest
from conftest import TINY, compose, run_dirs, run_rlrun, summary


def test_help_lists_groups_fast(workdir):
    start = time.perf_counter()
    proc = run_rlrun("--help", cwd=workdir)
    elapsed = time.perf_counter() - start
    assert "Config groups" in proc.stdout
    assert "cartpole_masked" in proc.stdout and "experiment:" in proc.stdout
    assert elapsed < 10  # generous for a loaded CI box; the benchmark tracks the real figure


def test_help_lists_each_algorithm_and_version_names_the_stack(workdir):
    """``rlrun --help`` reads every algorithm's declaration; ``--version`` the installed stack."""
    from importlib.metadata import version

    from rlrun.algorithms import shipped

    help_text = run_rlrun("--help", cwd=workdir).stdout
    for name, algorithm in shipped().items():
        assert f"  {name + ':':17s} {algorithm.summary}" in help_text
    line = run_rlrun("--version", cwd=workdir).stdout.strip()
    assert line.startswith(f"rlrun {version('rlrun')} (torchrl {version('torchrl')}, ")
    assert f"torch {version('torch')}" in line


def test_cfg_job_prints_composed_config(workdir):
    proc = run_rlrun("+experiment=ppo", "--cfg", "job", cwd=workdir)
    assert "total_frames: 100000" in proc.stdout
    assert "clip_epsilon: 0.2" in proc.stdout
    assert not (workdir / "outputs").exists() or not list((workdir / "outputs").rglob("*.json"))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        (
            "env=cartpol",
            "choose one of: ant, atari, breakout, cartpole, cartpole_masked, halfcheetah,",
        ),
        ("trainer.total_frame=10", "Did you mean trainer.total_frames?"),
        ("trainer.total_frames=abc", "could not be converted to Integer"),
        ("env.id=CartPol-v1", "Nearest ids: CartPole-v1"),
        ("device=cuda", "use device=cpu"),
        ("+experiment=pp", "Did you mean experiment=ppo?"),
        ("-m --cfg job", "-m (a sweep) and --cfg, --info or --shell-completion cannot go"),
    ],
)
def test_bad_input_is_one_short_error(workdir, override, expected):
    proc = run_rlrun(*override.split(), "trainer.total_frames=512", cwd=workdir, check=False)
    if override == "device=cuda" and proc.returncode == 0:
        pytest.skip("this machine has CUDA")
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2


def test_built_wheel_ships_the_config_tree(tmp_path):
    """A non-editable install (the wheel) composes configs from inside the package."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", tmp_path / "whl", repo], check=True)
    (wheel,) = (tmp_path / "whl").glob("rlrun-*.whl")
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--target", site, wheel], check=True)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rlrun.cli",
            "+experiment=ppo",
            "env=cartpole_masked",
            "--cfg",
            "job",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "obs_mask:" in proc.stdout
    probe = "import rlrun; print(rlrun.__file__)"
    where = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(site))


def test_a_run_says_where_it_is_and_ends_with_a_summary(workdir, monkeypatch):
    """A run names its folder and ends with a summary line; Hydra ran, and recorded, the config
    the console script composed and checked (composed once: ``known_config`` in
    rlrun/compat/hydra.py): Hydra's own composition of the same command line gives the
    ``hydra.yaml`` the run saved."""
    from omegaconf import OmegaConf

    proc = run_rlrun("+experiment=ppo", *TINY, cwd=workdir)
    lines = proc.stdout.strip().splitlines()
    (run_dir,) = run_dirs(workdir)
    where = str(run_dir.relative_to(workdir))
    assert f"rlrun: run folder {where}" in lines
    done = summary(run_dir)
    assert lines[-2].startswith(f"rlrun: completed: {done['frames']} frames in ")
    assert f"train return last {done['train_return_last']:.4g}" in lines[-2]
    assert lines[-1].startswith(f"rlrun: report: rlrun report {where}  (train on: rlrun resume=")

    saved = OmegaConf.to_container(OmegaConf.load(run_dir / ".hydra" / "hydra.yaml").hydra)
    monkeypatch.chdir(workdir)
    own = compose("+experiment=ppo", *TINY, f"hydra.run.dir={where}", "hydra.mode=RUN",
                  job_name="cli")  # fmt: skip
    own = OmegaConf.to_container(own.hydra, enum_to_str=True)
    assert own["runtime"].pop("output_dir") == "???"  # Hydra's run_job sets it
    assert saved["runtime"].pop("output_dir") == str(run_dir)
    assert saved == own


def test_without_a_terminal_progress_is_plain_lines(workdir) -> None:
    """stderr is a pipe here, as under SLURM or nohup: no tqdm redraws (carriage returns) in
    the log, a plain progress line after a batch instead, at most one per progress_every_s."""
    import re

    args = [a for a in TINY if a != "trainer.progress_bar=false"]
    proc = run_rlrun("+experiment=ppo", *args, "trainer.progress_every_s=0", cwd=workdir)
    assert "\r" not in proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("rlrun: progress: ")]
    pattern = r"rlrun: progress: (\d+)/1024 frames \(\d+%\), \d+ frames/s, return \S+, ETA \S+"
    assert [int(re.fullmatch(pattern, line)[1]) for line in lines] == [512, 1024], lines


def test_runs_started_together_get_folders_of_their_own(workdir) -> None:
    """Two runs started in the same second (two terminals, a SLURM array) with the default
    folders: each trains into its own, named by start time and a random tag (issue #35)."""
    import re
    from concurrent.futures import ThreadPoolExecutor

    args = ["+experiment=ppo", "trainer.total_frames=256", "collector.frames_per_batch=256",
            "algo.minibatch_size=128", "algo.epochs=1", "trainer.progress_bar=false",
            "checkpoint.backend=none"]  # fmt: skip
    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(lambda _: run_rlrun(*args, cwd=workdir, check=False), range(2)))
    assert [p.returncode for p in procs] == [0, 0], [p.stderr[-2000:] for p in procs]
    runs = run_dirs(workdir)
    assert len(runs) == 2 and runs[0] != runs[1]
    assert all(re.fullmatch(r"\d\d-\d\d-\d\d-[0-9a-f]{6}", run.name) for run in runs), runs
    assert all(summary(run)["frames"] == 256 for run in runs)


def test_a_fresh_run_into_a_used_folder_is_refused_and_changes_nothing(workdir) -> None:
    """``hydra.run.dir`` of a finished run, without ``resume=``: one line naming the fix, exit 2,
    and the old run's files untouched (issue #35)."""
    args = ["+experiment=ppo", "trainer.total_frames=256", "collector.frames_per_batch=256",
            "algo.minibatch_size=128", "algo.epochs=1", "trainer.progress_bar=false",
            "hydra.run.dir=runs/a"]  # fmt: skip
    run_rlrun(*args, cwd=workdir)
    run = workdir / "runs" / "a"
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    proc = run_rlrun(*args, cwd=workdir, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == (
        "rlrun: error: runs/a holds a run already: completed at 256 frames; continue it with "
        "rlrun resume=runs/a, or give a new run another folder (hydra.run.dir). Nothing there "
        "was changed."
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
