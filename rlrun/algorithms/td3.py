"""TD3 (``algo=td3``): TorchRL's ``TD3Loss`` (twin Q, target policy smoothing with clipped noise),
actor and target updates every ``algo.policy_delay`` critic steps, and Gaussian exploration noise
added to the deterministic actor while collecting (fixed, or annealed over frames)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm, Auto
from rlrun.config import GaussianNoiseConfig, TwinDelayedConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class TD3Config(GaussianNoiseConfig, TwinDelayedConfig):
    """TD3's keys (``conf/algo/td3.yaml``): exploration noise, twin delayed critics."""


def build(cfg: DictConfig, ctx: Context) -> Training:
    """TD3 on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; the actor learns and
    the targets follow it every ``algo.policy_delay`` steps (``DelayedActor``)."""
    from torchrl.objectives import TD3Loss

    from rlrun.builders.offpolicy import gaussian_noise, off_policy, require_qvalue, twin_delayed

    require_qvalue(ctx.ac, cfg.name)
    loss, updater = twin_delayed(TD3Loss, cfg, ctx.ac)
    exploration = gaussian_noise(cfg, ctx.ac, ctx.device)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater, exploration=exploration)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_deterministic_actor_q",
    summary="Twin delayed DDPG: twin Q, target smoothing, delayed actor updates",
    schema=TD3Config,
    actions=(BOX,),
    ray_learners=True,
    cudagraphs=True,
    # compiled and captured on an H100 (2026-11-27, docs/guides/gpu.md): 111 frames/s against 61
    # eager, after over 60 s of compiling both phases (from its whole-run rate)
    auto={"cuda": Auto(compile=True, cudagraphs=True, min_steps=20_000)},
)
