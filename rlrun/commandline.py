"""The console script's command line, composed and checked before Hydra creates a folder, and
Hydra's composition errors said in one line.

Hydra's own parser reads ``rlrun ARGS``; every job of a basic sweep (or a resumed sweep's
unfinished jobs) is composed and validated (``rlrun/validation.py``), and the folder Hydra will
write into is checked: writable, not held by another run, not an earlier run's. The console
script then pins that folder and holds it (``rlrun/folders/folder_lock.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import sys
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf

from rlrun.algorithms import register_schemas, shipped
from rlrun.config import PolicyConfig, RootConfig, store_schemas
from rlrun.errors import ConfigError
from rlrun.folders.folder_lock import held_by, refusal
from rlrun.folders.resume import RESUME_SWEEPER
from rlrun.folders.run_dirs import check_folder_unused, check_run_folder
from rlrun.validation import validate


def register_configs() -> None:
    """Before Hydra composes anything: rlrun's schemas in its ConfigStore, the root's
    (``rlrun/config.py``) and each shipped algorithm's (``rlrun/algorithms/``), and the folder
    resolver (idempotent)."""
    store_schemas()
    register_schemas(ConfigStore.instance())


MAX_CHECKED_JOBS = 256  # a larger sweep's further jobs are checked when they start


@dataclasses.dataclass(frozen=True)
class Checked:
    """What :func:`check_command_line` found: the folder Hydra will write into and its key
    (``hydra.run.dir`` or ``hydra.sweep.dir``), and the sweep's fixed ``key=value`` overrides
    to give Hydra as ``++key=value`` (see :func:`keys_of_swept_groups`)."""

    key: str
    folder: Path
    force: tuple[str, ...] = ()
    mode: Any = None  # the config's hydra.mode (a RunMode, or None: -m decides)
    config: DictConfig | None = None  # one run's config as composed, before any check read it
    overrides: tuple[str, ...] = ()  # what ``config`` was composed with


SWEEP_ONLY = ("hydra/launcher", "hydra/sweeper", "hparams_search")  # groups Hydra reads with -m


def check_sweep_settings(overrides: list[str]) -> None:
    """A launcher, a sweeper or a search acts on a sweep only: without ``-m`` Hydra runs one job
    in this process and ignores them, without a word."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return  # Hydra's own parser says what is wrong, with the composition
    for override in parsed:
        group = override.key_or_group
        if group not in SWEEP_ONLY or override.is_delete() or override.value() in (None, "null"):
            continue
        raise ConfigError(
            f"{override.input_line} takes effect in a sweep only (Hydra ignores it without -m): "
            f"add -m to sweep (rlrun -m ... {override.input_line}), or drop it to train one run "
            "here."
        )


def check_command_line(args: list[str], job_name: str) -> Checked | None:
    """Compose what ``rlrun ARGS`` will run, with Hydra's own parser, and check it (every job
    of a basic sweep) before Hydra creates a run or sweep folder, for the console script to
    pin and hold that folder (``rlrun/folders/folder_lock.py``); None for Hydra's info modes
    (``--cfg``, ``--info``, ...) and custom primary configs, which are left to Hydra. The
    jobs are composed as Hydra names them (``job_name``), so that a single run's config is
    the one Hydra would compose, for Hydra to take (:attr:`Checked.config`)."""
    from hydra import compose, initialize_config_module
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    from rlrun.compat.hydra import args_parser, basic_sweep_jobs

    parsed = args_parser().parse_args(args)
    if parsed.multirun and (parsed.cfg or parsed.info or parsed.shell_completion):
        raise ConfigError(
            "-m (a sweep) and --cfg, --info or --shell-completion cannot go together; drop -m "
            "to see one job's config."
        )
    if parsed.cfg or parsed.info or parsed.hydra_help or parsed.shell_completion:
        return None
    if parsed.config_path or parsed.config_name or parsed.experimental_rerun:
        return None
    overrides = list(parsed.overrides)
    if not parsed.multirun:
        check_sweep_settings(overrides)
    extra = []
    if parsed.config_dir:
        extra = [f"hydra.searchpath=[file://{Path(parsed.config_dir).absolute()}]"]
    jobs = [overrides]
    resuming = f"hydra/sweeper={RESUME_SWEEPER}" in overrides
    enumerated = False  # every job of the sweep is in ``jobs``
    if parsed.multirun and resuming:
        jobs = resumed_jobs(overrides)
    elif parsed.multirun:
        try:
            jobs = basic_sweep_jobs(OverridesParser.create().parse_overrides(overrides))
            enumerated = len(jobs) <= MAX_CHECKED_JOBS
        except HydraException:  # an interval or other sweeper syntax: check the fixed part
            fixed = OverridesParser.create().parse_overrides(overrides)
            jobs = [[o.input_line for o in fixed if not o.is_sweep_override()]]
    force: tuple[str, ...] = ()
    single = None  # the config of a run (no -m) on rlrun's own config tree
    with initialize_config_module("rlrun.conf", version_base="1.3", job_name=job_name):
        for job in jobs[:MAX_CHECKED_JOBS]:
            cfg = compose("config", overrides=[*job, *extra], return_hydra_config=True)
            if not (parsed.multirun or extra):
                single = copy.deepcopy(cfg)  # 0.02 s: as Hydra gave it, whatever reads it
            try:
                validate(cfg)
                key = "hydra.sweep.dir" if parsed.multirun else "hydra.run.dir"
                folder = Path(OmegaConf.select(cfg, key))
                check_run_folder(folder)
                resumed = cfg.resume or f"hydra/sweeper={RESUME_SWEEPER}" in overrides
                holder = held_by(folder)
                if holder is not None:
                    what = "resume" if resumed else "sweep" if parsed.multirun else "run"
                    raise refusal(folder, holder, what)
                if not resumed:
                    check_folder_unused(folder, sweep=parsed.multirun)
            except ConfigError as err:
                if len(jobs) == 1:
                    raise
                raise ConfigError(f"in the sweep's job {' '.join(job)}: {err}") from None
        if enumerated:
            groups = set(cfg.hydra.runtime.choices)
            force = keys_of_swept_groups(overrides, groups, extra)
    return Checked(key, folder, force, cfg.hydra.mode, single, tuple(overrides))


