"""TorchRL collectors from the ``collector`` config group."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import DictConfig
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import EnvBase

from rlrun.errors import choose

KINDS = ("sync",)


def make_collector(
    cfg: DictConfig,
    create_env: Callable[[], EnvBase],
    policy: TensorDictModule,
    total_frames: int,
    device: str,
) -> Collector:
    """Build the collector that feeds the Trainer ``frames_per_batch`` frames at a time."""
    choose("collector.kind", cfg.kind, KINDS)
    return Collector(
        create_env(),
        policy,
        frames_per_batch=cfg.frames_per_batch,
        total_frames=total_frames,
        init_random_frames=cfg.init_random_frames,
        device=cfg.device or device,
        auto_register_policy_transforms=False,  # rlrun appends the policy's primers itself
    )
