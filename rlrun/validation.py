"""Everything about a run that can be checked before anything heavy is built, checked once.

Hydra has already rejected unknown keys, wrong types and invalid choices (``rlrun/config.py``).
:func:`validate` adds what a schema cannot say: numeric ranges, rules that span groups (the
algorithm against the env's action space, a recurrent policy against the algorithm, the collector
against its policy factory, evaluation against the env), importable ``_target_``s, the devices
(``rlrun/builders/devices.py``) and the optional packages a choice needs. :func:`check_run_folder` says
whether the run folder can be written. The console script runs both before Hydra creates the run
folder, so a rejected run leaves nothing on disk (``rlrun/cli.py``); every job runs
:func:`validate` again, for launchers and sweepers that compose jobs themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlrun.builders.env_ids import check_env_id, import_env_modules
from rlrun.builders.hook_entries import HookEntry, parse_hooks
from rlrun.config import Range
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import is_run_dir

if TYPE_CHECKING:
    from rlrun.builders.devices import Placement

# what each optional choice imports, and the extra that installs it
EXTRAS = {
    "torchsnapshot": "torchsnapshot",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "tensorboard": "tensorboard",
    "moviepy": "video",
    "hydra_plugins.hydra_joblib_launcher": "launchers",
    "hydra_plugins.hydra_submitit_launcher": "launchers",
    "hydra_plugins.hydra_optuna_sweeper": "optuna",
    "ale_py": "atari",
    "cv2": "atari",
    "envpool": "envpool",
    "ray": "ray",
    "minari": "offline",
    "hydra_plugins.hydra_ray_launcher": "ray",
}
# rlrun's wrappers of a Hydra plugin: the plugin module each imports when it launches
WRAPPED_PLUGINS = {
    "hydra_plugins.rlrun_sweepers.ray_launcher": "hydra_plugins.hydra_ray_launcher",
    "hydra_plugins.rlrun_sweepers.joblib_launcher": "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.rlrun_sweepers.submitit_launcher": "hydra_plugins.hydra_submitit_launcher",
}
SEQUENCE_ALGORITHMS = ("ppo",)  # those that train recurrent policies on whole sequences
RECURRENT_KINDS = ("lstm", "gru")


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
    check_algorithm(cfg)
    check_offline(cfg)
    check_ray_cpus(cfg)
    check_learners(cfg, hooks)
    check_env(cfg)  # makes the env once with gymnasium (env.backend=envpool: imports torchrl)

    from rlrun.builders.devices import placement  # imports torch

    where = placement(cfg)  # devices that exist, and combinations that can work
    check_ray_gpus(cfg, where)
    check_targets(cfg, hooks)


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
    for key, value, allowed in _ranged_fields(cfg, ""):
        if not allowed.admits(value):
            raise ConfigError(f"{key}={value} is out of range: it must be {allowed}.")
    sizes = cfg.policy.get("hidden_sizes") or []
    if any(int(size) < 1 for size in sizes):
        raise ConfigError(f"policy.hidden_sizes={list(sizes)}: every layer needs >= 1 unit.")


def _missing_extra(module: str) -> str | None:
    """The extra that installs ``module`` when it cannot be imported, else None."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        found = False
    if found:
        return None
    extra = next((e for m, e in EXTRAS.items() if module.startswith(m)), None)
    return f"pip install 'rlrun[{extra}]'" if extra else f"pip install {module.split('.')[0]}"


def _need(module: str, why: str) -> None:
    fix = _missing_extra(module)
    if fix is not None:
        raise ConfigError(f"{why} needs the {module.split('.')[0]} package: {fix}.")


