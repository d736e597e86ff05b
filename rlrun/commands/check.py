"""``rlrun check``: train a preset at its reference budget over several seeds and gate on its
published reference (``rlrun/commands/references.py``), so a user or a cluster job can tell a run
that matches the literature from one that does not.

``rlrun check +experiment=NAME [seeds=3] [KEY=VALUE ...]`` composes the config once (to read
the preset's ``reference:``), then starts ``rlrun -m ... seed=0,..,N-1
trainer.total_frames=<reference.frames>`` in a new process: a sweep like any other, so any Hydra
launcher runs it (``hydra/launcher=joblib``, ``submitit_slurm``, ``ray``) and ``resume=`` of its
folder continues it. With ``metric: eval_return`` and no evaluation configured, one evaluation
runs at the end (``eval.every_frames=<frames>``). Then ``rlrun report`` is written into the sweep
folder and the comparison printed. ``rlrun check FOLDER [reference.KEY=VALUE ...]`` compares runs
that already finished (no training).

Exit status: 0 within (or above) the band; 1 below it, a failed job, or nothing comparable;
2 a usage error (no reference, a bad argument).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig

from rlrun.commandline import describe_config_error
from rlrun.commands.references import BELOW, NOT_COMPARABLE
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import shown, split_options

USAGE = """\
Usage: rlrun check +experiment=NAME [seeds=3] [--config-dir DIR] [KEY=VALUE ...]
       rlrun check RUN_OR_SWEEP_FOLDER [reference.KEY=VALUE ...]

Train the preset at its reference's frames over seeds 0..N-1 (a sweep, through any Hydra
launcher: hydra/launcher=joblib), then set the IQM of the runs' final values, with its 95%
interval, beside the preset's published figure. With a folder: compare finished runs.
Exit status 0: within or above the reference band; 1: below it, a failed job or nothing to
compare; 2: a usage error.
"""
DEFAULT_SEEDS = 3
OWN_KEYS = ("seed", "trainer.total_frames")  # set by the check itself
STOPPED = 130  # rlrun's exit status when Ctrl-C or SIGTERM stopped it (rlrun/cli.py)


def presets_with_reference() -> list[str]:
    """The shipped ``+experiment=`` presets that carry a ``reference:`` block."""
    from importlib.resources import files

    import yaml

    folder = files("rlrun.conf").joinpath("experiment")
    found = []
    for f in folder.iterdir():
        if f.name.endswith(".yaml") and "reference" in (yaml.safe_load(f.read_text()) or {}):
            found.append(f.name[:-5])
    return sorted(found)


def compose(overrides: Sequence[str], config_dir: str | None) -> DictConfig:
    """What ``rlrun OVERRIDES`` would run, its ``hydra.sweep.dir`` resolved (a fresh one);
    ``config_dir``: a folder of the user's own presets (``--config-dir``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from rlrun.commandline import register_configs

    register_configs()
    extra = [f"hydra.searchpath=[file://{Path(config_dir).absolute()}]"] if config_dir else []
    try:
        with initialize_config_module(config_module="rlrun.conf", version_base="1.3"):
            return hydra_compose("config", overrides=[*overrides, *extra], return_hydra_config=True)
    except (HydraException, OmegaConfBaseException) as err:
        raise ConfigError(describe_config_error(err)) from None


def sweep_command(
    cfg: DictConfig, overrides: Sequence[str], seeds: int, config_dir: str | None
) -> list[str]:
    """The ``rlrun -m`` command line that trains the preset at its reference's frames."""
    ref = cfg.reference
    extra = [
        f"seed={','.join(str(s) for s in range(seeds))}",
        f"trainer.total_frames={ref.frames}",
        f"hydra.sweep.dir={cfg.hydra.sweep.dir}",
    ]
    evaluates = 0 < cfg.eval.every_frames <= ref.frames
    if ref.metric == "eval_return" and not evaluates:
        extra.append(f"eval.every_frames={ref.frames}")  # one evaluation, at the end
    own = ["--config-dir", config_dir] if config_dir else []
    return ["rlrun", "-m", *own, *overrides, *extra]


def train(args: Sequence[str]) -> tuple[int, Path]:
    """Start the check's sweep; its exit status and folder."""
    args, config_dir = list(args), None
    if "--config-dir" in args:  # the user's own presets, as rlrun takes them
        at = args.index("--config-dir")
        if at + 1 == len(args):
            raise ConfigError("--config-dir needs a folder: --config-dir DIR.")
        config_dir = args.pop(at + 1)
        del args[at]
    options, overrides = split_options(args, ("seeds",), "check")
    for override in overrides:
        if override.split("=", 1)[0].lstrip("+~") in OWN_KEYS:
            raise ConfigError(
                f"rlrun check sets the seeds and the frames itself ({override}): give "
                "seeds=N, and reference.frames=N for another budget."
            )
    try:
        seeds = int(options.get("seeds", DEFAULT_SEEDS))
    except ValueError:
        seeds = 0
    if seeds < 1:
        raise ConfigError(f"seeds={options['seeds']}: give a whole number of seeds, 1 or more.")
    cfg = compose(overrides, config_dir)
    if cfg.get("reference") is None:
        raise ConfigError(
            "this config has no reference to check against; pick a preset that has one: "
            + ", ".join(f"+experiment={p}" for p in presets_with_reference())
        )
    command = sweep_command(cfg, overrides, seeds, config_dir)
    folder = Path(cfg.hydra.sweep.dir).absolute()
    print(f"rlrun check: {' '.join(command)}", flush=True)
    sweep = subprocess.Popen([sys.executable, "-m", *command])  # python -m rlrun -m ...
    try:
        return sweep.wait(), folder
    except KeyboardInterrupt:  # Ctrl-C reached the sweep too: it stops after a saved batch
        return sweep.wait(), folder


def main(argv: Sequence[str]) -> int:
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="")
        return 0 if args else 2
    from rlrun.commands.report import build_report

    given: list[str] = []
    if not args[0].startswith("-") and ("=" not in args[0] or Path(args[0]).is_dir()):
        folder, given = Path(args[0]).absolute(), args[1:]
        bad = [a for a in given if not a.startswith("reference.")]
        if bad:
            raise ConfigError(
                f"rlrun check FOLDER takes reference.KEY=VALUE only, not {' '.join(bad)}."
            )
        if not folder.is_dir():
            raise ConfigError(f"{args[0]} is not a folder; see rlrun check --help.")
        status = 0
    else:
        status, folder = train(args)
        if status == STOPPED:
            print(f"rlrun check: stopped; continue with rlrun resume={shown(folder)}, then "
                  f"rlrun check {shown(folder)}", file=sys.stderr)  # fmt: skip
            return status
    try:
        _, comparisons = build_report(folder, reference_overrides=given)
    except FileNotFoundError as err:
        print(f"rlrun check: error: {err}", file=sys.stderr)
        return status or 1
    if not comparisons:
        raise ConfigError(f"no run under {shown(folder)} has a reference to compare with.")
    print(f"\nrlrun check: {shown(folder)} (report.md written there)")
    for comparison in comparisons:
        print(comparison.text())
    verdicts = {c.verdict for c in comparisons}
    if status or BELOW in verdicts or NOT_COMPARABLE in verdicts:
        return 1
    return 0