def keys_of_swept_groups(
    overrides: list[str], groups: set[str], extra: list[str]
) -> tuple[str, ...]:
    """The sweep's fixed ``key=value`` overrides whose key only the swept groups' options have.

    Hydra composes a sweep's own config once with its swept overrides left out (its
    ``multirun``): ``rlrun -m +experiment=sac,td3 algo.utd_ratio=2`` fails there, on the default
    algorithm's config, although every job has the key. Every job was composed and checked with
    these overrides as given (an unknown key is refused), so they go to Hydra as
    ``++key=value``, which sets the key where it is and adds it where it is not yet."""
    from hydra import compose
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    if not any(o.is_sweep_override() and o.key_or_group in groups for o in parsed):
        return ()
    fixed = [o for o in parsed if not o.is_sweep_override()]
    plain = [
        o for o in fixed
        if o.package is None and not (o.is_add() or o.is_force_add() or o.is_delete())
        and o.key_or_group not in groups and not o.key_or_group.startswith("hydra")
    ]  # fmt: skip
    rest = [o.input_line for o in fixed if o not in plain]
    sweep_level = compose("config", overrides=[*rest, *extra])
    absent = object()
    return tuple(
        o.input_line
        for o in plain
        if OmegaConf.select(sweep_level, o.key_or_group, default=absent) is absent
    )


def resumed_jobs(overrides: list[str]) -> list[list[str]]:
    """The command lines ``rlrun resume=<sweep>`` will run: each unfinished job's own (its saved
    overrides and the new ones; ``rlrun/folders/resume.py``). Its fixed overrides alone are not a
    job: a sweep over presets (``+experiment=a2c,ddpg``) may be valid only with its swept keys. With
    nothing left to run, the fixed overrides, for the folder checks."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlrun.folders.resume import plan_sweep_resume

    sweep_dir = next(
        o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("hydra.sweep.dir=")
    )
    task = [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    plans = plan_sweep_resume(Path(sweep_dir), task, OverridesParser.create())
    keep = [o for o in overrides if o not in task]  # the sweep's hydra overrides
    return [[*keep, *plan.overrides] for plan in plans] or [overrides]


def _schema_keys(node: type | None = None, prefix: str = "") -> list[str]:
    """Every dotted key of the typed schema (``trainer.total_frames``, ...)."""
    import dataclasses
    import typing

    node = node or RootConfig
    keys = []
    for name, hint in typing.get_type_hints(node).items():
        keys.append(prefix + name)
        if dataclasses.is_dataclass(hint):
            keys += _schema_keys(hint, f"{prefix}{name}.")
    return keys


def _known_keys() -> list[str]:
    """Every dotted key of the root schema and of every shipped algorithm's schemas (``algo``
    and ``policy`` are typed per option, so the root's schema does not list their keys)."""
    keys = [*_schema_keys(), *_schema_keys(PolicyConfig, "policy.")]
    for algorithm in shipped().values():
        if algorithm.schema is not None:
            keys += _schema_keys(algorithm.schema, "algo.")
        for schema in algorithm.policy_schemas.values():
            keys += _schema_keys(schema, "policy.")
    return list(dict.fromkeys(keys))


