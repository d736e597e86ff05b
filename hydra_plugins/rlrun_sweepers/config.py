"""Configs of rlrun's sweepers, stored in Hydra's ConfigStore group ``hydra/sweeper``."""

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore


@dataclass
class BasicSweeperConf:
    """Hydra's basic sweeper (cartesian product of the ``a=1,2`` overrides)."""

    _target_: str = "hydra_plugins.rlrun_sweepers.basic_sweeper.BasicSweeper"
    max_batch_size: int | None = None  # jobs per launch; null: all at once (all of them run)
    params: dict[str, str] | None = None  # extra sweep overrides, as on the command line


@dataclass
class OptunaSweeperConf:
    """Optuna search over rlrun keys: one job per trial, the objective read from summary.json."""

    _target_: str = "hydra_plugins.rlrun_sweepers.optuna_sweeper.OptunaSweeper"
    study_name: str = "rlrun"
    storage: str | None = None  # e.g. sqlite:///outputs/optuna/ppo.db; null: in memory
    direction: str = "maximize"  # maximize | minimize
    n_trials: int = 20  # size of the study; a new invocation runs only the missing trials
    n_jobs: int = 1  # trials launched together (in parallel with a parallel launcher)
    objective: str = "train_return_last"  # summary.json key, e.g. eval_return_last
    sampler: str = "tpe"  # tpe | random
    seed: int | None = None  # sampler seed
    pruner: str = "none"  # none | median (stops weak trials using their training return)
    pruner_startup_trials: int = 5  # median pruner: trials that always run to the end first
    pruner_warmup_frames: int = 0  # median pruner: frames before a trial may be pruned
    params: dict[str, str] = field(default_factory=dict)  # key: choice(..)|range(..)|interval(..)


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlrun_basic", node=BasicSweeperConf, provider="rlrun"
)
ConfigStore.instance().store(
    group="hydra/sweeper", name="rlrun_optuna", node=OptunaSweeperConf, provider="rlrun"
)
