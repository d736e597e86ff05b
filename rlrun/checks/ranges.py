"""Numbers against the ranges the schemas give them (``rlrun/config.py``: ``ranged``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun.config import Range
from rlrun.errors import ConfigError


def _ranged_fields(node: DictConfig, prefix: str) -> Iterator[tuple[str, Any, Range]]:
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return  # a user's own option file without the schema
    for f in dataclasses.fields(schema):
        value = node.get(f.name)
        if isinstance(value, DictConfig):  # a group's node (a plain mapping yields nothing)
            yield from _ranged_fields(value, f"{prefix}{f.name}.")
        elif "range" in f.metadata and isinstance(value, int | float):
            yield f"{prefix}{f.name}", value, f.metadata["range"]


def check_ranges(cfg: DictConfig) -> None:
    """Every number the schema bounds (``rlrun/config.py``: ``ranged``) is within its range."""
    check_node_ranges(cfg)
    sizes = cfg.policy.get("hidden_sizes") or []
    if any(int(size) < 1 for size in sizes):
        raise ConfigError(f"policy.hidden_sizes={list(sizes)}: every layer needs >= 1 unit.")


def check_node_ranges(node: DictConfig, prefix: str = "") -> None:
    """The numbers of one typed node (``prefix``: its dotted key) within their ranges."""
    for key, value, allowed in _ranged_fields(node, prefix):
        if not allowed.admits(value):
            raise ConfigError(f"{key}={value} is out of range: it must be {allowed}.")