def check_optional_packages(cfg: DictConfig) -> None:
    """The packages the chosen backends import (loggers, checkpoints, video, launchers)."""
    if cfg.checkpoint.backend == "torchsnapshot":
        _need("torchsnapshot", "checkpoint.backend=torchsnapshot")
    for name in ("tensorboard", "wandb", "mlflow"):
        if cfg.logger[name]:
            _need(name, f"logger={name}")
    if cfg.eval.video:
        _need("moviepy", "eval.video=true")
    if cfg.env.id.startswith("ALE/"):
        _need("ale_py", f"env.id={cfg.env.id}")
    if cfg.env.atari is not None:
        _need("cv2", "the Atari preprocessing (env.atari)")
    if cfg.env.backend == "envpool":
        _need("envpool", "env.backend=envpool")
    if cfg.collector.kind == "ray":
        _need("ray", "collector=ray")
    if cfg.trainer.learner_backend == "ray":
        _need("ray", "trainer.learner_backend=ray")
    hydra = cfg.get("hydra")
    if hydra is not None:
        for group in ("launcher", "sweeper"):
            target = hydra[group].get("_target_", "")
            if target.startswith("hydra_plugins."):
                choice = hydra.runtime.choices.get(f"hydra/{group}", target)
                module = WRAPPED_PLUGINS.get(target.rsplit(".", 1)[0], target.rsplit(".", 2)[0])
                _need(module, f"hydra/{group}={choice}")


def check_wandb_credentials(cfg: DictConfig) -> None:
    """``logger.mode=online`` needs W&B credentials: without them ``wandb.init`` fails only
    once the run is built (``auto`` logs offline instead)."""
    if not cfg.wandb or cfg.mode != "online":
        return
    from rlrun.builders.tracking import wandb_auth_problem

    problem = wandb_auth_problem()
    if problem is not None:
        raise ConfigError(
            f"logger.mode=online: {problem}; run `wandb login` or set WANDB_API_KEY, or use "
            "logger.mode=offline (or auto: online only with credentials)."
        )


@functools.cache
def _importable(path: str) -> str | None:
    """None if ``path`` (``pkg.module.name``) imports, else why not (as Hydra's ``_target_``
    lookup does: the longest importable module, then attributes)."""
    import importlib

    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module_name = ".".join(parts[:i])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name is not None and not module_name.startswith(err.name):
                return f"importing {module_name} failed: {err}"  # a dependency is missing
            continue
        except Exception as err:  # the module itself fails to import
            return f"importing {module_name} failed: {type(err).__name__}: {err}"
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return f"{module_name} has no attribute {attr}"
            obj = getattr(obj, attr)
        return None
    return f"no module named {parts[0]}"


def check_targets(cfg: DictConfig, hooks: list[HookEntry]) -> None:
    """Every ``_target_`` a user may swap (policy, optimiser, transforms, hooks) imports."""
    targets = {
        "policy._target_": cfg.policy.get("_target_"),
        "optim._target_": cfg.optim._target_,
        "collector.policy_factory": cfg.collector.policy_factory,
    }
    for group in ("env", "replay_buffer"):
        for i, transform in enumerate(cfg[group].transforms):
            targets[f"{group}.transforms[{i}]._target_"] = transform.get("_target_")
    for entry in hooks:
        targets[f"hooks.{entry.name}._target_"] = entry.options.get("_target_")
    for key, target in targets.items():
        why = _importable(target) if target else None
        if why is not None:
            raise ConfigError(f"{key}={target} cannot be imported: {why}")


def check_algorithm(cfg: DictConfig) -> None:
    """The algorithm against the policy it trains."""
    from rlrun.config import ALGO_SCHEMAS

    name, kind = cfg.algo.get("name"), cfg.policy.get("kind")
    if name not in ALGO_SCHEMAS:
        choices = ", ".join(ALGO_SCHEMAS)
        raise ConfigError(f"algo.name={name} is not valid; choose one of: {choices}.")
    if kind in RECURRENT_KINDS and name not in SEQUENCE_ALGORITHMS:
        raise ConfigError(
            f"algo={name} cannot train a recurrent policy (policy={kind}); use "
            f"algo={' or algo='.join(SEQUENCE_ALGORITHMS)}, or policy=mlp."
        )
    batch = cfg.collector.frames_per_batch
    if name == "ppo" and (cfg.algo.minibatch_size > batch or batch % cfg.algo.minibatch_size):
        raise ConfigError(
            f"algo.minibatch_size={cfg.algo.minibatch_size} must divide a collected batch "
            f"(collector.frames_per_batch={batch})."
        )


def check_policy(cfg: DictConfig) -> None:
    """``policy.recurrent_mode``: known phases; those that step envs cannot be in sequence mode."""
    from rlrun.config import PHASES, STEPPING_PHASES

    for phase, sequence in (cfg.get("recurrent_mode") or {}).items():
        if phase not in PHASES:
            raise ConfigError(
                f"policy.recurrent_mode.{phase} is not a phase; choose one of: {', '.join(PHASES)}."
            )
        if sequence and phase in STEPPING_PHASES:
            raise ConfigError(
                f"policy.recurrent_mode.{phase}=true is not valid: {phase} steps the envs one time "
                "step at a time (sequence mode would read the env batch as time); set it to false."
            )


