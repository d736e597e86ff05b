"""An Optuna search through the real ``rlrun -m`` console script, continued from its storage.
Launchers and failed jobs: tests/test_killed_jobs.py (basic, joblib, submitit_local),
tests/test_ray_launcher.py, tests/test_resume_sweeps.py; a sweep's report: tests/test_report.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import TINY, run_rlrun, summary


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
