"""Where each part of a run lives: one rule, from the config to a :class:`Placement`.

Every builder takes its device from the placement; no other module of rlrun decides one. The rule
follows TorchRL's own recipes:

- gymnasium envs live on the CPU, in this process and in collector workers (TorchRL's gym wrapper
  on CUDA breaks on partial resets: it calls ``.numpy()`` on the CUDA ``_reset`` mask);
- the collector runs its policy on ``collector.device`` (default: the top-level ``device``) and
  stores each batch on the learner's device, moving every step with ``non_blocking=True``;
- the learner (loss, optimiser, PPO's minibatches) lives on ``device``;
- off-policy storage lives on ``replay_buffer.device``; by default (``auto``) a tensor storage on
  the learner's device, where the update step samples it itself, and a memmap storage on the
  CPU, whose samples are pinned after the transforms and copied to the learner with
  ``non_blocking=True``;
- evaluation steps a CPU env with the learner's policy (:class:`OnDevice` moves the data).

``placement`` is pure (it reads the config and the number of CUDA devices, which tests pass in),
so the rule is tested on a machine without a GPU.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase

from rlrun.errors import ConfigError, choose

CPU = torch.device("cpu")
_pin_warnings: set[str] = set()  # each said once per process


@dataclass(frozen=True)
class Placement:
    """The device of each part of a run (see the module docstring for the rule)."""

    learner: torch.device  # loss, optimiser, PPO minibatch storage; batches reach the loss here
    collector_policy: torch.device  # the policy the collector steps (in every worker too)
    storing: torch.device  # where the collector writes batches
    replay: torch.device  # the off-policy replay storage
    pin_memory: bool  # pin replay samples before their non-blocking copy to the learner
    eval_policy: torch.device  # evaluation runs the learner's own policy
    env_start_method: str  # ParallelEnv workers (env.parallel=true): spawn once CUDA is involved
    env: torch.device = CPU  # gymnasium envs, everywhere (training, workers, evaluation)

    @classmethod
    def on_cpu(cls) -> Placement:
        """Everything on the CPU: what ``device=cpu`` gives (for building parts in a script)."""
        return cls(
            learner=CPU,
            collector_policy=CPU,
            storing=CPU,
            replay=CPU,
            pin_memory=False,
            eval_policy=CPU,
            env_start_method="fork",
        )

    @property
    def workers_build_policy(self) -> bool:
        """Whether collector worker processes build their own policy rather than get it pickled:
        where they run it on CUDA (why: ``rlrun.builders.collectors._checked_worker_factory``)."""
        return self.collector_policy.type == "cuda"

    @property
    def all_cpu(self) -> bool:
        return all(d.type == "cpu" for d in (self.learner, self.collector_policy, self.replay))


def parse_device(key: str, name: str, cuda_devices: int) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto`` -> a device with an index where it has one.

    CUDA must really be there (no silent fallback); ``cuda`` means ``cuda:0`` (pick a GPU with
    ``CUDA_VISIBLE_DEVICES`` or ``cuda:N``), so it compares equal to parameters' devices.
    """
    if name == "auto":
        return torch.device("cuda", 0) if cuda_devices else CPU
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{key}={name} is not valid; use cpu, cuda, cuda:N or auto.") from None
    if device.type == "cpu":
        return CPU
    if device.type != "cuda":
        raise ConfigError(f"{key}={name} is not supported; use cpu, cuda, cuda:N or auto.")
    if not cuda_devices:
        raise ConfigError(
            f"{key}={name} but no CUDA device is available here; use {key}=cpu "
            f"(or {key}=auto to take CUDA only where it exists)."
        )
    index = device.index or 0
    if index >= cuda_devices:
        raise ConfigError(
            f"{key}={name} but only {cuda_devices} CUDA device(s) exist here "
            f"(cuda:0 to cuda:{cuda_devices - 1})."
        )
    return torch.device("cuda", index)


def _pin_memory(value: object, learner: torch.device, replay: torch.device, cuda: bool) -> bool:
    """``auto``: pin when a CUDA learner samples a CPU storage. ``true`` where nothing can be
    pinned (no CUDA: TorchRL would raise at the first sample; a storage on the GPU already):
    warn once, go on unpinned."""
    choice = choose("replay_buffer.pin_memory", str(value).lower(), ("auto", "true", "false"))
    if replay.type != "cpu":  # samples already live on the accelerator
        if choice == "true":
            _warn_pin(
                f"replay_buffer.pin_memory=true but the replay buffer is on {replay}: its "
                "samples are not pinned (pinning is for a CPU storage; replay_buffer.device=cpu "
                "keeps one)."
            )
        return False
    if choice == "auto":
        return learner.type == "cuda"
    if choice == "true" and not cuda:
        _warn_pin(
            "replay_buffer.pin_memory=true but CUDA is not available: samples are not pinned."
        )
        return False
    return choice == "true"