def check_observations(cfg: DictConfig) -> None:
    """Atari ids get their preprocessing, image observations a CNN, and a CNN images."""
    env, kind = cfg.env, cfg.policy.get("kind")
    if env.id.startswith("ALE/") and env.atari is None:
        raise ConfigError(
            f"env.id={env.id} needs the Atari preprocessing: use env=atari env.id={env.id} "
            "(or env=pong, env=breakout)."
        )
    if env.atari is not None and kind in ("mlp", *RECURRENT_KINDS):
        raise ConfigError(
            f"env.id={env.id} gives image observations, which policy={kind} cannot read: use "
            "policy=cnn (or start from +experiment=ppo_atari or +experiment=dqn_atari)."
        )
    if kind == "cnn" and env.atari is None:
        raise ConfigError(
            f"policy=cnn needs image observations, but env.id={env.id} gives vectors: use "
            "env=pong, env=breakout or env=atari env.id=ALE/..., or policy=mlp."
        )
    if env.backend == "envpool" and env.parallel:
        raise ConfigError(
            "env.parallel=true runs gymnasium envs in worker processes; env.backend=envpool "
            "steps its envs in its own threads (env.num_threads): set env.parallel=false."
        )
    if env.backend == "envpool" and env.kwargs:
        raise ConfigError(
            f"env.kwargs={OmegaConf.to_container(env.kwargs)} are gymnasium.make arguments, "
            "which env.backend=envpool does not take (Atari: set env.atari's keys); drop them."
        )


def check_replay_buffer(cfg: DictConfig, env: DictConfig, collector: DictConfig) -> None:
    """The sampler against the batch it fills; single frames against the env's stacks."""
    if cfg.single_frames:
        if env.atari is None:
            raise ConfigError(
                "replay_buffer.single_frames=true stores the frames of stacked image "
                f"observations, which env.id={env.id} does not have (env.atari); set it to false."
            )
        if cfg.sampler != "random" or collector.traj_ids is False:
            raise ConfigError(
                "replay_buffer.single_frames=true samples slices of consecutive frames of one "
                "trajectory itself: it needs replay_buffer.sampler=random and trajectory ids "
                "(collector.traj_ids not false); or set replay_buffer.single_frames=false."
            )
    if cfg.sampler == "slice" and cfg.batch_size % cfg.slice_len:
        raise ConfigError(
            f"replay_buffer.slice_len={cfg.slice_len} must divide "
            f"replay_buffer.batch_size={cfg.batch_size}."
        )


def check_collector(cfg: DictConfig, env: DictConfig) -> None:
    """The collector kind against its policy options and the env's running statistics."""
    if env.normalize_observations and (cfg.kind != "sync" or env.parallel):
        raise ConfigError(
            "env.normalize_observations=true keeps its statistics in this process, where "
            "evaluation and checkpoints read them; use collector=sync with env.parallel=false."
        )
    if cfg.kind == "ray" and cfg.sync and cfg.frames_per_batch % cfg.num_workers:
        raise ConfigError(
            f"collector.frames_per_batch={cfg.frames_per_batch} must divide among the "
            f"{cfg.num_workers} workers of collector=ray (collector.sync=true: each collects "
            "an equal share); change either, or set collector.sync=false."
        )
    if cfg.kind == "sync":
        if cfg.policy_factory:
            raise ConfigError(
                "collector.policy_factory is for worker processes; collector=sync runs the "
                "policy in this process. Use collector=multi_sync or async, or drop the factory."
            )
        return
    if cfg.traj_ids is False:
        raise ConfigError(
            f"collector.traj_ids=false: collector={cfg.kind} always writes trajectory ids (its "
            "workers' batches are merged by them); only collector=sync can skip them."
        )
    if cfg.policy_copy == "never" and not cfg.policy_factory:
        raise ConfigError(
            f"collector.policy_copy=never runs the policy in place, but collector={cfg.kind} "
            f"runs it in {cfg.num_workers} worker processes. Set collector.policy_factory to a "
            "function each worker calls (e.g. collector.policy_factory='${policy._target_}')."
        )


