"""Continuing stopped work: ``resume=`` on a run, a checkpoint or a whole sweep, and requeued
submitit jobs.

- ``rlrun resume=<run folder or checkpoint>``: the run's saved command line, then the new
  overrides, in the same run folder (:func:`resume_args`).
- ``rlrun resume=<sweep folder>`` (a Hydra multirun folder): the same sweep again, in its own
  folder, through its own launcher, but only its jobs that did not complete. The jobs are
  rebuilt from ``<sweep>/multirun.yaml`` the way Hydra's basic sweeper built them (so a job
  that never started is known too); each one that is not ``completed`` runs in its own numbered
  folder with its own saved overrides plus the new ones, from its newest checkpoint when it has
  one. The command line becomes a multirun with rlrun's resume sweeper
  (``hydra_plugins/rlrun_sweepers/resume_sweeper.py``), which launches exactly those jobs.
- A submitit job (``hydra/launcher=submitit_slurm`` or ``submitit_local``) that gets submitit's
  preemption signal (USR2 before the SLURM time limit or on preemption) stops after the batch
  with a checkpoint, and submitit requeues it; the requeued job finds that checkpoint in its
  folder and continues from it (:func:`preemption_signals`, :func:`requeue_if_preempted`,
  :func:`requeued_checkpoint`).

Nothing heavy is imported at module level: the console script imports this module.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun.compat.hydra import HYDRA_BASIC_SWEEPER, basic_sweep_jobs
from rlrun.errors import ConfigError
from rlrun.folders.checkpoint_files import find_checkpoint
from rlrun.folders.folder_lock import held_by, refusal
from rlrun.folders.run_dirs import MULTIRUN_YAML, is_sweep_dir, load_saved

log = logging.getLogger(__name__)

RESUME_SWEEPER = "rlrun_resume"  # hydra/sweeper option of resume_sweeper.py
NUMBERED_JOBS = "${hydra.job.num}"  # the job folders' names rlrun resumes (Hydra's default)
BASIC_SWEEPERS = (
    HYDRA_BASIC_SWEEPER,  # Hydra's own
    "hydra_plugins.rlrun_sweepers.basic_sweeper.BasicSweeper",
)
FINISHED = ("completed", "pruned")  # summary.json statuses a sweep resume leaves alone
# set by submitit in every job process (submitit/core/submission.py), before the task runs
SUBMITIT_JOB_ENV = "SUBMITIT_FOLDER"
PREEMPT_SIGNAL_ENV = "SUBMITIT_PREEMPT_SIGNAL"  # submitit's own setting; USR2 when unset


def _override_key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _is_override(arg: str) -> bool:
    return "=" in arg and not arg.startswith("-")


def path_value(path: Path) -> str:
    """A path as an override value: quoted when Hydra's grammar would split or parse it."""
    text = str(path)
    if re.fullmatch(r"[\w/.:@-]+", text):
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def run_dir_of(path: Path) -> Path:
    """The run folder a ``resume=`` path points into (a run folder or one of its checkpoints)."""
    path = path.expanduser().resolve()
    for candidate in (path, *path.parents):
        if (candidate / ".hydra" / "overrides.yaml").is_file():
            return candidate
    raise ConfigError(
        f"resume={path} is neither a run folder nor a checkpoint inside one, nor a sweep folder "
        f"(no .hydra/overrides.yaml found there or above, no {MULTIRUN_YAML} there)."
    )


