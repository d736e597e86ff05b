"""The console script as a user meets it: help, printed config, and short errors for mistakes."""

from __future__ import annotations

import time

import pytest
from conftest import run_rlrun


def test_help_lists_groups_fast(workdir):
    start = time.perf_counter()
    proc = run_rlrun("--help", cwd=workdir)
    elapsed = time.perf_counter() - start
    assert "Config groups" in proc.stdout
    assert "cartpole_masked" in proc.stdout and "experiment:" in proc.stdout
    assert elapsed < 10  # generous for a loaded CI box; the benchmark tracks the real figure


def test_cfg_job_prints_composed_config(workdir):
    proc = run_rlrun("+experiment=ppo", "--cfg", "job", cwd=workdir)
    assert "total_frames: 150000" in proc.stdout
    assert "clip_epsilon: 0.2" in proc.stdout
    assert not (workdir / "outputs").exists() or not list((workdir / "outputs").rglob("*.json"))


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("env=cartpol", "choose one of: cartpole, cartpole_masked, pendulum"),
        ("trainer.total_frame=10", "Did you mean trainer.total_frames?"),
        ("trainer.total_frames=abc", "could not be converted to Integer"),
        ("env.id=CartPol-v1", "Nearest ids: CartPole-v1"),
        ("device=cuda", "use device=cpu"),
        ("+experiment=pp", "Did you mean experiment=ppo?"),
    ],
)
def test_bad_input_is_one_short_error(workdir, override, expected):
    proc = run_rlrun(override, "trainer.total_frames=512", cwd=workdir, check=False)
    if override == "device=cuda" and proc.returncode == 0:
        pytest.skip("this machine has CUDA")
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 2
