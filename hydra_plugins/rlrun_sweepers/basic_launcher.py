"""``hydra/launcher=basic`` (the default): Hydra's basic launcher, one job after another, each in a
process of its own forked from rlrun's (job_process.py), which waits for it.

A job killed by a signal (the OOM killer, a segfault) is one failed job, and the sweep goes on
with the next; in rlrun's own process it ended the sweep. Ctrl-C or SIGTERM stops the running job
after its batch with a checkpoint and stops the sweep (``rlrun: stopped by SIGINT; ...``).
"""

from __future__ import annotations

from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.rlrun_sweepers.job_process import OwnProcess
from rlrun.compat.hydra import basic_launcher_class

HydraBasicLauncher = basic_launcher_class()  # as Hydra's plugin scan made it


class BasicLauncher(HydraBasicLauncher):
    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        task = OwnProcess(task_function, stops_sweep=True)
        super().setup(hydra_context=hydra_context, task_function=task, config=config)