def resume_args(args: list[str]) -> list[str]:
    """``resume=<run folder or checkpoint>``: Hydra picks the output folder before the task runs,
    so the command line is rewritten here: the run's saved overrides, then the new ones (they
    win, e.g. more frames), the same run folder, and ``resume`` as an absolute path.
    ``resume=<sweep folder>``: see :func:`sweep_resume_args`. With ``-m`` and a run or
    checkpoint, the command line is left as it is: each job of the new sweep starts from that
    checkpoint in its own folder."""
    given = [a for a in args if _override_key(a) == "resume" and _is_override(a)]
    if not given or given[-1].split("=", 1)[1] in ("", "null"):
        return args
    path = Path(given[-1].split("=", 1)[1]).expanduser().resolve()
    new = [a for a in args if not (_override_key(a) == "resume" and _is_override(a))]
    if is_sweep_dir(path):
        return sweep_resume_args(path, new)
    if "-m" in args or "--multirun" in args:
        return args
    run_dir = run_dir_of(path)
    flags = [a for a in new if not _is_override(a)]  # --config-dir DIR, ...: after the overrides
    new = [a for a in new if _is_override(a)]
    new_keys = {_override_key(a) for a in new}
    saved = load_saved(run_dir / ".hydra" / "overrides.yaml")
    kept = [
        str(a) for a in saved if _override_key(str(a)) not in new_keys | {"resume", "hydra.run.dir"}
    ]
    hydra = load_saved(run_dir / ".hydra" / "hydra.yaml").hydra
    flags += config_dir_flags(hydra, flags)
    return [*kept, *new, f"hydra.run.dir={run_dir}", f"resume={path}", *flags]


def config_dir_flags(hydra: Any, flags: list[str]) -> list[str]:
    """``--config-dir DIR`` of the run or sweep being resumed, when the new command line gives
    none: its presets (``+experiment=`` of yours) compose from there again. Hydra records the
    folder among its config sources (provider ``command-line``)."""
    if any(f in ("--config-dir", "-cd") or f.startswith("--config-dir=") for f in flags):
        return []
    sources = OmegaConf.select(hydra, "runtime.config_sources", default=None) or []
    for source in sources:
        if source.get("provider") == "command-line" and source.get("schema") == "file":
            return ["--config-dir", str(source.path)]
    return []


def load_sweep(sweep: Path) -> dict[str, Any]:
    """``<sweep>/multirun.yaml`` as plain data, interpolations left as written."""
    saved = OmegaConf.to_container(load_saved(sweep / MULTIRUN_YAML), resolve=False)
    assert isinstance(saved, dict)
    return saved


def check_resumable(sweep: Path, saved: dict[str, Any]) -> None:
    """Refuse, in one line, a sweep whose jobs rlrun cannot list again."""
    hydra = saved["hydra"]
    target = (hydra.get("sweeper") or {}).get("_target_", "")
    if "optuna" in target.lower():
        storage = hydra["sweeper"].get("storage")
        command = " ".join(["rlrun -m", *hydra["overrides"]["task"]])
        how = (
            f"run its command again ({command}): it reads the study from {storage} and runs "
            "only the trials missing to reach hydra.sweeper.n_trials"
            if storage
            else "this one had no storage (hydra.sweeper.storage=null), so it cannot continue"
        )
        raise ConfigError(
            f"resume={sweep}: an Optuna search continues from its study, not from its folder: "
            f"{how}. A single stopped trial continues with resume=<its job folder>."
        )
    if target not in BASIC_SWEEPERS:
        raise ConfigError(
            f"resume={sweep}: this sweep ran with the sweeper {target}; rlrun resumes sweeps "
            "of the basic sweeper (key=a,b,... combinations). Resume its jobs one by one with "
            "resume=<job folder>."
        )
    subdir = hydra["sweep"].get("subdir")
    if subdir != NUMBERED_JOBS:
        raise ConfigError(
            f"resume={sweep}: its job folders are named by hydra.sweep.subdir={subdir}; rlrun "
            f"resumes sweeps whose jobs are numbered (hydra.sweep.subdir={NUMBERED_JOBS}, the "
            "default). Resume its jobs one by one with resume=<job folder>."
        )


