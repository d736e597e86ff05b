"""Every private member of Hydra and its launcher plugins that rlrun relies on, in one place.

Each entry names the version it was checked against and why the public API does not serve;
``tests/test_compat.py`` fails with a message naming the entry when an upgrade changes what it
relies on. Nothing else in rlrun (or in ``hydra_plugins/rlrun_sweepers``) touches a
``_private`` name of Hydra or of a Hydra plugin.

Light on purpose: the console script (``rlrun/cli.py``, ``rlrun/commandline.py``,
``rlrun/folders/resume.py``) reads the command line with it before torch is imported, so that a
config mistake is answered in well under a second. Hydra itself only; a plugin (Ray's) is
imported when its entry is called.
"""

from __future__ import annotations

import argparse
from typing import Any

from hydra._internal import utils as _utils
from hydra._internal.config_loader_impl import ConfigLoaderImpl
from hydra._internal.core_plugins import basic_launcher as _basic_launcher
from hydra._internal.core_plugins import basic_sweeper as _basic_sweeper
from hydra._internal.hydra import Hydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, OverrideType, ValueType
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import RunMode
from omegaconf import DictConfig

CHECKED = "hydra-core 1.3.8"
RAY_LAUNCHER_CHECKED = "hydra-ray-launcher 1.2.2"
SUBMITIT_LAUNCHER_CHECKED = "hydra-submitit-launcher 1.2.0"


def args_parser() -> argparse.ArgumentParser:
    """Hydra's own command-line parser (``overrides``, ``--multirun``, ``--cfg``,
    ``--config-dir``, ...), so that rlrun reads a command line exactly as Hydra will. Private
    (hydra-core 1.3.8): ``hydra._internal.utils.get_args_parser``; the public ``hydra.main``
    parses ``sys.argv`` and runs the task, it does not hand the parsed arguments back."""
    return _utils.get_args_parser()


def known_mode(mode: Any) -> None:
    """Hand Hydra the run mode (``hydra.mode``: RUN, MULTIRUN or None) that the console script
    read from its own composition, so that Hydra does not compose the whole config a further
    time only to read it (0.43 s of a 5.6 s tiny run, 2026-11-27). Private (hydra-core 1.3.8):
    ``Hydra.get_mode``, which ``hydra.main`` calls before composing the config it runs; this
    process runs one Hydra app, so the answer holds for its one call."""
    Hydra.get_mode = lambda self, config_name, overrides: mode


def task_name(task_function: Any) -> str:
    """The job name (``hydra.job.name``) that ``hydra.main`` gives the runs of
    ``task_function``, its module's file name, so that a composition of rlrun's own names the
    job as Hydra's will. Private (hydra-core 1.3.8):
    ``hydra._internal.utils.detect_calling_file_or_module_from_task_function`` and
    ``detect_task_name``, which ``_run_hydra`` calls; Hydra has no public way to ask."""
    calling_file, calling_module = _utils.detect_calling_file_or_module_from_task_function(
        task_function
    )
    return _utils.detect_task_name(calling_file, calling_module)


def known_config(cfg: DictConfig, composed_with: list[str]) -> None:
    """Hand Hydra's run the config the console script composed with those overrides (one run,
    composed as :func:`task_name` names it), so that Hydra does not compose it again: a
    1024-frame ``rlrun +experiment=ppo`` took a median 4.36 s of wall time against 4.52 s
    (20 paired runs, 2 cores, 2026-11-28). What Hydra asks more is its own ``hydra.*`` values (the
    run folder the console script pinned, ``hydra.mode``), set as its composition would set
    them; a composition asked for anything else is Hydra's own, as is every later one. Private
    (hydra-core 1.3.8): ``ConfigLoaderImpl.load_configuration``, which ``Hydra.compose_config``
    calls before it configures logging from the config, and
    ``ConfigLoaderImpl._apply_overrides_to_config``, which sets the values of overrides."""
    load = ConfigLoaderImpl.load_configuration

    def load_configuration(
        self: ConfigLoaderImpl,
        config_name: str | None,
        overrides: list[str],
        run_mode: RunMode,
        from_shell: bool = True,
        validate_sweep_overrides: bool = True,
    ) -> DictConfig:
        ConfigLoaderImpl.load_configuration = load  # asked once
        tail = OverridesParser.create().parse_overrides(overrides[len(composed_with) :])
        if (
            run_mode != RunMode.RUN
            or overrides[: len(composed_with)] != composed_with
            or not all(_hydra_value(o) for o in tail)
        ):
            return load(
                self, config_name, overrides, run_mode, from_shell, validate_sweep_overrides
            )
        ConfigLoaderImpl._apply_overrides_to_config(tail, cfg)
        cfg.hydra.overrides.hydra.extend([o.input_line for o in tail])
        return cfg

    ConfigLoaderImpl.load_configuration = load_configuration


