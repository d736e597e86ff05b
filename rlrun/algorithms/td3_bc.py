"""TD3+BC (``algo=td3_bc``; Fujimoto & Gu 2021): TorchRL's ``TD3BCLoss``, TD3's twin Q and
target policy smoothing with the actor's objective -lambda Q(s, pi(s)) + (pi(s) - a)^2, lambda =
``algo.alpha`` / mean |Q|; actor and soft target updates every ``algo.policy_delay`` critic
steps, as TD3's. On a deterministic actor and Q(s, a)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm, Data
from rlrun.config import TwinDelayedConfig, ranged

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class TD3BCConfig(TwinDelayedConfig):
    """TD3+BC's keys (``conf/algo/td3_bc.yaml``): twin delayed critics and the BC weight."""

    alpha: float = ranged(0)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """TD3+BC on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; the targets follow
    the actor, which is delayed as the paper's."""
    from torchrl.objectives import TD3BCLoss

    from rlrun.builders.offpolicy import off_policy, require_qvalue, twin_delayed

    require_qvalue(ctx.ac, cfg.name)
    loss, updater = twin_delayed(TD3BCLoss, cfg, ctx.ac, alpha=cfg.alpha)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_deterministic_actor_q",
    summary="TD3 with a behaviour-cloning term, from a dataset (offline)",
    schema=TD3BCConfig,
    actions=(BOX,),
    data=Data.OFFLINE,
)
