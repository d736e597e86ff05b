"""CQL (``algo=cql``; Kumar et al. 2020): conservative Q-learning, continuous or discrete by the
env's action space. Continuous: TorchRL's ``CQLLoss`` on SAC's networks (TanhNormal actor,
twin Q, learned temperature), the conservative term weighted by ``algo.min_q_weight`` (or tuned
by a Lagrange multiplier, ``algo.with_lagrange``). Discrete: ``DiscreteCQLLoss`` on DQN's Q
network, acting greedily. Soft target updates either way."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from torchrl.objectives import CQLLoss, DiscreteCQLLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.policies import ActorCritic


class ConservativeSAC(CQLLoss):
    """TorchRL's ``CQLLoss`` training its actor on one objective: behaviour cloning
    (``loss_actor_bc``) for the first ``bc_steps`` optimisation steps, CQL's (``loss_actor``)
    after them, as the official CQL code's ``policy_eval_start`` and TorchRL's recipe do.

    ``CQLLoss`` returns both terms, and the update step sums every ``loss_*`` term: summed, the
    two doubled the entropy bonus and pulled the actor toward the dataset's actions, and on
    rlrun's Pendulum-v1 expert dataset the Q loss grew without bound (2026-11-26). The BC term
    is also logged as ``actor_bc``. The step count is a buffer, saved and resumed with the loss
    module."""

    def __init__(self, *args, bc_steps: int = 0, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.bc_steps = bc_steps
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # a checkpoint saved before the count existed (2026-11-26) resumes with a fresh one
        state_dict.setdefault(f"{prefix}steps", torch.zeros_like(self.steps))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super().forward(tensordict)
        bc, cql = out.pop("loss_actor_bc"), out.get("loss_actor")
        cloning = self.steps < self.bc_steps
        out.set("loss_actor", torch.where(cloning, bc, cql))
        out.set("actor_bc", bc.detach())
        self.steps += 1
        return out


def make_cql(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """CQL on ``ac.actor`` and ``ac.qvalue`` (discrete: ``ac.qvalue`` is the greedy actor)."""
    spec = ac.actor.spec["action"]
    if spec.domain == "discrete":
        require_qvalue(ac, "cql", "make_qvalue_actor", "cql_discrete")
        loss = DiscreteCQLLoss(
            ac.qvalue, loss_function=cfg.loss_function, delay_value=True, action_space=spec
        )
        return off_policy(cfg, loss, frames_per_batch)
    require_qvalue(ac, "cql", "make_sac_networks", "cql")
    loss = ConservativeSAC(
        ac.actor,
        ac.qvalue,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha_init,
        target_entropy=-float(spec.shape[-1]),
        min_q_weight=cfg.min_q_weight,
        num_random=cfg.num_random,
        with_lagrange=cfg.with_lagrange,
        lagrange_thresh=cfg.lagrange_thresh,
        bc_steps=cfg.bc_steps,
    )
    return off_policy(cfg, loss, frames_per_batch)
