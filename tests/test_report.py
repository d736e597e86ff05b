"""``rlrun report`` on a real sweep: its tables must agree with the jobs' summary.json files."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest
from conftest import TINY, run_dirs, run_rlrun, summary

pytestmark = pytest.mark.xdist_group("report")  # one worker builds the sweep once


@pytest.fixture(scope="session")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2 learning rates x 2 seeds, one after another. Session scope: built once even when xdist
    runs other modules' tests between this module's tests on the same worker."""
    root = tmp_path_factory.mktemp("report")
    run_rlrun("-m", "+experiment=ppo", *TINY, "optim.lr=1e-3,3e-4", "seed=0,1", cwd=root)
    (sweep_dir,) = {d.parent for d in run_dirs(root)}
    return sweep_dir


def read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_basic_sweep_writes_complete_run_folders(sweep: Path) -> None:
    jobs = sorted(d for d in sweep.iterdir() if d.is_dir())
    assert [d.name for d in jobs] == ["0", "1", "2", "3"]
    assert (sweep / "multirun.yaml").is_file()
    for job in jobs:
        assert summary(job)["status"] == "completed"
        assert summary(job)["frames"] == 1024
        assert (job / ".hydra" / "config.yaml").is_file()
        assert (job / "csv" / "scalars" / "train" / "episode_return.csv").is_file()


def test_report_of_a_sweep(sweep: Path) -> None:
    proc = run_rlrun("report", str(sweep), cwd=sweep)
    assert "| optim.lr=0.001 |" in proc.stdout  # the settings table, printed

    jobs = read_csv(sweep / "jobs.csv")
    assert [r["job"] for r in jobs] == ["0", "1", "2", "3"]
    for row in jobs:
        expected = summary(sweep / row["job"])
        assert float(row["train_return_last"]) == pytest.approx(expected["train_return_last"])
        assert float(row["train_return_best"]) == pytest.approx(expected["train_return_best"])
        assert float(row["fps"]) == pytest.approx(expected["fps"])
        assert int(row["frames"]) == expected["frames"] == 1024
        assert row["status"] == "completed"

    settings = {r["setting"]: r for r in read_csv(sweep / "settings.csv")}
    assert set(settings) == {"optim.lr=0.001", "optim.lr=0.0003"}
    for name, row in settings.items():
        finals = [
            summary(sweep / r["job"])["train_return_last"] for r in jobs if r["setting"] == name
        ]
        assert int(row["jobs"]) == len(finals) == 2  # the two seeds
        assert float(row["final_mean"]) == pytest.approx(statistics.fmean(finals))
        assert float(row["final_std"]) == pytest.approx(statistics.pstdev(finals))

    assert (sweep / "report.md").read_text().count("optim.lr=0.001") >= 3  # 2 jobs + 1 setting
    assert (sweep / "returns.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_intervals_are_rliables(sweep: Path) -> None:
    """The statistics (rliable's IQM, mean, median and optimality gap with stratified bootstrap
    intervals; the probability of improvement) against the same computation made here."""
    import numpy as np
    from rliable import library as rly
    from rliable import metrics

    run_rlrun("report", str(sweep), cwd=sweep)
    jobs = read_csv(sweep / "jobs.csv")
    scores = {
        name: np.array([[float(r["train_return_last"])] for r in jobs if r["setting"] == name])
        for name in ("optim.lr=0.001", "optim.lr=0.0003")
    }

    def aggregates(x: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_mean(x),
                         metrics.aggregate_median(x),
                         metrics.aggregate_optimality_gap(x, gamma=475.0)])  # fmt: skip

    def estimates(data: dict, func) -> tuple[dict, dict]:
        state = np.random.RandomState(0)
        return rly.get_interval_estimates(data, func, reps=2000, random_state=state)

    points, intervals = estimates(scores, aggregates)
    rows = {r["setting"]: r for r in read_csv(sweep / "statistics.csv")}
    for name in scores:
        for i, key in enumerate(["iqm", "mean", "median", "optimality_gap"]):
            assert float(rows[name][key]) == pytest.approx(points[name][i]), key
            assert float(rows[name][f"{key}_low"]) == pytest.approx(intervals[name][0, i]), key
            assert float(rows[name][f"{key}_high"]) == pytest.approx(intervals[name][1, i]), key
        assert intervals[name][0, 0] <= points[name][0] <= intervals[name][1, 0]

    fast, slow = scores["optim.lr=0.001"], scores["optim.lr=0.0003"]
    pair = {"x": (fast, slow)}
    point, interval = estimates(pair, metrics.probability_of_improvement)
    (row,) = [r for r in read_csv(sweep / "improvement.csv") if r["comparison"].startswith(
        "optim.lr=0.001 >")]  # fmt: skip
    assert float(row["probability"]) == pytest.approx(float(np.ravel(point["x"])[0]))
    assert float(row["low"]) == pytest.approx(float(np.ravel(interval["x"])[0]))
    report = (sweep / "report.md").read_text()
    assert "## Statistics" in report and "CartPole-v1's reward_threshold 475" in report
    for png in ("sample_efficiency.png", "performance_profile.png"):
        assert (sweep / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_of_a_single_run(sweep: Path) -> None:
    run = sweep / "2"
    run_rlrun("report", str(run), cwd=run)
    (row,) = read_csv(run / "jobs.csv")
    assert row["job"] == "."
    assert float(row["train_return_last"]) == pytest.approx(summary(run)["train_return_last"])
    assert (run / "returns.png").is_file()


def test_report_of_a_folder_without_runs(tmp_path: Path) -> None:
    proc = run_rlrun("report", str(tmp_path), cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "no run folder" in proc.stderr


def test_a_resumed_job_keeps_its_setting(sweep: Path, tmp_path: Path) -> None:
    """``resume=<job>`` (added by ``rlrun resume=<sweep>``) is not part of a job's setting."""
    import shutil

    import yaml

    from rlrun.commands.report import group_by_setting, read_job

    resumed = tmp_path / "1"
    shutil.copytree(sweep / "1", resumed)
    overrides = resumed / ".hydra" / "overrides.yaml"
    saved = yaml.safe_load(overrides.read_text())
    overrides.write_text(yaml.safe_dump([*saved, f"resume={sweep / '1'}"]))
    jobs = [read_job(sweep / "0", "episode_return"), read_job(resumed, "episode_return")]
    assert jobs[1].overrides == saved
    (setting,) = group_by_setting(jobs)  # jobs 0 and 1 differ by their seed only
    assert len(setting.jobs) == 2