def _nearest_key(key: str) -> str | None:
    """The schema key closest to a misspelt one: same parent first, then anywhere."""
    keys = _known_keys()
    parent = key.rpartition(".")[0]
    siblings = [k for k in keys if k.rpartition(".")[0] == parent]
    near = difflib.get_close_matches(key, siblings, n=1, cutoff=0.8)
    if not near:
        tails = {k.rsplit(".", 1)[-1]: k for k in reversed(keys)}
        tail = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(tails), n=1, cutoff=0.8)
        near = [tails[tail[0]]] if tail else []
    return near[0] if near else None


def describe_config_error(err: BaseException) -> str:
    """Turn Hydra's multi-line composition error into one or two lines with the fix."""
    text = str(err).strip()
    cause = str(err.__cause__).strip() if err.__cause__ is not None else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if "Could not find" in text and "Available options in" in text:
        missing = text.split("Could not find '", 1)[1].split("'", 1)[0]
        group, _, option = missing.rpartition("/")
        idx = next(i for i, ln in enumerate(lines) if ln.startswith("Available options"))
        options = [
            ln
            for ln in lines[idx + 1 :]
            if not ln.startswith(("Config search", "provider=", "rlrun_", "_"))  # schemas, bases
        ]
        near = difflib.get_close_matches(option, options, n=1)
        hint = f" Did you mean {group}={near[0]}?" if near else ""
        return f"{group}={option} is not an option; choose one of: {', '.join(options)}.{hint}"
    if "Could not override" in text and "not in" in cause:
        key = text.split("Could not override '", 1)[1].split("'", 1)[0]
        inner = cause.split("full_key: ", 1)[1].split()[0] if "full_key: " in cause else key
        if inner.startswith(key + "."):  # key={...} brought a key that key does not have yet
            return (
                f"{key}={{...}} is merged into {key}, which has no key {inner} yet: add it with "
                f"+{inner}=... (and drop one {key} has with ~{key}.<name>)."
            )
        near = _nearest_key(key)
        hint = f" Did you mean {near}?" if near else ""
        return f"{key} is not a known key.{hint} (To add a new key, write +{key}=...)"
    if "Invalid value '" in cause and "expected one of [" in cause:  # a choice (rlrun/config.py)
        value = cause.split("Invalid value '", 1)[1].split("'", 1)[0]
        options = cause.split("expected one of [", 1)[1].split("]", 1)[0].split(", ")
        key = cause.split("full_key: ", 1)[1].split()[0] if "full_key: " in cause else "value"
        near = difflib.get_close_matches(value, options, n=1)
        hint = f" Did you mean {near[0]}?" if near else ""
        return f"{key}={value} is not valid; choose one of: {', '.join(options)}.{hint}"
    if text.startswith("In 'experiment/") and "not in '" in text and "full_key: " in text:
        return _preset_mismatch(text)
    first = lines[0] if lines else type(err).__name__
    detail = cause.splitlines()[0] if cause else (lines[1] if len(lines) > 1 else "")
    return f"{first}: {detail}" if detail else first


def _preset_mismatch(text: str) -> str:
    """``+experiment=ppo algo=dqn``: the preset sets keys of another algorithm (or policy)."""
    from importlib.resources import files

    preset = text.split("In 'experiment/", 1)[1].split("'", 1)[0]
    key = text.split("full_key: ", 1)[1].split()[0]
    schema = text.split("not in '", 1)[1].split("'", 1)[0]
    group = key.split(".", 1)[0]
    schemas = {n: a.schema.__name__ for n, a in shipped().items() if a.schema is not None}
    fits = [n for n, s in schemas.items() if s == schema]  # MADDPG and IDDPG share theirs
    typed = [n for n in fits if f"{group}={n}" in sys.argv[1:]]
    chosen = (typed or fits or [None])[0]
    if chosen is None:
        return f"+experiment={preset} sets {key}, which your {group} config does not have."
    presets = sorted(
        f.name[:-5]
        for f in files("rlrun.conf").joinpath("experiment").iterdir()
        if f.name.startswith(chosen) and f.name.endswith(".yaml")
    )
    task = preset.partition("_")[2]  # mappo_navigation: maddpg_navigation first, if there is one
    presets = [p for p in presets if task and p.endswith(f"_{task}")] or presets
    use = f"use +experiment={' or +experiment='.join(presets)}, or " if presets else ""
    return (
        f"+experiment={preset} sets {key}, which {group}={chosen} does not have (a preset is "
        f"made for its own algorithm): {use}drop {group}={chosen} to run the {preset} preset."
    )
