"""Everything about a run that can be checked before anything heavy is built, checked once, in
this order.

Hydra has already rejected unknown keys, wrong types and invalid choices (``rlrun/config.py``).
:func:`validate` adds what a schema cannot say, each rule beside what it checks: numeric ranges
and the groups' own rules (``rlrun/checks/``), the algorithm's, read from its declaration
(``rlrun/algorithms/``), importable ``_target_``s, the devices (``rlrun/builders/devices.py``),
Ray's size (``rlrun/builders/ray_runtime.py``) and the optional packages a choice needs. The
console script runs it on every job before Hydra creates a run folder, so a rejected run leaves
nothing on disk (``rlrun/commandline.py``); every job runs it again, for launchers and sweepers
that compose jobs themselves.
"""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.algorithms import declared
from rlrun.builders.env_ids import import_env_modules
from rlrun.builders.hook_entries import parse_hooks
from rlrun.builders.ray_runtime import check_ray_cpus, check_ray_gpus
from rlrun.checks.algorithms import check_algorithm
from rlrun.checks.buffers import check_replay_buffer
from rlrun.checks.collectors import check_collector
from rlrun.checks.envs import check_env, check_observations
from rlrun.checks.learners import check_learners
from rlrun.checks.loggers import check_wandb_credentials
from rlrun.checks.offline import check_offline
from rlrun.checks.packages import check_optional_packages
from rlrun.checks.policies import check_policy
from rlrun.checks.ranges import check_ranges
from rlrun.checks.targets import check_targets


def validate(cfg: DictConfig) -> None:
    """Raise a one-line ConfigError for the first thing in ``cfg`` that cannot run (the
    checks that import nothing heavy first)."""
    check_ranges(cfg)
    check_optional_packages(cfg)
    import_env_modules(cfg.env.imports)  # they register the ids the checks below look up
    check_wandb_credentials(cfg.logger)
    check_collector(cfg.collector, cfg.env)
    check_observations(cfg)
    check_replay_buffer(cfg.replay_buffer, cfg.env, cfg.collector)
    check_policy(cfg.policy)
    hooks = parse_hooks(cfg.hooks)  # names and hook points
    algorithm = declared(cfg.algo)  # algo._target_: rlrun's or yours, imported light
    check_algorithm(cfg, algorithm)
    check_offline(cfg, algorithm)
    check_ray_cpus(cfg)
    check_learners(cfg, algorithm, hooks)
    check_env(cfg)  # makes the env once with gymnasium (env.backend=envpool: imports torchrl)

    from rlrun.builders.devices import placement  # imports torch

    where = placement(cfg)  # devices that exist, and combinations that can work
    check_ray_gpus(cfg, where)
    check_targets(cfg, hooks)
