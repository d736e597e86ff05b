"""Behaviour cloning (``algo=bc``): TorchRL's ``BCLoss`` on a dataset's actions, nothing else
learnt. A deterministic actor (``make_td3_networks``) regresses continuous actions (l2); a
categorical one (the default factory's) maximises the log-likelihood of discrete ones."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase
from torchrl.objectives import BCLoss

from rlrun.algorithms.base import Algorithm
from rlrun.builders.policies import ActorCritic


class OneHotBCLoss(BCLoss):
    """``BCLoss`` for a categorical actor and one-hot actions, as rlrun's envs give them: their
    negative log-likelihood (``BCLoss`` reads integer actions as class indices)."""

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        with self.actor_network_params.to_module(self.actor_network):
            dist = self.actor_network.get_dist(tensordict.copy())
        loss = -dist.log_prob(tensordict.get(self.tensor_keys.action)).mean()
        return TensorDict({"loss_bc": loss})


def make_bc(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """BC on ``ac.actor``: one optimisation step per frame (an offline run's frames are steps)."""
    if ac.actor.spec["action"].domain == "continuous":
        loss = BCLoss(ac.actor, loss_function="l2")
    else:
        loss = OneHotBCLoss(ac.actor)
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=frames_per_batch,
        max_grad_norm=cfg.max_grad_norm,
        off_policy=True,
    )
