"""``rlrun eval``, ``rlrun.load`` and ``python -m rlrun`` on real runs trained by the console
script (rlrun/commands/eval.py, rlrun/commands/loading.py, rlrun/__main__.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY, run_dirs, run_rlrun, summary

pytestmark = pytest.mark.xdist_group("playback")  # the module's runs are trained once


def python_m_rlrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "WANDB_MODE": "offline"}
    return subprocess.run(
        [sys.executable, "-m", "rlrun", *args], cwd=cwd, capture_output=True, text=True, env=env
    )


def files_of(run: Path) -> dict[str, str]:
    """Every file of a run folder but its eval/ folders, with its SHA-256."""
    return {
        str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(run.rglob("*"))
        if p.is_file() and "eval" not in p.relative_to(run).parts[:1]
    }


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory) -> Path:
    """A short PPO run with one in-run evaluation (5 episodes) at its last batch."""
    root = tmp_path_factory.mktemp("ppo")
    run_rlrun("+experiment=ppo", *TINY, "eval=default", "eval.every_frames=1024", cwd=root)
    return run_dirs(root)[0]


def test_eval_reproduces_the_in_run_evaluation(ppo_run: Path) -> None:
    before = files_of(ppo_run)
    proc = run_rlrun("eval", str(ppo_run), "episodes=5", "video=true", cwd=ppo_run.parent)
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2, proc.stdout
    assert "checkpoint-000000001024 (1024 frames) on CartPole-v1" in lines[0]
    assert " ± " in lines[1] and "over 5 episodes" in lines[1]
    (folder,) = (ppo_run / "eval").iterdir()
    result = json.loads((folder / "eval.json").read_text())
    # the same weights, the same deterministic actions and the same env seed as the evaluation
    # the run made after its last batch: the same episodes
    assert result["return_mean"] == pytest.approx(summary(ppo_run)["eval_return_last"], abs=1e-4)
    assert len(result["returns"]) == 5 and result["episodes"] == 5
    assert result["checkpoint"].endswith("checkpoint-000000001024") and result["frames"] == 1024
    from moviepy import VideoFileClip

    with VideoFileClip(str(folder / "episode.mp4")) as clip:
        frames = list(clip.iter_frames())
    assert len(frames) >= 8 and frames[0].ndim == 3  # CartPole lasts 8+ steps; [h, w, rgb]
    assert files_of(ppo_run) == before  # training files untouched


def test_eval_of_another_checkpoint_and_env_variant(ppo_run: Path) -> None:
    proc = run_rlrun(
        "eval", str(ppo_run), "checkpoint=best", "episodes=3", "env.max_episode_steps=20",
        "seed=7", cwd=ppo_run.parent,
    )  # fmt: skip
    assert "best" in proc.stdout
    newest = max((ppo_run / "eval").iterdir())
    result = json.loads((newest / "eval.json").read_text())
    assert result["checkpoint"].endswith("best") and result["env_seed"] == 8
    assert max(result["lengths"]) <= 20


def test_a_gpu_run_evaluates_on_the_cpu_with_device_cpu(ppo_run: Path, tmp_path: Path) -> None:
    """A run whose config says device=cuda (as one trained on a GPU): refused here without a
    GPU by rlrun/builders/devices.py's rule, evaluated with device=cpu. (No GPU on this machine: the
    checkpoint's tensors were saved on the CPU.)"""
    import shutil

    run = tmp_path / "gpu_run"
    shutil.copytree(ppo_run, run, ignore=shutil.ignore_patterns("eval"))
    config = run / ".hydra" / "config.yaml"
    text = config.read_text().replace("device: cpu", "device: cuda")
    config.write_text(text.replace("collector:\n  device: null", "collector:\n  device: cuda"))
    refused = run_rlrun("eval", str(run), cwd=tmp_path, check=False)
    assert refused.returncode == 2 and "use device=cpu" in refused.stderr
    proc = run_rlrun("eval", str(run), "device=cpu", "episodes=2", cwd=tmp_path)
    assert "device cpu" in proc.stdout


def test_load_acts_on_tensordicts_and_tensors(ppo_run: Path) -> None:
    import torch

    import rlrun

    policy = rlrun.load(ppo_run)
    assert policy.frames == 1024 and policy.checkpoint.name == "checkpoint-000000001024"
    env = policy.make_env(num_envs=3)
    td = policy(env.reset())
    actions = policy(td["observation"])
    assert actions.shape == (3, 2) and torch.equal(actions, td["action"])
    assert rlrun.load(ppo_run, checkpoint="best").checkpoint.name == "best"


