"""REDQ (``algo=redq``; Chen et al. 2021): TorchRL's ``REDQLoss``, SAC with an ensemble of
``algo.num_qvalue_nets`` Q networks whose target takes the minimum over a random subset of
``algo.sub_sample_len``, trained with a high update-to-data ratio (``algo.utd_ratio``)."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import REDQLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.algorithms.sac import max_entropy
from rlrun.builders.policies import ActorCritic


def make_redq(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """REDQ on SAC's networks (``ac.actor``, ``ac.qvalue``, copied into the ensemble)."""
    require_qvalue(ac, "redq", "make_sac_networks", "redq")
    loss = REDQLoss(
        ac.actor,
        ac.qvalue,
        sub_sample_len=cfg.sub_sample_len,
        loss_function=cfg.loss_function,
        # TorchRL clamps alpha to [0.1, 10] by default; the paper's temperature is free
        min_alpha=1e-8,
        max_alpha=1e8,
        **max_entropy(cfg, ac),
        delay_qvalue=True,
    )
    # TorchRL registers the target-entropy buffer at the first loss call: a fresh loss (resume=)
    # then refuses a checkpoint that has it ("Unexpected key(s) in state_dict")
    loss.target_entropy  # noqa: B018
    return off_policy(cfg, loss, frames_per_batch)
