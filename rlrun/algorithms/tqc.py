"""TQC (``algo=tqc``; Kuznetsov et al. 2020): TorchRL's ``TQCLoss``, SAC whose critics predict
return quantiles (``policy=tqc``: ``n_quantiles``); the target pools every critic's quantiles
and drops the ``algo.top_quantiles_to_drop_per_net`` largest per critic, which curbs
overestimation."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import TQCLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.algorithms.sac import max_entropy
from rlrun.builders.policies import ActorCritic


def make_tqc(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """TQC on ``ac.actor`` (TanhNormal) and ``ac.qvalue`` (quantiles of Q(s, a))."""
    require_qvalue(ac, "tqc", "make_tqc_networks", "tqc")
    loss = TQCLoss(
        ac.actor,
        ac.qvalue,
        top_quantiles_to_drop_per_net=cfg.top_quantiles_to_drop_per_net,
        **max_entropy(cfg, ac),
        delay_qvalue=True,
    )
    return off_policy(cfg, loss, frames_per_batch)
