"""``rlrun check``: a preset trained at its reference's frames over seeds, then gated on its
published reference; ``rlrun report`` puts the same line in its report (issue #33, item 2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_rlrun

# The ppo preset's reference made tiny: 2 batches, a floor of 5 that any policy clears
TINY_REFERENCE = ["reference.frames=1024", "reference.value=10", "reference.spread=5"]
LINE = re.compile(
    r"CartPole-v1 at (\d+) frames: ([-\d.]+), 95% CI \[([-\d.]+), ([-\d.]+)\] over (\d) seeds; "
    r"rl-baselines3-zoo benchmark\.md \(commit \w+\): (\S+) ± (\S+): (\w+)"
)


@pytest.mark.xdist_group("check")
def test_check_passes_then_fails_against_a_tiny_reference(workdir: Path) -> None:
    # through a Hydra launcher other than the basic one
    args = ["+experiment=ppo", "seeds=2", *TINY_REFERENCE, "hydra/launcher=joblib"]
    proc = run_rlrun("check", *args, "trainer.progress_bar=false", cwd=workdir)
    (sweep,) = (workdir / "outputs" / "multirun").glob("*/*")
    found = LINE.search(proc.stdout)
    assert found, proc.stdout
    frames, iqm, low, high, seeds, value, spread, verdict = found.groups()
    assert (frames, seeds, value, spread, verdict) == ("1024", "2", "10", "5", "above")
    # one evaluation at the end (the reference's metric is eval_return): its IQM over 2 seeds
    evals = [json.loads((sweep / j / "summary.json").read_text())["eval_return_last"]
             for j in ("0", "1")]  # fmt: skip
    assert float(iqm) == pytest.approx(sum(evals) / 2, rel=1e-3)
    assert float(low) <= float(iqm) <= float(high)
    assert "## Reference" in (sweep / "report.md").read_text()

    # the same runs against a floor of 995: below, exit status 1, no training
    proc = run_rlrun("check", str(sweep), "reference.value=1000", cwd=workdir, check=False)
    assert proc.returncode == 1, proc.stderr
    assert LINE.search(proc.stdout).group(8) == "below"
    assert len(list(sweep.glob("[0-9]*"))) == 2


@pytest.mark.xdist_group("check")
def test_check_refuses_what_it_cannot_check(workdir: Path) -> None:
    proc = run_rlrun("check", "env=pendulum", cwd=workdir, check=False)
    assert proc.returncode == 2
    assert "no reference to check against" in proc.stderr and "+experiment=sac" in proc.stderr
    proc = run_rlrun("check", "+experiment=ppo", "seed=3", cwd=workdir, check=False)
    assert proc.returncode == 2 and "seeds=N" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (workdir / "outputs").exists()
