"""CQL (``algo=cql``; Kumar et al. 2020): conservative Q-learning, continuous or discrete by the
env's action space. Continuous: TorchRL's ``CQLLoss`` on a TanhNormal actor, twin Q and a
learned temperature, the conservative term weighted by ``algo.min_q_weight`` (or tuned by a
Lagrange multiplier, ``algo.with_lagrange``) and computed as the CQL authors' code does
(:class:`ConservativeSAC`). Discrete: ``DiscreteCQLLoss`` on a greedy Q network, its TD target
from the target network (:class:`TargetedDiscreteCQL`). Soft target updates either way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import Algorithm, Data, defined_on_first_use
from rlrun.config import POSITIVE, RegressionLoss, TargetNetConfig, ranged

if TYPE_CHECKING:
    import torch
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class CQLConfig(TargetNetConfig):
    """CQL's keys (``conf/algo/cql.yaml``), continuous or discrete by the action space."""

    alpha_init: float = ranged(**POSITIVE)
    min_q_weight: float = ranged(0)
    with_lagrange: bool = MISSING
    lagrange_thresh: float = ranged(0)
    num_random: int = ranged(1)
    loss_function: RegressionLoss = MISSING
    bc_steps: int = ranged(0)


def _conservative_sac() -> type:
    """:class:`ConservativeSAC`, made on first use (its base is TorchRL's ``CQLLoss``)."""
    import torch
    from tensordict import TensorDictBase
    from torchrl.objectives import CQLLoss

    from rlrun.compat.torchrl import ensemble_qvalues, reduce_loss, sampled_policy_actions

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
            at_s, logp_s = sampled_policy_actions(self, data.copy(), params, n)
            at_next, logp_next = sampled_policy_actions(self, data.get("next").copy(), params, n)
            uniform = torch.rand_like(at_s.get(key)) * (self.high - self.low) + self.low
            inputs = torch.cat([at_s] * 3, 0)  # every action at s, the data's states n times each
            inputs.set(key, torch.cat([uniform, at_s.get(key), at_next.get(key)], 0))
            q = ensemble_qvalues(self, inputs, self.qvalue_network_params)
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
            return reduce_loss(self, gaps[0] + gaps[1], tensordict), {}

        def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
            out = super().forward(tensordict)
            bc, cql = out.pop("loss_actor_bc"), out.get("loss_actor")
            cloning = self.steps < self.bc_steps
            out.set("loss_actor", torch.where(cloning, bc, cql))
            out.set("actor_bc", bc.detach())
            self.steps += 1
            return out

    return ConservativeSAC


def _targeted_discrete_cql() -> type:
    """:class:`TargetedDiscreteCQL`, made on first use (its base: TorchRL's ``DiscreteCQLLoss``)."""
    import torch
    from tensordict import TensorDictBase
    from torchrl.objectives import DiscreteCQLLoss
    from torchrl.objectives.utils import distance_loss

    from rlrun.compat.torchrl import reduce_loss

    class TargetedDiscreteCQL(DiscreteCQLLoss):
        """TorchRL's ``DiscreteCQLLoss`` whose TD target comes from its target network.

        TorchRL 0.14.1's ``value_loss`` hands the target parameters to the value estimator as
        ``params=``, a keyword the estimator ignores (it reads ``target_params``), so the target
        came from the online network and the soft target updates did nothing: on a CartPole-v1
        expert dataset its Q values grew to 2.6e8 in 20k steps and the policy returned 9
        (2026-11-27). The rest is TorchRL's ``value_loss`` as it is."""

        def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
            td_copy = tensordict.clone(False)
            with self.value_network_params.to_module(
                self.value_network, preserve_module_state=False
            ):
                self.value_network(td_copy)
            action = tensordict.get(self.tensor_keys.action)
            pred_val = td_copy.get(self.tensor_keys.action_value)
            if self.action_space == "categorical":
                if action.shape != pred_val.shape:
                    action = action.unsqueeze(-1)
                pred_val_index = torch.gather(pred_val, -1, index=action).squeeze(-1)
            else:
                pred_val_index = (pred_val * action.to(torch.float)).sum(-1)
            target_value = self.value_estimator.value_estimate(
                td_copy, target_params=self.target_value_network_params.detach()
            ).squeeze(-1)
            td_error = (pred_val_index - target_value).pow(2).unsqueeze(-1)
            tensordict.set(self.tensor_keys.priority, td_error, inplace=True)
            tensordict.set(self.tensor_keys.pred_val, pred_val, inplace=True)
            loss = 0.5 * distance_loss(pred_val_index, target_value, self.loss_function)
            metadata = {
                "td_error": td_error.mean(0).detach(),
                "pred_value": pred_val.mean().detach(),
                "target_value": target_value.mean().detach(),
            }
            return reduce_loss(self, loss, tensordict), metadata

    return TargetedDiscreteCQL


__getattr__ = defined_on_first_use(
    __name__, ConservativeSAC=_conservative_sac, TargetedDiscreteCQL=_targeted_discrete_cql
)


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    **kwargs: Any,
) -> ActorCritic:
    """CQL's networks by the action space: a TanhNormal actor and Q(s, a), or a greedy Q(s, .)."""
    from rlrun.builders.policies import make_qvalue_actor, make_stochastic_actor_q

    discrete = action_spec.domain == "discrete"
    make = make_qvalue_actor if discrete else make_stochastic_actor_q
    return make(observation_spec=observation_spec, action_spec=action_spec, **kwargs)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """CQL on ``ac.actor`` and ``ac.qvalue`` (discrete: ``ac.qvalue`` is the greedy actor)."""
    from rlrun.builders.offpolicy import off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    spec = ctx.ac.actor.spec["action"]
    if spec.domain == "discrete":
        loss = __getattr__("TargetedDiscreteCQL")(
            ctx.ac.qvalue, loss_function=cfg.loss_function, delay_value=True, action_space=spec
        )
        return off_policy(cfg, loss, ctx.frames_per_batch)
    loss = __getattr__("ConservativeSAC")(
        ctx.ac.actor,
        ctx.ac.qvalue,
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
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="Conservative Q-learning from a dataset (offline), continuous or discrete actions",
    schema=CQLConfig,
    data=Data.OFFLINE,
)
