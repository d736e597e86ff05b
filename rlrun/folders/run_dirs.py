"""Run and sweep folders, a run's saved config with overrides on top, and the ``key=value``
arguments of ``rlrun eval`` and ``rlrun export``: all they check before a policy is rebuilt.

Nothing here imports torch, so a mistake in those arguments (a folder rlrun did not create, an
option out of range, a key the run does not have) answers in well under a second, not after the
seconds torch, TensorDict and TorchRL take to import (``rlrun/commands/loading.py`` then rebuilds
the run).
"""

from __future__ import annotations

import difflib
import json
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun.errors import ConfigError

RUN_CONFIG = Path(".hydra") / "config.yaml"
# keys that only place training (collector, replay buffer, CUDA graphs): reset to their CPU
# values so that device=cpu alone is enough to load a run trained on a GPU
TRAINING_PLACEMENT = {
    "collector.device": None,
    "replay_buffer.device": "cpu",
    "replay_buffer.pin_memory": "false",
    "algo.cudagraphs": False,
    "policy.cudagraphs": False,
}

MULTIRUN_YAML = "multirun.yaml"  # Hydra's sweepers save the sweep's config there


def load_saved(path: Path) -> Any:
    """A YAML file a run or sweep saved (its config, overrides, Hydra's record), or one line
    naming the file and the fix when it cannot be read (truncated, edited into invalid YAML)."""
    from yaml import YAMLError

    try:
        return OmegaConf.load(path)
    except (OSError, YAMLError, ValueError) as err:
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ConfigError(
            f"{path} cannot be read ({type(err).__name__}: {why}): the folder's saved config is "
            "damaged; restore the file from a copy, or start a new run."
        ) from None


def is_run_dir(path: Path) -> bool:
    return (path / RUN_CONFIG).is_file()


def is_sweep_dir(path: Path) -> bool:
    """A Hydra multirun folder (``multirun.yaml``), not one of its jobs."""
    return (path / MULTIRUN_YAML).is_file() and not (path / ".hydra" / "overrides.yaml").is_file()


def run_folders(path: Path, command: str) -> list[Path]:
    """``[path]`` for a run folder, every job folder (numbered order) for a sweep folder."""
    path = path.expanduser().absolute()
    if is_run_dir(path):
        return [path]
    if is_sweep_dir(path):
        jobs = [p for p in path.iterdir() if is_run_dir(p)]
        if jobs:
            return sorted(jobs, key=lambda p: (not p.name.isdigit(), p.name.zfill(12)))
        raise ConfigError(f"rlrun {command} {path}: this sweep folder holds no job folder yet.")
    raise ConfigError(
        f"rlrun {command} {path}: not a run folder (no {RUN_CONFIG} there) nor a sweep folder "
        "(no multirun.yaml); give a folder that rlrun created, e.g. outputs/<date>/<time>."
    )


def split_options(args: Sequence[str], own: Sequence[str], command: str) -> tuple[dict, list]:
    """``key=value`` arguments: the command's own options (``own``), and overrides of the run's
    config (the rest)."""
    options, overrides = {}, []
    for arg in args:
        key, eq, value = arg.partition("=")
        if not eq or arg.startswith("-"):
            raise ConfigError(f"rlrun {command}: {arg} is not key=value; see rlrun --help.")
        if key in own:
            options[key] = value
        else:
            overrides.append(arg)
    return options, overrides


def _keys(node: Any, prefix: str = "") -> list[str]:
    if not isinstance(node, DictConfig):
        return []
    found = []
    for key, value in node.items_ex(resolve=False):
        found.append(f"{prefix}{key}")
        found += _keys(value, f"{prefix}{key}.")
    return found


