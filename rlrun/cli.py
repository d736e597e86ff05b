"""The ``rlrun`` console script: Hydra composes the config, ``rlrun.run`` trains.

Nothing heavy is imported here, so ``rlrun --help`` and config errors come back fast, and the
module is safe to import from spawned worker processes (the entry point is guarded).
"""

from __future__ import annotations

import importlib
import logging
import os
import shlex
import sys
import warnings
from importlib.resources import files
from typing import NoReturn

import hydra
from hydra.errors import ConfigCompositionException, HydraException, MissingConfigException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from rlrun import __version__
from rlrun.algorithms import shipped
from rlrun.builders.imports import (
    collection_paused,
    collection_paused_while_spawning,
    unprobed,
    unused_probes,
)
from rlrun.builders.ray_runtime import uses_ray
from rlrun.commandline import check_command_line, describe_config_error, register_configs
from rlrun.compat.cpython import run_exit_steps
from rlrun.compat.hydra import known_config, known_mode, task_name
from rlrun.errors import ConfigError, RunError
from rlrun.folders.folder_lock import hold
from rlrun.folders.provenance import COMMAND_ENV
from rlrun.folders.resume import path_value, resume_args

# rlrun's presets rlrun/conf/hydra/launcher/joblib.yaml, hydra/sweeper/basic.yaml, ... share the
# plugins' names on purpose (the plugin's dataclass validates them); Hydra warns about it on each
# composition. Launcher workers get the same filter from hydra_plugins/rlrun_sweepers/__init__.py.
warnings.filterwarnings("ignore", message=r"\n'hydra/.*' is validated against ConfigStore")
# a worker process spawned by a run imports this module first (as its main), then TorchRL
collection_paused_while_spawning()
SUBCOMMANDS = {
    "report": "rlrun.commands.report",
    "eval": "rlrun.commands.eval",
    "export": "rlrun.commands.export",
    "reproduce": "rlrun.commands.reproduce",
    "check": "rlrun.commands.check",
    "record": "rlrun.commands.record",
}

HELP = """\
rlrun: config-driven reinforcement learning with TorchRL.

Usage: rlrun [group=option ...] [key=value ...] [-m] [--cfg job] [--config-dir DIR]
       rlrun report RUN_OR_SWEEP_FOLDER
       rlrun eval RUN_OR_SWEEP_FOLDER [episodes=10 video=true checkpoint=best KEY=VALUE ...]
       rlrun export RUN format=onnx|torchscript [checkpoint=best]
       rlrun reproduce RUN [KEY=VALUE ...]   the same run again; what differs
       rlrun check +experiment=NAME [seeds=3] [KEY=VALUE ...]   the preset against its reference
       rlrun record RUN episodes=N [noise=0.2 id=NAME]  a Minari dataset of the trained policy
       rlrun --version                  rlrun's version, and TorchRL's, torch's, Hydra's
       python -m rlrun ...              the same as rlrun

Pick configs and override keys on the command line; rlrun assembles a TorchRL Trainer and runs
it. Every run gets a folder under outputs/ with its config, logs, checkpoints and summary.json.

Config groups (choose with group=option):
{groups}
Algorithms (algo=NAME; your own: algo._target_=<your declaration>, docs/guides/algorithms.md):
{algorithms}
Examples:
  rlrun +experiment=ppo                                          one run
  rlrun +experiment=ppo_lstm device=cuda logger=wandb            override groups and keys
  rlrun -m +experiment=ppo optim.lr=1e-3,3e-4 seed=0,1           a sweep (outputs/multirun/...)
  rlrun +experiment=iql dataset=rlrun/pendulum/medium-v0         offline, from a Minari dataset
  rlrun +experiment=ppo --cfg job                                print the composed config
  rlrun resume=outputs/2026-11-22/10-00-00-3f9c2a                continue a stopped run
  rlrun resume=outputs/multirun/2026-11-22/10-00-00-3f9c2a       re-run a sweep's unfinished jobs
  rlrun report outputs/multirun/2026-11-22/10-00-00-3f9c2a       table and plots of a sweep
  rlrun eval outputs/2026-11-22/10-00-00-3f9c2a episodes=50      evaluate the trained policy again
  rlrun eval RUN device=cpu env.id=CartPole-v1 video=true        another device, env or checkpoint
  rlrun export outputs/2026-11-22/10-00-00-3f9c2a format=onnx    policy.onnx + .json specs
  rlrun check +experiment=sac seeds=3                            exit 1 below the published band

Hydra's own options: rlrun --hydra-help.  Full tracebacks: HYDRA_FULL_ERROR=1.
"""


