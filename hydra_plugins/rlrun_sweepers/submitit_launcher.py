"""``hydra/launcher=submitit_local`` and ``submitit_slurm``: Hydra's submitit launchers with two
changes that make a job killed by a signal one failed job among the others:

- Each job runs in a process of its own forked from its submitit job's process, which waits for
  it (job_process.py): the OOM killer's SIGKILL or a segfault becomes a failed job, ``killed by
  SIGKILL (out of memory? ...)`` in its ``summary.json``. (submitit knows only that no result came.)
- Every job's result is collected: a submitit job that still ended without one (its process
  killed with the job, a node lost, a SLURM limit) is a failed job too, and the others' results
  stand. (The plugin collects them in order and raises at the first such job: a traceback, the
  later jobs' results never read.)

A job's process still gets submitit's signals (USR2 before a time limit, then the requeue) as it
did: its parent passes them on, and exits as the job asks submitit to (rlrun/folders/resume.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, filter_overrides
from omegaconf import OmegaConf, open_dict

from hydra_plugins.rlrun_sweepers.failures import ended_without_result, failed_return
from hydra_plugins.rlrun_sweepers.job_process import PluginLauncher
from rlrun.compat.hydra import submitit_executor

log = logging.getLogger(__name__)
PLUGIN = "hydra_plugins.hydra_submitit_launcher.submitit_launcher"


class SubmititLauncher(PluginLauncher):
    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        """The plugin's launch (hydra-submitit-launcher 1.2.0), all results collected."""
        config = self.plugin.config
        sweep_dir = Path(str(config.hydra.sweep.dir))
        log.info(f"Submitit '{submitit_executor(self.plugin)}' sweep output dir : {sweep_dir}")
        sweep_dir.mkdir(parents=True, exist_ok=True)
        if "mode" in config.hydra.sweep:
            os.chmod(sweep_dir, mode=int(str(config.hydra.sweep.mode), 8))
        nums = range(initial_job_idx, initial_job_idx + len(job_overrides))
        for num, overrides in zip(nums, job_overrides, strict=True):
            log.info(f"\t#{num} : {' '.join(filter_overrides(overrides))}")
        jobs = self._executor().map_array(
            self.plugin,  # its __call__ runs a job: Hydra's run_job, the task in its own process
            [list(overrides) for overrides in job_overrides],
            ["hydra.sweep.dir"] * len(nums),
            list(nums),
            [f"job_id_for_{num}" for num in nums],
            [Singleton.get_state()] * len(nums),
        )
        return [
            self._result(job, overrides, num)
            for job, overrides, num in zip(jobs, job_overrides, nums, strict=True)
        ]

    def _executor(self) -> Any:
        """The executor, as the plugin's launch makes it from the launcher's settings."""
        import submitit
        from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

        kind = submitit_executor(self.plugin)
        params = dict(self.plugin.params)
        init = {"folder": params.pop("submitit_folder")}
        if "max_num_timeout" in params:
            init[f"{kind}_max_num_timeout"] = params.pop("max_num_timeout")
        executor = submitit.AutoExecutor(cluster=kind, **init)
        shared = set(OmegaConf.structured(BaseQueueConf).keys())  # the others get kind_ first
        executor.update_parameters(
            **{key if key in shared else f"{kind}_{key}": value for key, value in params.items()}
        )
        return executor

    def _result(self, job: Any, overrides: Sequence[str], num: int) -> JobReturn:
        """The job's own result, or a failed one when its submitit job ended without one."""
        from submitit.core.utils import UncompletedJobError

        try:
            return job.results()[0]
        except UncompletedJobError:  # (or its FailedJobError: it raised outside Hydra's run_job)
            plugin = self.plugin
            cfg = plugin.hydra_context.config_loader.load_sweep_config(
                plugin.config, list(overrides)
            )
            with open_dict(cfg):
                cfg.hydra.job.num = num
            seen = f"submitit job {job.job_id}, state {job.state}, log {job.paths.stderr}"
            return failed_return(cfg, ended_without_result(seen))


class LocalLauncher(SubmititLauncher):
    PLUGIN = f"{PLUGIN}:LocalLauncher"


class SlurmLauncher(SubmititLauncher):
    PLUGIN = f"{PLUGIN}:SlurmLauncher"
