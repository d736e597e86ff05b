"""Algorithms, one module each, and how rlrun reads them: :class:`Algorithm`, a declaration.

``rlrun/algorithms/<name>.py`` is the whole of algorithm ``<name>``: its config schema (the keys
of ``conf/algo/<name>.yaml``), its builder (the TorchRL loss and the hooks that feed it), its
default networks, and what it can do, as data (:class:`Algorithm`). Validation, the recipe's
data-source decision, the Ray learners, ``rlrun --help`` and the docs' reference ask the
declaration; no other file lists algorithm names. ``conf/algo/<name>.yaml`` points at it with
``_target_: rlrun.algorithms.<name>.ALGORITHM``, and a user's own algorithm is reached the same
way, from their package (docs/guides/algorithms.md).

The declarations are read before anything heavy is imported (a config mistake answers in
under a second), so an algorithm module imports torch, TensorDict and TorchRL inside the
functions that build, never at its top.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from rlrun.builders.imports import resolve
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training

DISCRETE, BOX = "Discrete", "Box"  # gymnasium's action space classes
AUTO = "auto"  # algo.compile, algo.cudagraphs: what the algorithm's Auto says


class Data(StrEnum):
    """Where an algorithm's training data comes from."""

    ON_POLICY = "on_policy"  # each fresh batch, used and dropped: no replay buffer, no dataset
    OFF_POLICY = "off_policy"  # a replay buffer of collected frames (a dataset may seed it)
    OFFLINE = "offline"  # a dataset (dataset=); with a collector it fine-tunes online


@dataclasses.dataclass(frozen=True)
class Auto:
    """What ``algo.compile=auto`` and ``algo.cudagraphs=auto`` (the defaults) turn on for an
    algorithm on one kind of device: only where a measured figure shows a gain (its module says
    which), and only in runs long enough for the compilation to pay back."""

    compile: bool = False
    cudagraphs: bool = False
    min_steps: int = 0  # optimisation steps the run must have (fewer: eager)


@dataclasses.dataclass(frozen=True)
class Algorithm:
    """What an algorithm is and can do: everything rlrun asks before it builds one.

    ``build(cfg, ctx)`` returns the :class:`~rlrun.builders.training.Training` (loss,
    optimisation schedule, hooks) for the ``algo`` config node ``cfg`` in the
    :class:`~rlrun.builders.training.Context` ``ctx``. ``networks`` is the policy factory used
    when ``policy._target_`` is null.
    """

    build: Callable[[DictConfig, Context], Training]
    networks: str  # dotted path of the default network factory (policy._target_ contract)
    summary: str  # one line, for rlrun --help and the docs
    schema: type | None = None  # dataclass of its algo keys; None: keys are not checked
    actions: tuple[str, ...] = (DISCRETE, BOX)  # the action spaces it acts in
    data: Data = Data.OFF_POLICY
    collects: bool = True  # offline only: false learns from the dataset alone (no collector)
    sequences: bool = False  # trains recurrent policies on whole sequences
    multi_agent: bool = False  # trains a team of agents (a multi-agent env: env=vmas), not one
    groups: bool = False  # trains a team of several groups of agents (env.group_map=by_type)
    ray_learners: bool = False  # can optimise on Ray learners (trainer.learner_backend=ray)
    cudagraphs: bool = False  # its update step is known to capture in a CUDA graph
    auto: Mapping[str, Auto] = dataclasses.field(default_factory=dict)  # device type -> Auto
    policy_schemas: Mapping[str, type] = dataclasses.field(default_factory=dict)  # policy options'
    check: Callable[[DictConfig], None] | None = None  # its own rules on the composed config

    def __call__(self, cfg: DictConfig, ctx: Context) -> Training:
        return self.build(cfg, ctx)

    def fast_path(self, cfg: DictConfig, device_type: str, steps: int) -> tuple[bool, bool]:
        """``(compile, cudagraphs)`` of the update step: ``algo.compile`` and
        ``algo.cudagraphs`` as set, where ``auto`` takes this algorithm's :class:`Auto` for
        ``device_type`` in a run of ``steps`` optimisation steps (off where it has none)."""
        auto = self.auto.get(device_type, Auto())

        def setting(key: str, picked: bool) -> bool:
            value = cfg.get(key, False)
            return picked and steps >= auto.min_steps if value == AUTO else bool(value)

        return setting("compile", auto.compile), setting("cudagraphs", auto.cudagraphs)


def defined_on_first_use(module: str, **factories: Callable[[], type]) -> Callable[[str], type]:
    """A module's ``__getattr__`` for its classes whose bases are heavy (a TorchRL loss): each
    is made by its factory on first use, once, and named so that pickle finds it again."""

    @functools.cache
    def make(name: str) -> type:
        made = factories[name]()
        made.__module__, made.__qualname__ = module, name
        return made

    def __getattr__(name: str) -> type:
        if name not in factories:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        return make(name)

    return __getattr__


@functools.cache
def shipped() -> dict[str, Algorithm]:
    """rlrun's own algorithms by name: every module of this package that declares
    ``ALGORITHM`` (imported light: declarations only), found once per process (validation asks
    for every job of a sweep)."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        declared = getattr(module, "ALGORITHM", None)
        if isinstance(declared, Algorithm):
            found[info.name] = declared
    return dict(sorted(found.items()))


def target_of(name: str) -> str:
    """The ``algo._target_`` of rlrun's algorithm ``name``."""
    return f"{__name__}.{name}.ALGORITHM"


def declared(cfg: DictConfig) -> Algorithm:
    """The declaration ``algo._target_`` names (rlrun's own or a user's): refused in one line
    when it does not import or is not an :class:`Algorithm`. A run saved before ``_target_``
    existed names one of rlrun's algorithms by ``algo.name``."""
    target = None if OmegaConf.is_missing(cfg, "_target_") else cfg.get("_target_")
    if not target and cfg.get("name") in shipped():
        target = target_of(cfg.name)
    if not target:
        choices = ", ".join(shipped())
        raise ConfigError(
            f"algo._target_ is not set (algo.name={cfg.get('name')}); pick an algorithm with "
            f"algo=<one of: {choices}>, or set algo._target_ to your own declaration "
            "(docs/guides/algorithms.md)."
        )
    found = resolve(target, "algo._target_")
    if not isinstance(found, Algorithm):
        raise ConfigError(
            f"algo._target_={target} is a {type(found).__name__}, not an algorithm: declare it "
            "as rlrun.algorithms.Algorithm(build=..., networks=..., summary=..., ...) "
            "(docs/guides/algorithms.md)."
        )
    return found


def policy_config(cfg: DictConfig) -> DictConfig:
    """``cfg.policy`` as the run builds it: a null ``policy._target_`` is the algorithm's own
    networks (its declaration's ``networks``), the one place that default is decided."""
    policy = cfg.policy
    if policy.get("_target_"):
        return policy
    policy = policy.copy()
    policy._target_ = declared(cfg.algo).networks
    return policy


def register_schemas(store: Any) -> None:
    """Store each shipped algorithm's schemas in Hydra's ConfigStore ``store``: its algo keys as
    ``algo/rlrun_<name>_schema``, its own policy options' as
    ``policy/rlrun_<option>_policy_schema``."""
    for name, algorithm in shipped().items():
        if algorithm.schema is not None:
            store.store(group="algo", name=f"rlrun_{name}_schema", node=algorithm.schema)
        for option, schema in algorithm.policy_schemas.items():
            store.store(group="policy", name=f"rlrun_{option}_policy_schema", node=schema)
