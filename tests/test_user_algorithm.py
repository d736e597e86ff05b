"""Your own algorithm by ``_target_`` (docs/guides/algorithms.md): ``examples/my_lab``'s SAC with
a fixed entropy temperature, declared outside rlrun and picked by ``examples/my_conf``'s YAML
files, goes through every command a shipped one does, in real ``rlrun`` processes, and is refused
in one line (exit 2, nothing on disk) where its declaration does not fit the run."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import torch
from conftest import EXAMPLES, csv_series, run_dirs, run_rlrun, summary
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
MY_CONF = EXAMPLES / "my_conf"
TARGET = "my_lab.algos.fixed_alpha_sac.ALGORITHM"
PRESET = ["--config-dir", str(MY_CONF), "+experiment=fixed_alpha_sac"]
# Two batches of 100 frames, the first random, on small networks: 100 optimisation steps
TINY = [
    "collector.frames_per_batch=100",
    "collector.init_random_frames=100",
    "policy.hidden_sizes=[32,32]",
    "replay_buffer.batch_size=32",
    "eval.episodes=2",
    "trainer.progress_bar=false",
]
# The preset's reference made tiny: 200 frames, a floor no Pendulum episode can be under
# (200 steps of at least -16.3 each), so any policy is above it
FLOOR = ["reference.frames=200", "reference.value=-3300", "reference.spread=0"]
LINE = re.compile(
    r"Pendulum-v1 at (\d+) frames: ([-\d.]+), 95% CI \[([-\d.]+), ([-\d.]+)\] over (\d) seeds; "
    r".*: (above|within|below)$",
    re.MULTILINE,
)


def user_path(*more: Path) -> dict[str, str]:
    """PYTHONPATH as a user sets it: their package's folder (and ``more``) only."""
    return {"PYTHONPATH": os.pathsep.join(str(p) for p in (EXAMPLES, *more))}


def test_own_algorithm_is_checked_resumed_evaluated_and_exported(workdir: Path) -> None:
    # rlrun check trains the preset as a sweep of 2 seeds (rlrun -m ... seed=0,1), gates it
    proc = run_rlrun("check", *PRESET, "seeds=2", *FLOOR, *TINY, cwd=workdir, env=user_path())
    sweep_line = proc.stdout.splitlines()[0]
    assert sweep_line.startswith(f"rlrun check: rlrun -m --config-dir {MY_CONF} "), sweep_line
    assert "seed=0,1 trainer.total_frames=200" in sweep_line
    found = LINE.search(proc.stdout)
    assert found, proc.stdout
    assert found.group(1, 5, 6) == ("200", "2", "above")
    jobs = run_dirs(workdir)
    assert [j.name for j in jobs] == ["0", "1"]
    for job in jobs:
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == 200
        assert OmegaConf.load(job / ".hydra/config.yaml").algo._target_ == TARGET
        # the algorithm's own behaviour: its temperature stays at algo.alpha while it learns
        assert {round(a, 6) for _, a in csv_series(job, "train/alpha")} == {0.2}
        assert csv_series(job, "train/loss_qvalue")
    returns = [summary(j)["eval_return_last"] for j in jobs]
    assert returns[0] != returns[1]  # two seeds, two runs

    # the same runs against a ceiling no Pendulum episode reaches: below, exit 1, no training
    sweep = jobs[0].parent
    proc = run_rlrun("check", str(sweep), "reference.value=0", cwd=workdir, check=False)
    assert proc.returncode == 1, proc.stderr
    assert LINE.search(proc.stdout).group(6) == "below"
    assert run_dirs(workdir) == jobs

    # train seed 0 on: its saved command line, its --config-dir, and 100 more frames
    job = jobs[0]
    proc = run_rlrun(f"resume={job}", "trainer.total_frames=300", cwd=workdir, env=user_path())
    assert f"resumed from {job}/checkpoints/checkpoint-000000000200" in proc.stdout + proc.stderr
    assert summary(job)["status"] == "completed" and summary(job)["frames"] == 300
    assert [f for f, _ in csv_series(job, "train/alpha")][-1] == 300

    # evaluate and export it: the policy is rebuilt from the saved config (algo._target_)
    run_rlrun("eval", str(job), "episodes=2", "max_steps=50", cwd=workdir, env=user_path())
    (folder,) = (job / "eval").iterdir()
    result = json.loads((folder / "eval.json").read_text())
    assert result["episodes"] == 2 and result["frames"] == 300
    proc = run_rlrun("export", str(job), "format=torchscript", cwd=workdir, env=user_path())
    assert "verified on 128 real observations" in proc.stdout
    specs = json.loads((job / "export" / "policy.pt.json").read_text())
    assert specs["action"] == {"shape": [1], "encoding": "continuous", "low": -2.0, "high": 2.0}
    exported = torch.jit.load(str(job / "export" / "policy.pt"))
    with torch.no_grad():
        action = exported(torch.tensor([[1.0, 0.0, 0.5]]))
    assert action.shape == (1, 1) and -2.0 <= float(action) <= 2.0


ON_POLICY = """
import dataclasses
from rlrun.algorithms import Data
from my_lab.algos.fixed_alpha_sac import ALGORITHM as OFF_POLICY
ALGORITHM = dataclasses.replace(OFF_POLICY, data=Data.ON_POLICY)
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["algo=typo"], "algo.alpah: Key 'alpah' not in 'FixedAlphaSACConfig' (algo._target_="
                        f"{TARGET} takes the keys of FixedAlphaSACConfig)"),
        (["algo.alpha=0"], "algo.alpha=0.0 is out of range: it must be > 0."),
        (["env=cartpole"], "algo=fixed_alpha_sac needs a Box action space, but "
                           "env.id=CartPole-v1 has a Discrete one"),
        (["algo._target_=my_lab.algos.fixed_alpha_sac.build"],
         "algo._target_=my_lab.algos.fixed_alpha_sac.build is a function, not an algorithm"),
        (["algo._target_=on_policy_sac.ALGORITHM"],
         "collector.init_random_frames=1000: algo=fixed_alpha_sac learns on-policy"),
    ],
    ids=["yaml-typo", "range", "action-space", "not-an-algorithm", "on-policy-random-frames"],
)  # fmt: skip
def test_what_the_declaration_rules_out_is_refused_in_one_line(
    workdir: Path, args: list[str], message: str
) -> None:
    # the user's config dir with one more algo option, a misspelt key in it; and a declaration
    # of theirs that says on-policy
    conf = workdir / "my_conf"
    shutil.copytree(MY_CONF, conf)
    typo = (conf / "algo/fixed_alpha_sac.yaml").read_text().replace("alpha: 0.2", "alpah: 0.2")
    assert "alpah: 0.2" in typo
    (conf / "algo/typo.yaml").write_text(typo)
    (workdir / "lib").mkdir()
    (workdir / "lib/on_policy_sac.py").write_text(ON_POLICY)
    run_in = workdir / "run"
    run_in.mkdir()
    proc = run_rlrun(
        "--config-dir", str(conf), "+experiment=fixed_alpha_sac", *args,
        cwd=run_in, check=False, env=user_path(workdir / "lib"),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("rlrun: error: ") and message in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert list(run_in.iterdir()) == []