ACTION_SPACES = {
    "ppo": ("Discrete", "Box"),
    "a2c": ("Discrete", "Box"),
    "dqn": ("Discrete",),
    "c51": ("Discrete",),
    "discrete_sac": ("Discrete",),
    "sac": ("Box",),
    "redq": ("Box",),
    "tqc": ("Box",),
    "crossq": ("Box",),
    "ddpg": ("Box",),
    "td3": ("Box",),
    "bc": ("Discrete", "Box"),
    "cql": ("Discrete", "Box"),
    "iql": ("Discrete", "Box"),
    "td3_bc": ("Box",),
}
OFFLINE_ALGORITHMS = ("bc", "cql", "iql", "td3_bc")  # they learn from dataset=
ON_POLICY = ("ppo", "a2c")  # they learn from fresh batches only


def check_offline(cfg: DictConfig) -> None:
    """``dataset=``, ``collector=none`` and the offline algorithms, against each other, the
    policy and the env; the dataset is on this machine (rlrun downloads nothing)."""
    name, kind = cfg.algo.name, cfg.collector.kind
    if not cfg.dataset:
        if name in OFFLINE_ALGORITHMS:
            raise ConfigError(
                f"algo={name} learns from a dataset: set dataset=<Minari dataset id or run "
                "folder> (rlrun record RUN episodes=N makes one)."
            )
        if kind == "none":
            raise ConfigError(
                "collector=none learns from a dataset alone: set dataset=<Minari dataset id or "
                "run folder>, or choose a collector: sync, multi_sync, async or ray."
            )
        return
    if name in ON_POLICY:
        raise ConfigError(
            f"algo={name} learns from fresh batches, not from a dataset: use one of "
            f"{', '.join(OFFLINE_ALGORITHMS)} (or an off-policy algorithm), or drop dataset=."
        )
    if name == "bc" and kind != "none":
        raise ConfigError(
            f"algo=bc imitates its dataset and has no use for collector={kind}'s frames: use "
            "collector=none (to fine-tune online, continue with cql, iql or td3_bc)."
        )
    if kind == "none" and cfg.algo.get("utd_ratio", 1) != 1:
        raise ConfigError(
            "collector=none counts an offline run's optimisation steps as its frames: set "
            f"algo.utd_ratio=1 (not {cfg.algo.utd_ratio}) and size trainer.total_frames instead."
        )
    if kind == "none" and cfg.collector.init_random_frames:
        raise ConfigError(
            "collector=none collects nothing, so there are no random frames to wait for: set "
            "collector.init_random_frames=0."
        )
    if cfg.collector.init_random_frames:  # TorchRL's offline-to-online hook would skip them
        raise ConfigError(
            f"dataset={cfg.dataset} gives learning its start, so there are no random frames to "
            "wait for: set collector.init_random_frames=0."
        )
    why = None
    if cfg.env.atari is not None or cfg.policy.get("kind") in RECURRENT_KINDS:
        why = "image observations and recurrent policies are not supported offline"
    elif cfg.env.normalize_observations:
        why = "a dataset holds raw observations; set env.normalize_observations=false"
    elif cfg.trainer.learner_backend == "ray":
        why = "the Ray learners sample their own buffer; set trainer.learner_backend=local"
    if why:
        raise ConfigError(f"dataset={cfg.dataset}: {why}.")
    check_dataset(cfg.dataset)


def check_dataset(dataset: str) -> None:
    """``dataset=`` names a run folder or a Minari dataset on this machine."""
    import os

    if is_run_dir(Path(dataset).expanduser()):
        return
    _need("minari", f"dataset={dataset}")
    import minari

    if dataset in minari.list_local_datasets():
        return
    root = os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
    raise ConfigError(
        f"dataset={dataset} is neither a run folder nor a Minari dataset in {root}; rlrun "
        f"downloads nothing: fetch it where there is network (minari download {dataset}), or "
        "record one: rlrun record RUN episodes=N id=NAME."
    )


