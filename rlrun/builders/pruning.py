"""Optuna pruning from inside a sweep job: a weak trial stops early instead of using its budget.

Under ``hydra/sweeper=rlrun_optuna`` with a pruner, the sweeper puts the trial number in the job's
environment; after each batch the job reports its training return (at its frame count) to that
trial through the study's storage, and raises ``optuna.TrialPruned`` when the pruner says so.
optuna is imported only in such a job (it is an optional extra).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torchrl.trainers import Trainer

    from rlrun.builders.hooks import EpisodeStats

TRIAL_ENV = "RLRUN_OPTUNA_TRIAL"  # set per job by the sweeper through hydra.job.env_set
PRUNERS = ("none", "median")


def is_pruned(error: BaseException | None) -> bool:
    """True for the ``optuna.TrialPruned`` a pruned job ends with (checked without optuna)."""
    return type(error).__name__ == "TrialPruned"


def make_pruner(sweeper: Any) -> Any:
    """The same pruner for the sweeper's study and for each job's view of it, from the
    ``hydra.sweeper`` config node."""
    import optuna

    if sweeper.pruner == "median":
        return optuna.pruners.MedianPruner(
            n_startup_trials=sweeper.pruner_startup_trials,
            n_warmup_steps=sweeper.pruner_warmup_frames,
        )
    return optuna.pruners.NopPruner()


class OptunaPruning:
    """``post_steps`` hook: report the latest training return, stop the job if pruned."""

    def __init__(self, trial: Any, stats: EpisodeStats) -> None:
        self.trial, self.stats = trial, stats

    def __call__(self) -> None:
        import optuna

        frames = self.stats.trainer.collected_frames
        if self.stats.return_last is None:
            return
        self.trial.report(self.stats.return_last, step=frames)
        if self.trial.should_prune():
            raise optuna.TrialPruned(
                f"trial {self.trial.number} pruned at {frames} frames "
                f"(return {self.stats.return_last:.4g})"
            )


def register_pruning(trainer: Trainer, stats: EpisodeStats) -> None:
    """Hook pruning into the trainer when this job is a trial of a pruned Optuna study."""
    from hydra.core.hydra_config import HydraConfig

    number = os.environ.get(TRIAL_ENV)
    sweeper = HydraConfig.get().sweeper
    if number is None or sweeper.get("pruner", "none") == "none":
        return
    import optuna

    storage = optuna.storages.get_storage(sweeper.storage)
    study = optuna.load_study(
        study_name=sweeper.study_name,
        storage=storage,
        pruner=make_pruner(sweeper),
    )
    study_id = storage.get_study_id_from_name(sweeper.study_name)
    trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, int(number))
    trainer.register_op("post_steps", OptunaPruning(optuna.Trial(study, trial_id), stats))