def _warn_pin(message: str) -> None:
    if message not in _pin_warnings:
        warnings.warn(message, stacklevel=4)
        _pin_warnings.add(message)


def _check_cudagraphs(key: str, cfg: DictConfig, device: torch.device, runs: str) -> None:
    if cfg.get("cudagraphs") is True and device.type != "cuda":  # auto: off there
        raise ConfigError(
            f"{key}.cudagraphs=true captures {runs} in a CUDA graph, but it runs on {device}; "
            f"set device=cuda (or {key}.cudagraphs=false; {key}.compile=true works on the CPU too)."
        )


def placement(cfg: DictConfig, cuda_devices: int | None = None) -> Placement:
    """The one placement rule: the run's config -> the device of every part.

    ``cuda_devices``: how many CUDA devices this process sees (default: ask torch, which does not
    initialise CUDA for it). Raises ConfigError for a device that is not there or a combination
    that cannot work, before anything is built.
    """
    if cuda_devices is None:
        cuda_devices = torch.cuda.device_count()
    learner = parse_device("device", cfg.device, cuda_devices)
    collector_policy = learner
    if cfg.collector.device is not None:
        collector_policy = parse_device("collector.device", cfg.collector.device, cuda_devices)
    rb = cfg.replay_buffer
    if rb.device == "auto":  # memmap: on disk, read on the CPU
        replay = CPU if rb.storage == "memmap" else learner
    else:
        replay = parse_device("replay_buffer.device", rb.device, cuda_devices)
    if rb.storage == "memmap" and replay.type != "cpu":
        raise ConfigError(
            f"replay_buffer.device={rb.device} with replay_buffer.storage=memmap: memmap storage "
            "lives on disk; use replay_buffer.device=cpu (samples still reach the learner on "
            f"{learner}) or replay_buffer.storage=tensor."
        )
    cuda = any(d.type == "cuda" for d in (learner, collector_policy, replay))
    start_method = cfg.env.mp_start_method
    if start_method is None:
        start_method = "spawn" if cuda else "fork"
    if cuda and start_method == "fork" and cfg.env.parallel:
        raise ConfigError(
            "env.mp_start_method=fork with CUDA in the run: a process forked after CUDA starts "
            "is unsafe; use env.mp_start_method=spawn (or null, which picks it)."
        )
    _check_cudagraphs("algo", cfg.algo, learner, "the update step")
    _check_cudagraphs("policy", cfg.policy, collector_policy, "the collector's policy")
    return Placement(
        learner=learner,
        collector_policy=collector_policy,
        storing=learner,
        replay=replay,
        pin_memory=_pin_memory(rb.pin_memory, learner, replay, cuda_devices > 0),
        eval_policy=learner,
        env_start_method=start_method,
    )


class OnDevice(TensorDictModuleBase):
    """Run ``module`` on ``device`` for an env on the CPU: inputs go there, outputs come back.

    Evaluation and validation rollouts step a CPU env with the learner's own policy; the
    collector does the same moves itself (``policy_device``/``env_device``).
    """

    def __init__(self, module: TensorDictModuleBase, device: torch.device) -> None:
        super().__init__()
        self.module = module
        self.device = device
        self.in_keys = module.in_keys
        self.out_keys = module.out_keys

    def forward(self, tensordict: TensorDictBase, *args, **kwargs) -> TensorDictBase:
        out = self.module(tensordict.to(self.device, non_blocking=True), *args, **kwargs)
        return tensordict.update(out.to(CPU))


def on_device(module: TensorDictModuleBase, device: torch.device) -> TensorDictModuleBase:
    """``module`` itself on the CPU; elsewhere, wrapped to act on a CPU env's data."""
    return module if device.type == "cpu" else OnDevice(module, device)


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (nothing to wait for on the CPU): for timings."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def capturing() -> bool:
    """Whether a CUDA graph is being captured on the current stream (never on a CPU build)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def ray_gpus(device: torch.device, share: float = 1.0) -> float:
    """The GPUs a Ray actor reserves to run on ``device`` (``share`` of one on CUDA, none on the
    CPU): Ray hides every GPU from an actor that reserved none."""
    return share if device.type == "cuda" else 0.0


def ray_worker_gpus(configured: float | None, where: Placement, workers: int) -> float:
    """GPUs each ``collector=ray`` worker reserves: ``ray.worker_gpus``, or by default an equal
    share of one GPU when the collector's policy runs on CUDA."""
    return configured if configured is not None else ray_gpus(where.collector_policy, 1 / workers)