def test_python_m_rlrun_is_the_console_script(tmp_path: Path) -> None:
    """``python -m rlrun`` prints the same help, and runs a sweep as ``rlrun -m`` does; then
    ``rlrun eval`` on the sweep folder evaluates each job, one line each."""
    proc = python_m_rlrun("--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout == run_rlrun("--help", cwd=tmp_path).stdout
    sweep = python_m_rlrun("-m", "+experiment=ppo", *TINY, "seed=0,1", cwd=tmp_path)
    assert sweep.returncode == 0, sweep.stderr
    jobs = run_dirs(tmp_path)
    assert [summary(j)["status"] for j in jobs] == ["completed", "completed"]
    proc = run_rlrun("eval", str(jobs[0].parent), "episodes=2", cwd=tmp_path)
    lines = proc.stdout.strip().splitlines()
    assert [line.split(":")[1].strip() for line in lines] == ["0", "1"]
    assert all((job / "eval").is_dir() for job in jobs)
    one_job = run_rlrun("eval", str(jobs[1]), "episodes=2", cwd=tmp_path).stdout
    assert len(one_job.strip().splitlines()) == 2 and "over 2 episodes" in one_job


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "{tmp}"], "not a run folder"),
        (["eval", "{run}", "episodes=0"], "episodes=0 must be a whole number >= 1"),
        (["eval", "{run}", "env.obs_mask=[0,2]"], "does not fit checkpoint-000000001024"),
        (["eval", "{run}", "env.idd=Acrobot-v1"], "env.idd is not a key of this run's config"),
        (["eval", "{run}", "checkpoint=step_5"], "checkpoint=step_5: no such checkpoint"),
        (["eval", "{bare}"], "no checkpoint in checkpoints/"),
        (["eval", "{damaged}"], "no intact checkpoint: checkpoint-000000001024: "),
        (["eval", "{damaged}", "checkpoint=step_1024"], "damaged checkpoint"),
        (["eval", "{old}"], "no env.normalize_observations (saved by an older rlrun); give it"),
        (["eval", "{cut}"], "config.yaml cannot be read ("),
        (["export", "{cut}", "format=torchscript"], "the folder's saved config is damaged"),
        (["{cut_resume}"], "overrides.yaml cannot be read"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(
    ppo_run: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    import shutil

    bare, damaged, old = tmp_path / "bare", tmp_path / "damaged", tmp_path / "old"
    shutil.copytree(ppo_run, bare, ignore=shutil.ignore_patterns("eval", "checkpoints"))
    shutil.copytree(ppo_run, damaged, ignore=shutil.ignore_patterns("eval"))
    weights = damaged / "checkpoints" / "checkpoint-000000001024" / "components" / "0004-policy"
    first = sorted((weights / "state").glob("*.memmap"))[0]
    first.write_bytes(first.read_bytes()[:-4])  # truncated
    shutil.copytree(ppo_run, old, ignore=shutil.ignore_patterns("eval"))
    config = old / ".hydra" / "config.yaml"  # as a run saved before that key existed
    config.write_text(config.read_text().replace("  normalize_observations: false\n", ""))
    cut = tmp_path / "cut"  # its saved config and overrides cut short (a copy interrupted)
    shutil.copytree(ppo_run, cut, ignore=shutil.ignore_patterns("eval"))
    for saved in (cut / ".hydra" / "config.yaml", cut / ".hydra" / "overrides.yaml"):
        saved.write_text(saved.read_text()[: len(saved.read_text()) // 2] + '\n- ["unclosed')
    folders = {"tmp": tmp_path, "run": ppo_run, "bare": bare, "damaged": damaged, "old": old,
               "cut": cut, "cut_resume": f"resume={cut}"}  # fmt: skip
    before = {name: files_of(path) for name, path in folders.items() if name != "cut_resume"}
    proc = run_rlrun(*(a.format(**folders) for a in args), cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("rlrun: error: ") and message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("rlrun")]) == 1
    assert {
        name: files_of(path) for name, path in folders.items() if name != "cut_resume"
    } == before
    assert not any((path / "eval").exists() for path in (bare, damaged, old, cut))