def _help_text() -> str:
    """List the shipped config groups from the package's conf tree (fast: no composition)."""
    root = files("rlrun.conf")
    groups = [g for g in root.iterdir() if g.is_dir() and not g.name.startswith("_")]
    groups += [g for g in root.joinpath("hydra").iterdir() if g.is_dir()]
    lines = []
    for group in groups:
        options = sorted(  # _base.yaml: a group's defaults, not an option
            f.name[:-5] for f in group.iterdir() if f.name.endswith(".yaml") and f.name[0] != "_"
        )
        name = f"hydra/{group.name}" if group.parent.name == "hydra" else group.name
        if options:
            lines.append(f"  {name + ':':17s} {', '.join(options)}")
    algorithms = [f"  {name + ':':17s} {a.summary}" for name, a in shipped().items()]
    return HELP.format(
        groups="\n".join(sorted(lines)) + "\n", algorithms="\n".join(algorithms) + "\n"
    )


@hydra.main(version_base="1.3", config_path="pkg://rlrun.conf", config_name="config")
def _hydra_main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    # importing torchrl loads mujoco's EGL renderer, whose PyOpenGL logs "No OpenGL_accelerate
    # module loaded" at INFO; in a launcher's worker that comes after Hydra set up the job's logging
    logging.getLogger("OpenGL.acceleratesupport").setLevel(logging.WARNING)
    # a sweep's later jobs may run in this process, and any of them may use Ray
    sweep = HydraConfig.get().mode == RunMode.MULTIRUN
    # TorchRL's import-time probes, and Python's garbage collector, paused for the imports
    with unprobed(unused_probes(ray=sweep or uses_ray(cfg))), collection_paused():
        from rlrun.run import run_job

    try:
        return run_job(cfg)
    except Exception as err:
        if HydraConfig.get().mode == RunMode.MULTIRUN:
            # the sweep goes on with the other jobs and lists the failed ones at the end
            logging.getLogger("rlrun").error(f"job stopped: {type(err).__name__}: {err}")
            raise
        if not isinstance(err, ConfigError | RunError):
            raise
        print(f"rlrun: error: {err}", file=sys.stderr)
        sys.exit(2 if isinstance(err, ConfigError) else 1)


def with_override(args: list[str], override: str) -> list[str]:
    """``args`` with ``override`` added to their overrides, which Hydra's parser reads as one
    block (after ``--config-dir DIR``, a lone override is refused)."""
    from rlrun.compat.hydra import args_parser

    block = args_parser().parse_args(args).overrides
    for i in range(len(args) - len(block) + 1):
        if args[i : i + len(block)] == block:
            return [*args[: i + len(block)], override, *args[i + len(block) :]]
    return [override, *args]


def version_text() -> str:
    """rlrun's version and those of the libraries a result depends on, from the installed
    packages' metadata (nothing imported)."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for package in ("torchrl", "tensordict", "torch", "hydra-core"):
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} not installed")
    return f"rlrun {__version__} ({', '.join(found)})"


def main() -> None:
    """Entry point of the console script (and ``python -m rlrun``): a subcommand
    (``report``, ``eval``, ``export``), ``rlrun --help`` or a Hydra run; the process then ends
    without the interpreter's teardown (:func:`end_process`)."""
    try:
        command_line()
    except SystemExit as done:
        end_process(done.code)
    end_process(0)


