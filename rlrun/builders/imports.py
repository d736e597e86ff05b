"""What a config names by dotted path (``_target_``, ``collector.policy_factory``), imported the
way Hydra's ``_target_`` lookup does it (the longest importable module, then attributes), with
one line that says why when it cannot be. Light: the console script checks every path before
anything heavy is imported; builders resolve the same paths when they build.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from rlrun.errors import ConfigError


def _lookup(path: str) -> tuple[Any, str | None]:
    """``(object, None)`` for ``pkg.module.name``, or ``(None, why not)``."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and not module_name.startswith(err.name):
                return None, f"importing {module_name} failed: {err}"  # a dependency is missing
            continue
        except Exception as err:  # the module itself fails to import
            return None, f"importing {module_name} failed: {type(err).__name__}: {err}"
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return None, f"{module_name} has no attribute {attr}"
            obj = getattr(obj, attr)
        return obj, None
    return None, f"no module named {parts[0]}"


@functools.cache
def importable(path: str) -> str | None:
    """None if ``path`` imports, else why not."""
    return _lookup(path)[1]


def resolve(path: str, key: str) -> Any:
    """The object ``path`` names; a ConfigError naming ``key`` when it does not import."""
    found, why = _lookup(path)
    if why is not None:
        raise ConfigError(
            f"{key}={path} cannot be imported: {why}. Install its package, or put its folder "
            "on PYTHONPATH."
        )
    return found
