"""SAC (``algo=sac``): TorchRL's ``SACLoss``, a TanhNormal actor, twin Q, a learned entropy
temperature (target entropy -|A|) and soft target updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm, Auto
from rlrun.config import SoftActorCriticConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class SACConfig(SoftActorCriticConfig):
    """SAC's keys (``conf/algo/sac.yaml``)."""


def build(cfg: DictConfig, ctx: Context) -> Training:
    """SAC on ``ac.actor`` (stochastic, explores by sampling) and ``ac.qvalue``."""
    from torchrl.objectives import SACLoss

    from rlrun.builders.offpolicy import max_entropy, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = SACLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        loss_function=cfg.loss_function,
        delay_qvalue=True,
        **max_entropy(cfg, ctx.ac),
    )
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_stochastic_actor_q",
    summary="Soft actor-critic: TanhNormal actor, twin Q, learned entropy temperature",
    schema=SACConfig,
    actions=(BOX,),
    ray_learners=True,
    cudagraphs=True,
    # compiled and captured on an H100 (2026-11-27, docs/guides/gpu.md): 275 frames/s against 67
    # eager, after about 45 s of compiling (from its whole-run rate); on the CPU compiling made its
    # step slower (2026-11-28)
    auto={"cuda": Auto(compile=True, cudagraphs=True, min_steps=10_000)},
)
