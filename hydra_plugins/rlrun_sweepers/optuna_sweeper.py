"""Hyperparameter search with optuna's ask/tell API: each trial is one rlrun job.

The search space is written in Hydra's sweep syntax (``choice``, ``range``, ``interval``,
``tag(log, ...)``), in ``hydra.sweeper.params`` or on the command line. The objective is a key of
the job's ``summary.json``. With a ``storage`` (sqlite file), a stopped or finished study
continues: a new invocation runs only the trials missing to reach ``n_trials`` (trials left
"running" by a killed invocation are not counted; they stay in the study as they are).
optuna is imported only when a search runs (it is an optional extra).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.errors import CompactHydraException
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

from hydra_plugins.rlrun_sweepers.basic_sweeper import raise_if_failed
from rlrun.builders.pruning import PRUNERS, TRIAL_ENV, is_pruned, make_pruner
from rlrun.compat.hydra import job_outcome
from rlrun.errors import ConfigError, choose

log = logging.getLogger(__name__)


def _choose(key: str, value: str, choices: tuple[str, ...]) -> str:
    """rlrun's ``choose``, raised as an error Hydra prints in one line (no traceback)."""
    try:
        return choose(key, value, choices)
    except ConfigError as err:
        raise CompactHydraException(str(err)) from None


def distribution(override: Override) -> Any:
    """Hydra sweep syntax -> optuna distribution. ``range`` keeps Hydra's meaning (stop excluded)
    and is searched as a choice of its values."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    if override.is_choice_sweep() or override.is_range_sweep():
        return CategoricalDistribution(list(override.sweep_iterator()))
    if override.is_interval_sweep():
        value = override.value()
        log_scale = "log" in value.tags
        if isinstance(value.start, int) and isinstance(value.end, int):
            return IntDistribution(value.start, value.end, log=log_scale)
        return FloatDistribution(value.start, value.end, log=log_scale)
    raise CompactHydraException(
        f"{override.input_line}: hydra/sweeper=rlrun_optuna searches choice(...), range(...) "
        "or interval(...) values."
    )


class OptunaSweeper(Sweeper):
    def __init__(self, **conf: Any) -> None:
        self.conf = OmegaConf.create(conf)
        self.launcher = None
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.hydra_context = hydra_context
        self.config = config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def _study(self) -> Any:
        import optuna

        c = self.conf
        _choose("hydra.sweeper.direction", c.direction, ("maximize", "minimize"))
        samplers = {"tpe": optuna.samplers.TPESampler, "random": optuna.samplers.RandomSampler}
        sampler = samplers[_choose("hydra.sweeper.sampler", c.sampler, tuple(samplers))]
        _choose("hydra.sweeper.pruner", c.pruner, PRUNERS)
        if c.pruner != "none" and not c.storage:
            raise CompactHydraException(
                f"hydra.sweeper.pruner={c.pruner} needs hydra.sweeper.storage (jobs report to "
                "the study through it), e.g. sqlite:///outputs/optuna/study.db."
            )
        if c.storage and c.storage.startswith("sqlite:///"):
            Path(c.storage.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        return optuna.create_study(
            study_name=c.study_name,
            storage=c.storage,
            sampler=sampler(seed=c.seed),
            pruner=make_pruner(c),
            direction=c.direction,
            load_if_exists=True,
        )

    def _tell(self, study: Any, trial: Any, ret: JobReturn) -> None:
        """Give the trial its objective from summary.json, or mark it failed / pruned."""
        from optuna.trial import TrialState

        job_dir = Path(ret.hydra_cfg.hydra.runtime.output_dir)
        trial.set_user_attr("job_dir", str(job_dir))
        if ret.status == JobStatus.FAILED:
            pruned = is_pruned(job_outcome(ret))
            study.tell(trial, state=TrialState.PRUNED if pruned else TrialState.FAIL)
            return
        value = json.loads((job_dir / "summary.json").read_text()).get(self.conf.objective)
        if value is None or not math.isfinite(value):
            log.warning(f"{job_dir}: no {self.conf.objective} in summary.json; trial failed.")
            study.tell(trial, state=TrialState.FAIL)
        else:
            study.tell(trial, value)

    def sweep(self, arguments: list[str]) -> list[JobReturn]:
        from optuna.trial import TrialState

        assert self.config is not None and self.launcher is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        params = [f"{k}={v}" for k, v in self.conf.params.items()]
        overrides = parser.parse_overrides(params + list(arguments))
        space = {o.get_key_element(): distribution(o) for o in overrides if o.is_sweep_override()}
        fixed = [o.input_line for o in overrides if not o.is_sweep_override()]
        if not space:
            raise CompactHydraException(
                "hydra/sweeper=rlrun_optuna has nothing to search: set hydra.sweeper.params "
                "(e.g. hparams_search=ppo_optuna) or sweep a key: optim.lr='interval(1e-4,1e-2)'."
            )
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")

        study = self._study()
        finished = [t for t in study.trials if t.state not in (TrialState.RUNNING,)]
        remaining = self.conf.n_trials - len(finished)
        log.info(
            f"Study '{study.study_name}': {len(finished)} trials done, {max(remaining, 0)} to run"
        )
        returns: list[JobReturn] = []
        while remaining > 0:
            trials = [study.ask(space) for _ in range(min(self.conf.n_jobs, remaining))]
            batch = [
                fixed
                + [f"{k}={v}" for k, v in t.params.items()]
                + [f"++hydra.job.env_set.{TRIAL_ENV}={t.number}"]
                for t in trials
            ]
            results = self.launcher.launch(batch, initial_job_idx=len(returns))
            for trial, ret in zip(trials, results, strict=True):
                self._tell(study, trial, ret)
            returns.extend(results)
            remaining -= len(trials)
        self._write_best(study, sweep_dir)
        raise_if_failed([r for r in returns if not is_pruned(job_outcome(r))])
        return returns

    def _write_best(self, study: Any, sweep_dir: Path) -> None:
        """``optimization_results.yaml``: the best trial so far, over all invocations."""
        try:
            best = study.best_trial
        except ValueError:  # no completed trial yet
            return
        result = {
            "study_name": study.study_name,
            "best_value": best.value,
            "best_params": best.params,
            "best_trial": best.number,
            "best_job_dir": best.user_attrs.get("job_dir"),
            "trials": len(study.trials),
        }
        OmegaConf.save(OmegaConf.create(result), sweep_dir / "optimization_results.yaml")
        log.info(f"Best trial {best.number}: {self.conf.objective}={best.value} {best.params}")