def sweep_resume_args(sweep: Path, args: list[str]) -> list[str]:
    """``resume=<sweep folder>``: a multirun in that folder with rlrun's resume sweeper, which
    launches the sweep's unfinished jobs (:func:`plan_sweep_resume`). The command line keeps the
    sweep's own Hydra overrides (launcher and its settings) and its fixed overrides (they compose
    the sweep's config), and adds the new ones, which win and reach every resumed job."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    saved = load_sweep(sweep)
    check_resumable(sweep, saved)
    for folder in (sweep, *sorted(p for p in sweep.iterdir() if p.is_dir())):
        holder = held_by(folder)  # its driver, or a job still running (its driver gone)
        if holder is not None:
            raise refusal(folder, holder, "resume")
    new = [a for a in args if _is_override(a)]
    flags = [a for a in args if not _is_override(a) and a not in ("-m", "--multirun")]
    new_keys = {_override_key(a) for a in new}
    parser = OverridesParser.create()
    try:
        swept = [o.input_line for o in parser.parse_overrides(new) if o.is_sweep_override()]
    except HydraException as err:
        raise ConfigError(f"resume={sweep}: {err}") from None
    if swept:
        raise ConfigError(
            f"resume={sweep} continues that sweep's own jobs: {' '.join(swept)} would be a new "
            "sweep; give one value per key (it applies to every resumed job)."
        )
    if "hydra/sweeper" in new_keys or any(k.startswith("hydra.sweeper.") for k in new_keys):
        raise ConfigError(f"resume={sweep}: the sweeper is rlrun's resume sweeper; drop the rest.")
    dropped = new_keys | {"hydra.mode", "hydra.sweep.dir", "hydra.sweep.subdir", "hydra.run.dir"}
    new_launcher = "hydra/launcher" in new_keys  # the saved launcher's settings go with it
    hydra = [
        o
        for o in saved["hydra"]["overrides"]["hydra"]
        if _override_key(o) not in dropped
        and not _override_key(o).startswith(("hydra/sweeper", "hydra.sweeper."))
        and not (new_launcher and _override_key(o).startswith("hydra.launcher."))
    ]
    fixed = [
        o.input_line
        for o in parser.parse_overrides(saved["hydra"]["overrides"]["task"])
        if not o.is_sweep_override() and _override_key(o.input_line) not in new_keys | {"resume"}
    ]
    batch = saved["hydra"]["sweeper"].get("max_batch_size")
    flags += config_dir_flags(OmegaConf.create(saved["hydra"]), flags)
    return [
        "-m",
        *flags,
        *hydra,
        *fixed,
        *new,
        f"hydra.sweep.dir={path_value(sweep)}",
        f"hydra/sweeper={RESUME_SWEEPER}",
        *([f"hydra.sweeper.max_batch_size={batch}"] if batch else []),
    ]


@dataclass
class ResumedJob:
    """One unfinished job of a sweep: its number (= folder name), state and command line."""

    num: int
    folder: Path
    state: str  # its summary.json status, "stopped without a summary" or "not started"
    checkpoint: Path | None
    overrides: list[str]

    def describe(self) -> str:
        start = f"continues from {self.checkpoint}" if self.checkpoint else "starts from scratch"
        return f"#{self.num} ({self.state}): {start}"


def job_state(folder: Path) -> str:
    """What a job folder says about its job: its summary.json status, or how far it got."""
    if not folder.is_dir():
        return "not started"
    summary = folder / "summary.json"
    if not summary.is_file():
        return "stopped without a summary"
    try:
        return str(json.loads(summary.read_text()).get("status", "unknown"))
    except json.JSONDecodeError:
        return "unreadable summary.json"


def job_checkpoint(folder: Path, new: list[str]) -> Path | None:
    """The newest checkpoint in a job folder (its saved backend unless a new one is given)."""

    if not folder.is_dir():
        return None
    backend = "torch"
    config = folder / ".hydra" / "config.yaml"
    if config.is_file():
        backend = OmegaConf.select(OmegaConf.load(config), "checkpoint.backend") or backend
    for arg in new:
        if _override_key(arg) == "checkpoint.backend":
            backend = arg.split("=", 1)[1]
    if backend == "none":
        return None
    return find_checkpoint(folder, backend)


def plan_sweep_resume(sweep: Path, arguments: list[str], parser: Any) -> list[ResumedJob]:
    """The jobs of ``sweep`` that did not complete, each with the command line that continues it.

    ``arguments``: the resumed multirun's task overrides (the sweep's fixed ones, as
    :func:`sweep_resume_args` put them back, and the new ones). The sweep's jobs are rebuilt
    from ``multirun.yaml`` with Hydra's own ``BasicSweeper.split_arguments``, so job N is the
    N-th combination, in folder ``<sweep>/N``. A job runs again unless its ``summary.json``
    says ``completed`` (or ``pruned``): with the overrides its folder saved
    (``.hydra/overrides.yaml``; the rebuilt ones if it never started), the new ones on top,
    ``resume=<its folder>`` when it has a checkpoint, and ``hydra.sweep.subdir=N``.
    """
    saved = load_sweep(sweep)
    check_resumable(sweep, saved)
    task = [str(o) for o in saved["hydra"]["overrides"]["task"]]
    params = saved["hydra"]["sweeper"].get("params") or {}
    sweep_args = [f"{k}={v}" for k, v in params.items()] + task
    all_jobs = basic_sweep_jobs(parser.parse_overrides(sweep_args))
    new = [a for a in arguments if a not in set(task)]
    new_keys = {_override_key(a) for a in new}
    plans = []
    for num, rebuilt in enumerate(all_jobs):
        folder = sweep / str(num)
        state = job_state(folder)
        if state in FINISHED:
            continue
        saved_file = folder / ".hydra" / "overrides.yaml"
        own = [str(o) for o in OmegaConf.load(saved_file)] if saved_file.is_file() else rebuilt
        kept = [o for o in own if _override_key(o) not in new_keys | {"resume"}]
        checkpoint = job_checkpoint(folder, new)
        resume = [f"resume={path_value(folder)}"] if checkpoint is not None else []
        overrides = [*kept, *new, *resume, f"hydra.sweep.subdir={num}"]
        plans.append(ResumedJob(num, folder, state, checkpoint, overrides))
    log.info(
        f"Resuming sweep {sweep}: {len(all_jobs)} jobs, "
        f"{len(all_jobs) - len(plans)} completed (left as they are), {len(plans)} to run"
    )
    for job in plans:
        log.info(f"\t{job.describe()}")
    return plans


def submitit_job() -> bool:
    """Whether this process runs a submitit job (SLURM or local)."""
    return SUBMITIT_JOB_ENV in os.environ


def preemption_signals() -> tuple[signal.Signals, ...]:
    """Inside a submitit job, the signal submitit has the scheduler send before the time limit
    (``signal_delay_s``) or on preemption: USR2 unless ``SUBMITIT_PREEMPT_SIGNAL`` names another.
    ``rlrun/run.py`` stops the Trainer on it like on SIGTERM (a checkpoint after the batch), then
    :func:`requeue_if_preempted` lets submitit requeue the job. Outside submitit: none."""
    if not submitit_job():
        return ()
    name = os.environ.get(PREEMPT_SIGNAL_ENV, "USR2")
    return (signal.Signals[f"SIG{name}"],)


def requeue_if_preempted(signals: list[str]) -> None:
    """After a stop on the preemption signal (checkpoint and summary.json written): hand the
    signal to submitit's own handler, which ``stop_on_signals`` put back. It calls the Hydra
    launcher's ``checkpoint()`` (the same job again), requeues it (at most ``max_num_timeout``
    times after a time limit; preemptions do not count) and ends this process. When it may not
    requeue, it raises, and the job fails with that reason."""
    for sig in preemption_signals():
        handler = signal.getsignal(sig)
        if sig.name in signals and callable(handler):
            log.info(f"{sig.name}: stopped with a checkpoint; submitit requeues the job")
            handler(sig, None)


def requeued_checkpoint(cfg: DictConfig) -> Path | None:
    """Without ``resume``: a submitit job that finds a checkpoint in its own job folder is a
    requeued one (its first start had an empty folder) and continues from the newest."""
    if not submitit_job() or cfg.checkpoint.backend == "none":
        return None
    from hydra.core.hydra_config import HydraConfig

    run_dir = Path(HydraConfig.get().runtime.output_dir)
    found = find_checkpoint(run_dir, cfg.checkpoint.backend)
    if found is not None:
        log.info(f"requeued submitit job: continues from {found}")
    return found
