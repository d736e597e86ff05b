"""Gymnasium ids: the modules of yours that register them (``env.imports``), and the lookup that
names the nearest registered ids when one is unknown. Light (gymnasium, no torch): the console
script checks an id before anything heavy is imported, and every process that makes envs
(``rlrun/builders/envs.py``: collector and env workers too) imports your modules again.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from rlrun.errors import ConfigError


def import_env_modules(modules: Sequence[str]) -> None:
    """``env.imports``: your modules that register gymnasium ids when imported (as
    rl-baselines3-zoo's ``--gym-packages``), imported before an id is looked up: in this check, and
    by ``rlrun/builders/envs.py`` in every process that makes envs (collector and env workers)."""
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:  # not installed, or failing on import: one line either way
            where = "" if isinstance(err, ImportError) else " (it failed on import)"
            raise ConfigError(
                f"env.imports: cannot import {name}{where}: {type(err).__name__}: {err}. "
                "Install the package, or put its folder on PYTHONPATH."
            ) from None


def check_env_id(env_id: str) -> None:
    """Fail with the nearest registered ids when gymnasium does not know ``env_id`` (ale-py
    registers the ``ALE/...`` ids on request)."""
    import difflib

    import gymnasium

    if env_id.startswith("ALE/"):
        try:
            import ale_py
        except ImportError:
            raise ConfigError(
                "Atari envs (ALE/...) need ale-py: pip install 'rlrun[atari]'."
            ) from None
        gymnasium.register_envs(ale_py)
    if env_id in gymnasium.envs.registry:
        return
    near = difflib.get_close_matches(env_id, list(gymnasium.envs.registry), n=3, cutoff=0.5)
    hint = f" Nearest ids: {', '.join(near)}." if near else ""
    raise ConfigError(
        f"env.id={env_id} is not a registered gymnasium env.{hint} Your own env: "
        "env.imports=[<module that registers it>]."
    )


def vmas_scenarios() -> list[str]:
    """The scenario names VMAS ships (its ``vmas/scenarios/*.py`` and the MPE ones under
    ``mpe/``), found without importing it: VMAS imports torch."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("vmas")
    if spec is None or spec.origin is None:
        return []
    root = Path(spec.origin).parent / "scenarios"
    found = [p for d in (root, root / "mpe") for p in d.glob("*.py")]
    return sorted(p.stem for p in found if not p.stem.startswith("_"))


def check_vmas_scenario(name: str) -> None:
    """Fail with the nearest scenario names when VMAS has no scenario ``name``."""
    import difflib

    known = vmas_scenarios()
    if name in known:
        return
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"nearest: {', '.join(near)}" if near else f"one of: {', '.join(known)}"
    raise ConfigError(f"env.id={name} is not a VMAS scenario ({hint}).")


def check_pettingzoo_module(name: str) -> None:
    """Fail in one line when ``name`` is not a module that can be imported (PettingZoo envs
    are named by the module that makes them, e.g. ``mpe2.simple_spread_v3``)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # its parent package is missing, or an empty name
        found = False
    if not found:
        raise ConfigError(
            f"env.id={name} is not an importable module; PettingZoo envs are named by the "
            "module whose parallel_env makes them, e.g. env.id=mpe2.simple_spread_v3."
        )
