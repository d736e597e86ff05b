"""User-facing errors: one short message that names the key, the bad value and the fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ConfigError(Exception):
    """A user's mistake in the config or command line; printed without a traceback (exit 2)."""


class RunError(Exception):
    """A run stopped by something outside rlrun's control (a collector worker process died);
    printed in one line without a traceback (exit 1), the cause's own traceback is above."""


class EnvError(RunError):
    """The env broke a rule the run relies on while it ran (an action mask with no legal action
    where the agent must act): a bug in the env, printed in one line that names the rule and
    where it was broken, without a traceback (exit 1)."""


def choose(key: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices``, else raise a ConfigError listing them."""
    options = sorted(str(c) for c in choices)
    if str(value) in options:
        return str(value)
    near = difflib.get_close_matches(str(value), options, n=3)
    hint = f" Did you mean {', '.join(near)}?" if near else ""
    raise ConfigError(f"{key}={value} is not valid; choose one of: {', '.join(options)}.{hint}")
