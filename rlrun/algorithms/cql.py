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
from rlrun.builders.policies import ActorCritic


class ConservativeSAC(CQLLoss):
    """TorchRL's ``CQLLoss`` with the official CQL code's conservative term, training its actor
    on one objective: behaviour cloning (``loss_actor_bc``) for the first ``bc_steps``
    optimisation steps, CQL's (``loss_actor``) after them, as the official CQL code's
    ``policy_eval_start`` and TorchRL's recipe do.

    ``CQLLoss`` returns both terms, and the update step sums every ``loss_*`` term: summed, the
    two doubled the entropy bonus and pulled the actor toward the dataset's actions, and on
    rlrun's Pendulum-v1 expert dataset the Q loss grew without bound (2026-11-26). The BC term
    is also logged as ``actor_bc``. The step count is a buffer, saved and resumed with the loss
    module."""

    def __init__(
        self, *args, low: torch.Tensor, high: torch.Tensor, bc_steps: int = 0, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.bc_steps = bc_steps
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        # the uniform actions' box (the official code's [-1, 1] is D4RL's normalised actions)
        self.register_buffer("low", low.clone().float(), persistent=False)
        self.register_buffer("high", high.clone().float(), persistent=False)
        self.log_density = -float(torch.log(high - low).sum())

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # a checkpoint saved before the count existed (2026-11-26) resumes with a fresh one
        state_dict.setdefault(f"{prefix}steps", torch.zeros_like(self.steps))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def cql_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """The conservative term as the official code (``rlkit/torch/sac/cql.py``) and CORL
        compute it: per state, one log-sum-exp over all ``3 * num_random`` actions (uniform,
        pi(s), pi(s')), each Q taken at the state s and importance-weighted by its density.

        TorchRL 0.14.1's takes a log-sum-exp over 3 values per sampled action, broadcasts the
        batch of states against all ``batch * num_random`` samples ([256, 2560] at the preset's
        sizes), and takes pi(s')'s actions at s': its push against the largest Q values away
        from the data is spread over all samples instead of the largest."""
        n, key = self.num_random, self.tensor_keys.action
        data = tensordict.reshape(-1)
        params = self.actor_network_params
        at_s, logp_s = self._get_policy_actions(data.copy(), params, n)
        at_next, logp_next = self._get_policy_actions(data.get("next").copy(), params, n)
        uniform = torch.rand_like(at_s.get(key)) * (self.high - self.low) + self.low
        inputs = torch.cat([at_s] * 3, 0)  # every action at s, the data's states n times each
        inputs.set(key, torch.cat([uniform, at_s.get(key), at_next.get(key)], 0))
        q = self._vmap_qvalue_networkN0(inputs, self.qvalue_network_params)
        q = q.get(self.tensor_keys.state_action_value).reshape(-1, 3, len(data), n)
        density = torch.stack([torch.full_like(logp_s, self.log_density), logp_s, logp_next])
        q = (q - density.detach().reshape(3, len(data), n)).movedim(1, -2).flatten(-2)
        lse = torch.logsumexp(q / self.temperature, -1)[:2] * self.temperature
        pred = [tensordict.get(k).reshape(-1) for k in (self.tensor_keys.pred_q1,
                                                        self.tensor_keys.pred_q2)]  # fmt: skip
        gaps = [((lse[i] - pred[i]) * self.min_q_weight).reshape(tensordict.shape)
                for i in range(2)]  # fmt: skip
        tensordict.set(self.tensor_keys.cql_q1_loss, gaps[0])
        tensordict.set(self.tensor_keys.cql_q2_loss, gaps[1])
        return self._reduce_loss(gaps[0] + gaps[1], tensordict=tensordict), {}

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
        low=spec.space.low,
        high=spec.space.high,
    )
    return off_policy(cfg, loss, frames_per_batch)
