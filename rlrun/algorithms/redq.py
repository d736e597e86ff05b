"""REDQ (``algo=redq``; Chen et al. 2021): TorchRL's ``REDQLoss``, SAC with an ensemble of
``algo.num_qvalue_nets`` Q networks whose target takes the minimum over a random subset of
``algo.sub_sample_len``, trained with a high update-to-data ratio (``algo.utd_ratio``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import MaxEntropyConfig, RegressionLoss, TargetNetConfig, ranged

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class REDQConfig(TargetNetConfig, MaxEntropyConfig):
    """REDQ's keys (``conf/algo/redq.yaml``)."""

    loss_function: RegressionLoss = MISSING
    sub_sample_len: int = ranged(1)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """REDQ on a TanhNormal actor and one Q network (``ac.qvalue``, copied into the ensemble)."""
    from torchrl.objectives import REDQLoss

    from rlrun.builders.offpolicy import max_entropy, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = REDQLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        sub_sample_len=cfg.sub_sample_len,
        loss_function=cfg.loss_function,
        # TorchRL clamps alpha to [0.1, 10] by default; the paper's temperature is free
        min_alpha=1e-8,
        max_alpha=1e8,
        **max_entropy(cfg, ctx.ac),
        delay_qvalue=True,
    )
    # TorchRL registers the target-entropy buffer at the first loss call: a fresh loss (resume=)
    # then refuses a checkpoint that has it ("Unexpected key(s) in state_dict")
    loss.target_entropy  # noqa: B018
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_stochastic_actor_q",
    summary="Randomized ensembled double Q-learning: SAC with a Q ensemble, high update ratio",
    schema=REDQConfig,
    actions=(BOX,),
)