@functools.cache
def _env_facts(env_id: str, kwargs_json: str) -> tuple[str, tuple[str, ...]]:
    """The action space's class and the render modes of ``env_id`` (one env made and closed)."""

    import gymnasium
    from gymnasium.error import DependencyNotInstalled

    check_env_id(env_id)
    try:
        env = gymnasium.make(env_id, **json.loads(kwargs_json))
    except (DependencyNotInstalled, ImportError) as err:
        hint = str(err).strip().splitlines()[0]
        if "mujoco" in hint.lower():
            hint = "MuJoCo is not installed: pip install 'rlrun[mujoco]'"
        raise ConfigError(
            f"env.id={env_id} needs a package that is not installed: {hint}"
        ) from None
    try:
        return type(env.action_space).__name__, tuple(env.metadata.get("render_modes", ()))
    finally:
        env.close()


def check_env(cfg: DictConfig) -> None:
    """The env exists, its packages are installed, the algorithm can act in it, and evaluation
    can render it."""

    if cfg.env.backend == "envpool":
        from rlrun.builders.envpool_env import envpool_task

        envpool_task(cfg.env)
    kwargs = OmegaConf.to_container(cfg.env.kwargs, resolve=True)
    space, render_modes = _env_facts(cfg.env.id, json.dumps(kwargs, sort_keys=True))
    allowed = ACTION_SPACES.get(cfg.algo.get("name"))
    if allowed is not None and space not in allowed:
        online = {a: s for a, s in ACTION_SPACES.items() if a not in OFFLINE_ALGORITHMS}
        fits = [a for a, spaces in online.items() if space in spaces]  # offline: need a dataset
        raise ConfigError(
            f"algo={cfg.algo.name} needs a {' or '.join(allowed)} action space, but "
            f"env.id={cfg.env.id} has a {space} one; use algo={' or algo='.join(fits) or '?'} "
            "(with its preset, e.g. +experiment=" + (fits[0] if fits else "ppo") + ")."
        )
    if cfg.eval.video and "rgb_array" not in render_modes:
        raise ConfigError(
            f"eval.video=true, but env.id={cfg.env.id} cannot render frames (render modes: "
            f"{', '.join(render_modes) or 'none'}); set eval.video=false."
        )


# trainer.learner_backend=ray (rlrun/builders/learners.py): the stages TorchRL 0.14.1 still runs on the
# driver; the others run inside the optimisation loop, on the learners
DRIVER_STAGES = (
    "batch_process",
    "post_steps",
    "pre_steps_log",
    "post_steps_log",
    "setup",
    "shutdown",
)
REMOTE_ALGORITHMS = ("dqn", "sac", "td3")
ON_POLICY_ALGORITHMS = ("ppo", "a2c")


def check_learners(cfg: DictConfig, hooks: list[HookEntry]) -> None:
    """What ``trainer.learner_backend=ray`` cannot run (``rlrun/builders/learners.py``)."""
    n = cfg.trainer.num_learners
    if cfg.trainer.learner_backend != "ray":
        if n != 1:
            raise ConfigError(
                f"trainer.num_learners={n} needs trainer.learner_backend=ray (the local "
                "backend optimises in this process)."
            )
        return
    why = "with trainer.learner_backend=ray"
    algo = cfg.algo.name
    if algo not in REMOTE_ALGORITHMS:
        reason = (
            f"algo={algo} trains on each fresh batch"
            if algo in ON_POLICY_ALGORITHMS
            else f"algo={algo} is not wired to them yet"
        )
        raise ConfigError(
            f"algo={algo} cannot train {why}: the Ray learners sample a replay buffer "
            f"(algo={', '.join(REMOTE_ALGORITHMS)}), {reason}; use trainer.learner_backend=local."
        )
    rb = cfg.replay_buffer
    if rb.batch_size % n:
        raise ConfigError(
            f"replay_buffer.batch_size={rb.batch_size} must be divisible by "
            f"trainer.num_learners={n} (each learner samples batch_size / num_learners)."
        )
    plain = {"single_frames": False, "storage": "tensor", "sampler": "random", "prefetch": None}
    for key, value in plain.items():
        if (rb[key] or None) != (value or None):
            raise ConfigError(
                f"replay_buffer.{key}={rb[key]} is not supported {why}: the learners sample a "
                f"Ray actor's in-memory buffer with a random sampler; set "
                f"replay_buffer.{key}={'null' if value is None else str(value).lower()}."
            )
    if rb.transforms:
        raise ConfigError(
            f"replay_buffer.transforms are not supported {why} (the buffer is a Ray actor's); "
            "set replay_buffer.transforms=[]."
        )
    for key in ("compile", "cudagraphs"):
        if cfg.algo.get(key, False):
            raise ConfigError(
                f"algo.{key}=true is not supported {why}: the learners run TorchRL's own "
                f"optimisation step; set algo.{key}=false."
            )
    if cfg.optim.anneal_lr:
        raise ConfigError(
            f"optim.anneal_lr=true is not supported {why}: the learners own their optimisers; "
            "set optim.anneal_lr=false."
        )
    if cfg.checkpoint.backend == "torchsnapshot":
        raise ConfigError(
            f"checkpoint.backend=torchsnapshot cannot save the Ray learners' state ({why}); "
            "use checkpoint.backend=torch."
        )
    check_learner_hooks(hooks)


