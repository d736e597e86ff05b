"""User-facing errors: one short message that names the key, the bad value and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ConfigError(Exception):
    """A user's mistake in the config or command line; printed without a traceback (exit 2)."""


class RunError(Exception):
    """A run stopped by something outside rlrun's control (a collector worker process died);
    printed in one line without a traceback (exit 1), the cause's own traceback is above."""


def choose(key: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise a ConfigError listing them."""
    options = sorted(str(c) for c in choices)
    if str(value) in options:
        return str(value)
    near = difflib.get_close_matches(str(value), options, n=3)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    raise ConfigError(f"{key}={value} is not valid; choose one of: {', '.join(options)}.{hint}")


def _schema_keys(node: type | None = None, prefix: str = "") -> list[str]:
    """Every dotted key of the typed schema (``trainer.total_frames``, ...)."""
    import dataclasses
    import typing

    from rlrun.config import RootConfig

    node = node or RootConfig
    keys = []
    for name, hint in typing.get_type_hints(node).items():
        keys.append(prefix + name)
        if dataclasses.is_dataclass(hint):
            keys += _schema_keys(hint, f"{prefix}{name}.")
    return keys


def _nearest_key(key: str) -> str | None:
    """The schema key closest to a misspelt one: same parent first, then anywhere."""
    keys = _schema_keys()
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

    from rlrun.config import ALGO_SCHEMAS

    preset = text.split("In 'experiment/", 1)[1].split("'", 1)[0]
    key = text.split("full_key: ", 1)[1].split()[0]
    schema = text.split("not in '", 1)[1].split("'", 1)[0]
    group = key.split(".", 1)[0]
    chosen = next((n for n, s in ALGO_SCHEMAS.items() if s.__name__ == schema), None)
    if chosen is None:
        return f"+experiment={preset} sets {key}, which your {group} config does not have."
    presets = sorted(
        f.name[:-5]
        for f in files("rlrun.conf").joinpath("experiment").iterdir()
        if f.name.startswith(chosen) and f.name.endswith(".yaml")
    )
    use = f"use +experiment={' or +experiment='.join(presets)}, or " if presets else ""
    return (
        f"+experiment={preset} sets {key}, which {group}={chosen} does not have (a preset is "
        f"made for its own algorithm): {use}drop {group}={chosen} to run the {preset} preset."
    )