def end_process(code: int | str | None) -> NoReturn:
    """Exit as the interpreter would, less its final teardown. With the command's files written
    and closed (loggers, summary, checkpoints), what CPython still does after the exit handlers
    is free the memory of torch, tensordict and TorchRL: 1.0 s of a 1024-frame
    ``rlrun +experiment=ppo``'s 4.6 s, and 0.9 s of a script that only imports torch,
    tensordict, ``torchrl.envs`` and ``torchrl.trainers`` (measured 2026-11-27, 2 cores). The
    operating system frees it at once. Threads that are not daemons are told to stop and
    waited for (a replay buffer's prefetch executor) and the exit handlers run
    (``logging.shutdown``, W&B, Ray, joblib's workers), as CPython's own exit does them, in its
    order; ``code`` is read as ``sys.exit`` reads it."""
    run_exit_steps()
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said
            pass
    os._exit(code)


def command_line() -> None:
    """What ``rlrun ARGS`` does, ending in ``sys.exit`` where the exit code is not 0."""
    args = sys.argv[1:]
    os.environ[COMMAND_ENV] = shlex.join(["rlrun", *args])  # as typed, for its jobs' records too
    if args and args[0] in SUBCOMMANDS:  # a module each, imported only when used
        command = importlib.import_module(SUBCOMMANDS[args[0]]).main
        try:
            sys.exit(command(args[1:]))
        except (ConfigError, RunError) as err:
            print(f"rlrun: error: {err}", file=sys.stderr)
            sys.exit(2 if isinstance(err, ConfigError) else 1)
    if args and args[0] in ("--version", "-V"):
        print(version_text())
        return
    if args and args[0] in ("--help", "-h"):
        print(_help_text(), end="")
        return
    try:  # resume=<run, checkpoint or sweep folder>: the command line that continues it
        sys.argv[1:] = resume_args(args)
    except ConfigError as err:
        print(f"rlrun: error: {err}", file=sys.stderr)
        sys.exit(2)
    register_configs()
    full_error = os.environ.get("HYDRA_FULL_ERROR") == "1"
    os.environ["HYDRA_FULL_ERROR"] = "1"  # let composition errors reach us, then print them short
    try:
        with collection_paused():  # it imports torch; and before Hydra creates a folder
            checked = check_command_line(sys.argv[1:], task_name(_hydra_main.__wrapped__))
        if checked is not None:
            # Hydra writes into the folder checked (its time and random tag would resolve
            # anew), and this process holds it until it ends; a refusal shows the command as
            # typed, resume= not expanded
            argv = [f"++{a}" if a in checked.force else a for a in sys.argv[1:]]
            sys.argv[1:] = with_override(argv, f"{checked.key}={path_value(checked.folder)}")
            hold(checked.folder, "run", command=args)
            known_mode(checked.mode)  # composed once above: Hydra need not compose to read it
            if checked.config is not None:  # nor compose the run's config again
                known_config(checked.config, list(checked.overrides))
        _hydra_main()
    except ConfigError as err:
        print(f"rlrun: error: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as err:  # a sweep's SweepStopped (job_process.py): checkpoint saved
        why = f" by {err}; the sweep's later jobs did not start" if str(err) else ""
        print(f"rlrun: stopped{why}.", file=sys.stderr)
        sys.exit(130)
    except (ConfigCompositionException, MissingConfigException, OmegaConfBaseException) as err:
        if full_error:
            raise
        print(f"rlrun: error: {describe_config_error(err)}", file=sys.stderr)
        sys.exit(2)
    except HydraException as err:  # e.g. a sweep whose jobs failed: its message lists them
        if full_error:
            raise
        print(f"rlrun: error: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