def check_learner_hooks(hooks: list[HookEntry]) -> None:
    """With Ray learners, config hooks run in this process: only at the driver's stages."""
    for entry in hooks:
        if entry.builtin is not None:
            raise ConfigError(
                f"hooks.{entry.name}: built-in hooks are not supported with "
                "trainer.learner_backend=ray (the optimisation runs on the Ray learners); "
                "drop it or use trainer.learner_backend=local."
            )
        refused = [point for point in entry.points if point not in DRIVER_STAGES]
        if refused:
            raise ConfigError(
                f"hooks.{entry.name}.at={refused[0]} runs inside the optimisation loop, which "
                "runs on the Ray learners with trainer.learner_backend=ray; use one of: "
                f"{', '.join(DRIVER_STAGES)}."
            )


def check_ray_cpus(cfg: DictConfig) -> None:
    """A local Ray given ``ray.num_cpus`` must offer a CPU to each learner and collector worker
    (with ``null`` rlrun sizes it so); otherwise the actors wait for their resources until a
    timeout, or for ever."""
    from rlrun.builders.ray_runtime import LEARNER_CPUS, cpus_reserved, uses_ray

    ray_cfg = cfg.ray
    if not uses_ray(cfg) or ray_cfg.address is not None:
        return  # no Ray, or a cluster: its own size
    learner_cpus, worker_cpus = cpus_reserved(cfg)
    need = learner_cpus + worker_cpus
    if ray_cfg.num_cpus is not None and ray_cfg.num_cpus < need:
        who = []
        if learner_cpus:
            who.append(f"{cfg.trainer.num_learners} learners ({LEARNER_CPUS} each)")
        if worker_cpus:
            who.append(
                f"{cfg.collector.num_workers} collector workers ({ray_cfg.worker_cpus:g} each)"
            )
        raise ConfigError(
            f"ray.num_cpus={ray_cfg.num_cpus} is too few: {' and '.join(who)} need {need}; set "
            f"ray.num_cpus={need} (logical CPUs may exceed the machine's) or null (rlrun then "
            "sizes the local Ray)."
        )


def check_ray_gpus(cfg: DictConfig, where: Placement) -> None:
    """Learners on CUDA in a local Ray need a whole GPU each (NCCL), as many as it offers."""
    import math

    import torch

    from rlrun.builders.devices import ray_gpus, ray_worker_gpus
    from rlrun.builders.ray_runtime import cpus_reserved

    ray_cfg = cfg.ray
    learner_cpus, worker_cpus = cpus_reserved(cfg)
    if not learner_cpus or ray_cfg.address is not None:
        return  # no Ray learners, or a cluster: its own size
    n = cfg.trainer.num_learners
    if not ray_gpus(where.learner):
        return
    workers = cfg.collector.num_workers if worker_cpus else 0
    worker_gpus = ray_worker_gpus(ray_cfg.worker_gpus, where, workers)  # untested here (no GPU)
    need_gpus = n + math.ceil(worker_gpus * workers)
    have_gpus = ray_cfg.num_gpus if ray_cfg.num_gpus is not None else torch.cuda.device_count()
    if have_gpus < need_gpus:
        raise ConfigError(
            f"trainer.num_learners={n} on CUDA need a whole GPU each (NCCL), {need_gpus} with "
            f"the collector workers', but the local Ray offers {have_gpus}; use fewer "
            "trainer.num_learners or device=cpu."
        )
