"""The ``hooks`` mapping of the config, checked: built-in hook names and the Trainer's hook
points. Nothing heavy is imported here, so a mistyped hook is refused in under a second, before
torch is imported; ``rlrun/builders/hooks.py`` builds the hooks these entries name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from rlrun.errors import ConfigError, choose

HOOK_POINTS = (
    "batch_process",
    "pre_steps_log",
    "pre_optim_steps",
    "pre_epoch_log",
    "pre_epoch",
    "process_optim_batch",
    "post_loss",  # after each optimisation step, with the loss's priorities in the batch
    "post_optim",
    "post_optim_log",
    "post_epoch_log",
    "post_epoch",
    "post_optim_complete_log",
    "post_steps",
    "post_steps_log",
    "setup",
    "shutdown",
)

# the built-in hooks by name; rlrun/builders/hooks.py BUILTIN_HOOKS builds each (and checks this
# list)
BUILTIN_NAMES = (
    "log_scalar",
    "count_frames_log",
    "reward_normalizer",
    "batch_subsampler",
    "select_keys",
    "clear_cuda_cache",
    "update_weights",
    "log_validation_reward",
    "replay_buffer",
    "target_updater",
    "lr_scheduler",
    "early_stopping",
)


@dataclass
class HookEntry:
    """One checked entry of the ``hooks`` mapping."""

    name: str
    builtin: str | None  # a built-in's name; None for a user's ``_target_``
    points: list[str]  # user hooks: where to call it ([]: its own ``register``)
    options: dict[str, Any]  # built-in options, or the ``_target_`` and its arguments


def parse_hooks(hooks_cfg: DictConfig) -> list[HookEntry]:
    """Check the ``hooks`` mapping (names, hook points) before anything heavy is built.

    ``{_target_: pkg.Class, at: point|[points], **kwargs}`` is a user's object; any other entry
    is a built-in (its key, or its ``name:``) and holds that hook's options.
    """
    entries = []
    for key, spec in OmegaConf.to_container(hooks_cfg, resolve=True).items():
        name, options = str(key), dict(spec or {})
        if "_target_" in options:
            at = options.pop("at", None)
            points = [at] if isinstance(at, str) else list(at or [])
            for point in points:
                choose(f"hooks.{name}.at", point, HOOK_POINTS)
            entries.append(HookEntry(name, None, points, options))
            continue
        builtin = options.pop("name", name)
        if builtin not in BUILTIN_NAMES:
            raise ConfigError(
                f"hooks.{name}: {builtin} is not a built-in hook; choose one of: "
                f"{', '.join(sorted(BUILTIN_NAMES))}, or give your own class as "
                f"+hooks.{name}._target_=pkg.Class +hooks.{name}.at=<hook point>."
            )
        entries.append(HookEntry(name, builtin, [], options))
    return entries


SAMPLE_POINTS = ("process_optim_batch", "post_loss")  # where a hook sees each replay sample
SAMPLE_BUILTINS = ("batch_subsampler", "reward_normalizer")  # built-ins registered there


def reads_samples(entries: list[HookEntry]) -> bool:
    """Whether a hook of the ``hooks`` mapping acts on each sample the update step trains on (at
    ``process_optim_batch`` or ``post_loss``; a user object that registers itself may): the
    off-policy update step then leaves sampling to the Trainer's hooks instead of fusing it."""
    return any(
        entry.builtin in SAMPLE_BUILTINS
        or (entry.builtin is None and not entry.points)
        or any(point in SAMPLE_POINTS for point in entry.points)
        for entry in entries
    )