def apply_overrides(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Hydra-syntax ``key=value`` overrides on a saved config: only keys the run has (``+key=``
    adds one), values parsed as Hydra parses them (``env.obs_mask=[0,2]``, ``null``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as err:
        raise ConfigError(str(err).splitlines()[0]) from None
    for override in parsed:
        key, line = override.key_or_group, override.input_line
        if override.is_sweep_override() or override.type == OverrideType.DEL:
            raise ConfigError(f"{line}: give one value per key (no sweeps, no ~deletions).")
        current = OmegaConf.select(cfg, key, default=KeyError)
        if current is KeyError and override.type != OverrideType.ADD:
            near = difflib.get_close_matches(key, _keys(cfg), n=1, cutoff=0.6)
            hint = f" Did you mean {near[0]}?" if near else ""
            raise ConfigError(
                f"{key} is not a key of this run's config.{hint} (To add one, write +{line})"
            )
        value = override.value()
        if isinstance(current, DictConfig) and not isinstance(value, dict):
            raise ConfigError(
                f"{line}: a saved run has no config groups to pick; override its keys instead "
                f"(e.g. {key}.id=... for env), as they are in {RUN_CONFIG}."
            )
        OmegaConf.update(cfg, key, value, merge=False, force_add=True)


def run_config(run_dir: Path, overrides: Sequence[str], device: str | None) -> DictConfig:
    """The run's saved composed config with ``overrides`` applied; ``device`` (if given) is the
    one to load on."""
    cfg = load_saved(run_dir / RUN_CONFIG)
    upgrade_network_factory(cfg)
    apply_overrides(cfg, overrides)
    if device is not None:
        cfg.device = device
    for key, value in TRAINING_PLACEMENT.items():
        if OmegaConf.select(cfg, key, default=KeyError) is not KeyError:
            OmegaConf.update(cfg, key, value, merge=False)
    return cfg


def upgrade_network_factory(cfg: DictConfig) -> None:
    """A run saved before rlrun's modules moved into packages (2026-11-27) names its network
    factory by its old path: the generic factories (and the CNN ones) by their new ones, an
    algorithm's own (``rlrun.policies.make_<algorithm>_networks``) as ``null``, which builds
    that algorithm's networks, the same ones, from its declaration."""
    target = OmegaConf.select(cfg, "policy._target_")
    if not isinstance(target, str) or not target.startswith(("rlrun.policies.", "rlrun.cnn.")):
        return
    module, name = target.rsplit(".", 1)
    generic = module == "rlrun.cnn" or name in ("make_actor_critic", "make_qvalue_actor")
    cfg.policy._target_ = f"rlrun.builders.{module.split('.')[1]}.{name}" if generic else None


def shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (shorter to copy)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def check_run_folder(run_dir: Path) -> None:
    """The run folder can be created and written (found by writing a temporary file into its
    nearest existing parent, which is removed at once)."""
    parent = run_dir.absolute()
    while not parent.exists():
        parent = parent.parent
    problem = None
    if not parent.is_dir():
        problem = f"{parent} is a file"
    else:
        try:
            with tempfile.TemporaryFile(dir=parent):
                pass
        except OSError as err:
            problem = f"{parent} is not writable ({err.strerror})"
    if problem is not None:
        raise ConfigError(
            f"cannot create the run folder {run_dir}: {problem}. Run rlrun from a writable "
            "folder, or set hydra.run.dir=<a writable path> (hydra.sweep.dir with -m)."
        )


def check_folder_unused(folder: Path, sweep: bool) -> None:
    """A fresh run or sweep never writes into the folder of an earlier one (an explicit
    ``hydra.run.dir``, a requeued array job): it would append to that run's metrics, overwrite
    its summary and mix checkpoints. ``resume=`` continues one instead (issue #35)."""
    if sweep:
        held = (folder / "multirun.yaml").is_file() or any(
            (job / ".hydra" / "config.yaml").is_file() for job in _subfolders(folder)
        )
    else:
        held = (folder / ".hydra" / "config.yaml").is_file()
    if not held:
        return
    what = "sweep" if sweep else "run"
    summary = folder / "summary.json"
    state = ""
    if not sweep and summary.is_file():
        try:
            saved = json.loads(summary.read_text())
            state = f": {saved.get('status')} at {saved.get('frames')} frames"
        except (OSError, ValueError):
            pass
    raise ConfigError(
        f"{folder} holds a {what} already{state}; continue it with rlrun resume={folder}, or "
        f"give a new run another folder (hydra.{'sweep' if sweep else 'run'}.dir). Nothing there "
        "was changed."
    )


def _subfolders(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir()] if folder.is_dir() else []


# what a run writes into its folder (Hydra's .hydra/ and job log aside): a refused run's go
RUN_ENTRIES = (".rlrun.lock", "environment.json", "summary.json", "csv", "tensorboard", "wandb",
               "mlflow", "checkpoints", "replay_buffer", "videos")  # fmt: skip


def remove_refused_run(run_dir: Path, job_log: str) -> None:
    """Undo a fresh run refused after Hydra made its folder (a mistake only the built env or
    policy shows): what Hydra and rlrun wrote there goes (``.hydra/``, the job's log
    ``job_log``, :data:`RUN_ENTRIES`), then the folder and its parents up to the working folder
    where they are left empty. Nothing else is touched: a ``hydra.run.dir`` of yours keeps
    what it held. The refusal leaves nothing for ``rlrun resume`` or ``rlrun report`` to find."""
    for name in (".hydra", job_log, *RUN_ENTRIES):
        entry = run_dir / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        elif entry.exists() or entry.is_symlink():
            entry.unlink(missing_ok=True)
    cwd = Path.cwd().resolve()
    folder = run_dir.resolve()
    while folder != cwd and cwd in folder.parents:
        try:
            folder.rmdir()  # only an empty one
        except OSError:
            return
        folder = folder.parent
