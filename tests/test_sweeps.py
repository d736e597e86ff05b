"""Sweeps through the real ``rlrun -m`` console script: launchers, failures, Optuna search."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY, run_dirs, run_rlrun, summary


def sweep_jobs(root: Path) -> list[Path]:
    """Job folders of the single sweep under ``root/outputs/multirun``, by job number."""
    jobs = [d for d in run_dirs(root) if "multirun" in d.parts]
    return sorted(jobs, key=lambda d: int(d.name))


def test_joblib_sweep_runs_four_jobs(workdir: Path) -> None:
    # The basic launcher's 4-job sweep is checked in tests/test_report.py (its fixture).
    launcher = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
    run_rlrun("-m", "+experiment=ppo", *TINY, "seed=0,1,2,3", *launcher, cwd=workdir)
    jobs = sweep_jobs(workdir)
    assert [d.name for d in jobs] == ["0", "1", "2", "3"]
    assert len({d.parent for d in jobs}) == 1  # one sweep folder outputs/multirun/<date>/<time>
    for num, job in enumerate(jobs):
        assert summary(job)["status"] == "completed"
        assert summary(job)["frames"] == 1024
        assert f"seed={num}" in (job / ".hydra" / "overrides.yaml").read_text()
        assert (job / "csv" / "scalars" / "train" / "episode_return.csv").is_file()


def test_submitit_local_runs_two_jobs(workdir: Path) -> None:
    run_rlrun(
        "-m", "+experiment=ppo", *TINY, "seed=0,1", "hydra/launcher=submitit_local", cwd=workdir
    )
    jobs = sweep_jobs(workdir)
    assert [summary(d)["status"] for d in jobs] == ["completed", "completed"]
    assert (jobs[0].parent / ".submitit").is_dir()  # the jobs really went through submitit


def test_failed_job_does_not_sink_the_sweep(workdir: Path) -> None:
    # A user's hook makes the loss NaN in job 1 only, from its first minibatch on.
    poison = [
        "+hooks.poison._target_=faulty_hooks.ZeroStdAdvantages",
        "+hooks.poison.at=process_optim_batch",
        "+hooks.poison.after=1000,0,1000",
    ]
    tests = str(Path(__file__).parent)
    proc = run_rlrun(
        "-m", "+experiment=ppo", *TINY, *poison, cwd=workdir, check=False,
        env={"PYTHONPATH": tests},
    )  # fmt: skip
    assert proc.returncode != 0
    jobs = sweep_jobs(workdir)
    assert [summary(d)["status"] for d in jobs] == ["completed", "failed", "completed"]
    assert "loss_objective became NaN or inf" in summary(jobs[1])["error"]
    assert summary(jobs[2])["frames"] == 1024  # the job after the failure ran to the end
    assert "1 of 3 sweep jobs failed" in proc.stderr
    assert str(jobs[1]) in proc.stderr and "became NaN or inf" in proc.stderr


def test_optuna_search_continues_from_its_storage(workdir: Path) -> None:
    optuna = pytest.importorskip("optuna")
    search = ["-m", "+experiment=ppo", *TINY, "hparams_search=ppo_optuna"]
    search += ["hydra.sweeper.seed=0", "hydra.sweeper.pruner=none"]
    run_rlrun(*search, "hydra.sweeper.n_trials=4", cwd=workdir)
    db = workdir / "outputs" / "optuna" / "ppo_CartPole-v1.db"
    study = optuna.load_study(study_name="ppo_CartPole-v1", storage=f"sqlite:///{db}")
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 4
    for trial in study.trials:  # the objective is the job's summary.json value
        job = Path(trial.user_attrs["job_dir"])
        assert trial.value == pytest.approx(summary(job)["train_return_last"])
        assert f"optim.lr={trial.params['optim.lr']}" in (job / ".hydra/overrides.yaml").read_text()

    # Same storage, a bigger study, median pruning from the start: only 2 new trials run.
    more = ["hydra.sweeper.n_trials=6", "hydra.sweeper.pruner=median"]
    more += ["hydra.sweeper.pruner_startup_trials=1", "hydra.sweeper.pruner_warmup_frames=0"]
    proc = run_rlrun(*search, *more, cwd=workdir)
    assert "4 trials done, 2 to run" in proc.stderr + proc.stdout
    study = optuna.load_study(study_name="ppo_CartPole-v1", storage=f"sqlite:///{db}")
    assert len(study.trials) == 6
    for trial in study.trials[4:]:
        assert trial.state.name in ("COMPLETE", "PRUNED")
        assert trial.intermediate_values  # the job reported its returns to the study
        job = Path(trial.user_attrs["job_dir"])
        assert (
            summary(job)["status"]
            == {"COMPLETE": "completed", "PRUNED": "pruned"}[trial.state.name]
        )
    sweeps = {Path(t.user_attrs["job_dir"]).parent for t in study.trials}
    assert len(sweeps) == 2  # one sweep folder per invocation
    for sweep in sweeps:
        assert (sweep / "optimization_results.yaml").is_file()
