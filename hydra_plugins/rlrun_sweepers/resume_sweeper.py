"""``hydra/sweeper=rlrun_resume``: continue the sweep in ``hydra.sweep.dir`` (``resume=<sweep>``).

``rlrun/folders/resume.py`` rewrites ``rlrun resume=<sweep folder>`` into a multirun with this
sweeper; it is not meant to be chosen by hand. It launches, through the sweep's own launcher, only
the jobs that did not complete, each with its own command line (a basic sweep's command line can
only say "every combination"): its saved overrides, the new ones, ``resume=<its folder>`` when it
has a checkpoint and ``hydra.sweep.subdir=<its number>``. It leaves ``multirun.yaml`` as the sweep
wrote it, so the sweep can be resumed again. Like rlrun's basic sweeper, it runs every job and
then lists the failed ones.
"""

# no `from __future__ import annotations`: Hydra's plugin scan runs this module before it is in
# sys.modules, and dataclasses then cannot read string annotations
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.utils import JobReturn

from hydra_plugins.rlrun_sweepers.basic_sweeper import raise_if_failed
from rlrun.compat.hydra import basic_sweeper_class

log = logging.getLogger(__name__)
HydraBasicSweeper = basic_sweeper_class()  # as Hydra's plugin scan made it


@dataclass
class ResumeSweeperConf:
    _target_: str = "hydra_plugins.rlrun_sweepers.resume_sweeper.ResumeSweeper"
    max_batch_size: int | None = None  # jobs per launch; null: all at once (the sweep's value)


ConfigStore.instance().store(
    group="hydra/sweeper", name="rlrun_resume", node=ResumeSweeperConf, provider="rlrun"
)


class ResumeSweeper(HydraBasicSweeper):
    """Hydra's basic sweeper (its setup: the launcher), with the job list of ``sweep`` below."""

    def __init__(self, max_batch_size: int | None = None) -> None:
        super().__init__(max_batch_size=max_batch_size, params=None)

    def sweep(self, arguments: list[str]) -> Any:
        from rlrun.folders.resume import plan_sweep_resume

        assert self.config is not None and self.launcher is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        jobs = plan_sweep_resume(Path(self.config.hydra.sweep.dir), arguments, parser)
        batch_size = self.max_batch_size or max(len(jobs), 1)
        returns: list[JobReturn] = []
        for start in range(0, len(jobs), batch_size):
            batch = [job.overrides for job in jobs[start : start + batch_size]]
            self.validate_batch_is_legal(batch)
            returns.extend(self.launcher.launch(batch, initial_job_idx=len(returns)))
        raise_if_failed(returns)
        return returns