def _hydra_value(override: Override) -> bool:
    """Whether ``override`` sets one value of Hydra's own config (``hydra.run.dir=...``), as
    opposed to choosing a config group (``hydra/launcher=...``), adding or deleting."""
    return (
        override.is_hydra_override()
        and override.type == OverrideType.CHANGE
        and override.value_type == ValueType.ELEMENT
        and override.package is None
        and "/" not in override.key_or_group
    )


def basic_sweeper_class() -> type[Sweeper]:
    """Hydra's basic sweeper (every combination of ``key=a,b`` overrides, in batches of
    ``max_batch_size``), for rlrun's sweepers to extend, as Hydra has it now: its plugin scan
    runs the module again, and the class made then is the one its ``__init__`` names
    (``super(BasicSweeper, self)``), so a subclass of the class of an earlier import fails to
    instantiate. Call it where the subclass is defined (a module of ``hydra_plugins``, run by the
    scan after Hydra's own). Private (hydra-core 1.3.8):
    ``hydra._internal.core_plugins.basic_sweeper.BasicSweeper``; the public ``Sweeper`` is the
    bare interface, with neither the job list nor the batching."""
    return _basic_sweeper.BasicSweeper


# the ``hydra.sweeper._target_`` a sweep run with Hydra's own basic sweeper saved in its
# ``multirun.yaml`` (private module path, hydra-core 1.3.8; see :func:`basic_sweeper_class`)
HYDRA_BASIC_SWEEPER = f"{_basic_sweeper.__name__}.BasicSweeper"


def basic_sweep_jobs(overrides: list[Override]) -> list[list[str]]:
    """Every job of a basic sweep of the parsed ``overrides``, each its list of ``key=value``
    overrides, in the order (so with the numbers) Hydra's basic sweeper gives them. Private
    (hydra-core 1.3.8): ``BasicSweeper.split_arguments``; Hydra has no public way to list a
    sweep's jobs without launching them."""
    (jobs,) = _basic_sweeper.BasicSweeper.split_arguments(overrides, None)
    return jobs


def basic_launcher_class() -> type[Launcher]:
    """Hydra's basic launcher (the jobs one after another, in this process), for rlrun's own to
    extend, as Hydra has it now (see :func:`basic_sweeper_class`: its plugin scan runs the
    module again). Private (hydra-core 1.3.8):
    ``hydra._internal.core_plugins.basic_launcher.BasicLauncher``; the public ``Launcher`` is
    the bare interface."""
    return _basic_launcher.BasicLauncher


def job_outcome(ret: JobReturn) -> Any:
    """What a job returned or, for a failed job, the error it raised, without raising it.
    Private (hydra-core 1.3.8): ``JobReturn._return_value``; the public ``return_value`` raises
    a failed job's error (and writes "Error executing job ..." to stderr)."""
    return ret._return_value


def submitit_executor(plugin: Any) -> str:
    """The submitit executor (``local``, ``slurm``) of a hydra-submitit-launcher launcher, as
    ``submitit.AutoExecutor(cluster=...)`` takes it. Private (hydra-submitit-launcher 1.2.0):
    the launcher classes' ``_EXECUTOR``; the plugin exposes it no other way."""
    return plugin._EXECUTOR


def start_ray(init_cfg: Any) -> None:
    """``ray.init`` as hydra-ray-launcher calls it (``hydra.launcher.ray.init``), unless Ray is
    running. Private (hydra-ray-launcher 1.2.2): ``hydra_plugins.hydra_ray_launcher.
    _launcher_util.start_ray``; the plugin's public launcher starts Ray inside its ``launch``
    only. Imports Ray."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import start_ray as _start_ray

    _start_ray(init_cfg)


def run_ray_job(*args: Any) -> JobReturn:
    """One job as hydra-ray-launcher runs it in a Ray worker (Hydra's ``run_job`` in the job's
    config, the Singleton state restored), called with the plugin's arguments
    ``(hydra_context, sweep_config, task_function, singleton_state)``. Private
    (hydra-ray-launcher 1.2.2): ``hydra_plugins.hydra_ray_launcher._launcher_util._run_job``,
    the function the plugin sends to Ray; the public launcher does not let rlrun wrap it.
    Imports Ray."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import _run_job

    return _run_job(*args)
