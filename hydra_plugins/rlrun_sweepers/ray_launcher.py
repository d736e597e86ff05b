"""``hydra/launcher=ray``: Hydra's Ray launcher (hydra-ray-launcher, ``ray.init`` and
``ray.remote`` as ``rlrun/conf/hydra/launcher/ray.yaml`` sets them), with three changes that make
its sweeps behave like those of rlrun's other launchers:

- Each job runs in the folder rlrun was started in. (A cluster's workers otherwise run in the
  folder of its ``ray start``, and relative paths, ``outputs/`` first, land there.)
- A job that Ray could not run to its end (its process killed, out of memory) is a failed job:
  its ``summary.json`` says so (``failed``, with Ray's error and a hint: Ray does not say which
  signal killed it), rlrun's sweeper lists it with the others at the end, and the other jobs run
  to their end. (The plugin's ``ray.get`` raises at the first: a traceback, and exiting stops
  the others.)
- Ctrl-C or SIGTERM stops the running jobs as they stop a run: after the batch, with a
  checkpoint and an ``interrupted`` summary (``ray.cancel`` calls the SIGINT handler of the
  job's main thread, ``rlrun.run.stop_on_signals``); jobs not started yet never start. Then
  rlrun says it stopped (exit status 130); ``rlrun resume=<sweep>`` continues. A second signal
  stops at once. (Otherwise Ray's exit kills the jobs mid-batch, without a summary, and SIGTERM
  aborts rlrun with a C++ stack dump.)

Nothing of Ray or of the plugin is imported here before a launch: Hydra imports every module of
``hydra_plugins`` at start, also where the ``ray`` extra is not installed.
"""

import logging
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, configure_log, filter_overrides, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.rlrun_sweepers.failures import ended_without_result, failed_return

log = logging.getLogger(__name__)


class RayLauncher(Launcher):
    def __init__(self, ray: DictConfig) -> None:
        self.ray_cfg = ray
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config
        self.hydra_context = hydra_context
        self.task_function = task_function

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        import ray

        from rlrun.compat.hydra import start_ray

        assert self.config is not None and self.hydra_context is not None
        setup_globals()
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info(
            f"Ray Launcher is launching {len(job_overrides)} jobs, sweep output dir: {sweep_dir}"
        )
        start_ray(self.ray_cfg.init)
        remote = OmegaConf.to_container(self.ray_cfg.remote, resolve=True) or {}
        run = ray.remote(**remote)(_run_job) if remote else ray.remote(_run_job)
        jobs: list[tuple[Any, DictConfig]] = []
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
            cfg = self.hydra_context.config_loader.load_sweep_config(self.config, list(overrides))
            with open_dict(cfg):
                cfg.hydra.job.id = f"job_id_for_{idx}"
                cfg.hydra.job.num = idx
            ref = run.remote(
                os.getcwd(), self.hydra_context, cfg, self.task_function, Singleton.get_state()
            )
            jobs.append((ref, cfg))
        # SIGTERM: not Ray's abort with a stack dump. SIGINT: also where rlrun was started with
        # it ignored (a shell's background job, a test runner's worker), as a run's own handler
        # does (rlrun.run.stop_on_signals): the jobs, in process groups of Ray's, see only what
        # this process asks them to (ray.cancel)
        stops = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, _interrupt) for sig in stops}
        try:
            return [_result(ref, cfg) for ref, cfg in jobs]
        except KeyboardInterrupt:
            _stop([ref for ref, _ in jobs])
            raise
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _run_job(cwd: str, *args: Any) -> JobReturn:
    """The plugin's job (Hydra's ``run_job`` in the sweep's config) in the folder ``cwd``."""
    from rlrun.compat.hydra import run_ray_job as run_job

    before = os.getcwd()
    os.chdir(cwd)
    try:
        return run_job(*args)
    finally:
        os.chdir(before)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _result(ref: Any, cfg: DictConfig) -> JobReturn:
    """The job's own result, or a failed one when Ray could not run it to its end."""
    import ray

    try:
        return ray.get(ref)
    except ray.exceptions.RayError as err:  # its worker died (Ray does not say of which signal)
        first = (str(err).splitlines() or [""])[0]  # (Ray's advice goes on for lines)
        return failed_return(cfg, ended_without_result(f"{type(err).__name__}: {first}"))


STOP_WAIT_S = 60  # then Ray's exit stops what is left (a terminal's Ctrl-C may reach its daemons)


def _stop(refs: list[Any]) -> None:
    """Cancel the jobs (running ones stop after their batch) and wait for them, at most
    ``STOP_WAIT_S``; a second Ctrl-C or SIGTERM ends the wait."""
    import ray

    log.info("Stopping the sweep: each running job after its batch (Ctrl-C again: at once)")
    for ref in refs:
        ray.cancel(ref)
    _, running = ray.wait(refs, num_returns=len(refs), timeout=STOP_WAIT_S)
    if running:
        log.warning(
            "%d jobs did not stop within %d s; Ray stops them now", len(running), STOP_WAIT_S
        )
