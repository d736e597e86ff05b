"""PPO (``algo=ppo``): TorchRL's ``ClipPPOLoss`` with GAE, fed minibatches of each fresh batch,
computed on tensors where the networks allow (:class:`TensorPPOLoss`).

The loss comes with the hook that computes advantages over the collected batch and cuts it into
minibatches (whole sequences for a recurrent policy; ``rlrun/builders/onpolicy.py``, shared with
the other on-policy algorithms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data, defined_on_first_use
from rlrun.algorithms.minibatches import check_minibatches
from rlrun.config import ClipPPOConfig
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def _tensor_ppo_loss() -> type:
    """:class:`TensorPPOLoss`, made on first use (its base is TorchRL's ``ClipPPOLoss``)."""
    import torch
    from tensordict import TensorDict, TensorDictBase
    from tensordict.nn import TensorDictModule
    from torchrl.objectives.utils import distance_loss

    from rlrun.builders.devices import capturing
    from rlrun.builders.policies import BoundedActor, categorical_scores
    from rlrun.builders.tensor_losses import Weights, mlp_layers, network_outputs
    from rlrun.compat.torchrl import (
        CapturablePPOLoss,
        log_ratio_bounds,
        policy_entropy,
        reduce_loss,
        standardized_advantage,
    )

    class TensorPPOLoss(CapturablePPOLoss):
        """TorchRL's ``ClipPPOLoss`` (rlrun's capturable one), its terms computed straight on
        the minibatch's tensors where the actor is one network before its distribution (rlrun's
        ``BoundedActor``), the critic one network, and the minibatch carries its advantages:
        each network run on the loss's parameters (a plain MLP's as read, any other swapped in),
        the actor's distribution still TorchRL's, built on its outputs. TorchRL's ``forward``
        otherwise (a recurrent policy, value clipping, a proximal actor or capped importance
        ratios, composite actions). The same terms, in TorchRL's order of operations: a test
        compares them, their gradients and the trained weights with TorchRL's on the same
        minibatches, bit for bit (tests/test_tensor_ppo.py). TorchRL's routes both networks
        through tensordicts and functional parameter swaps, which cost a small network more
        than its arithmetic on the CPU (docs/benchmarks.md, PPO)."""

        def __init__(self, actor, critic, **kwargs) -> None:
            super().__init__(actor, critic, **kwargs)
            head = actor.module[0] if isinstance(actor, BoundedActor) and actor.direct else None
            self.direct = (
                head is not None
                and type(critic) is TensorDictModule
                and critic.out_keys == [self.tensor_keys.value]
                and self.functional
                and not (self.delay_actor or self.clip_value or self.separate_losses)
                and self.advantage_norm is None
                and self.max_importance_ratio is None
                and self.critic_coeff is not None
                and self.critic_coeff > 0
                and isinstance(kwargs.get("entropy_coeff", 0.0), float | int)
            )
            # plain MLPs: their layers, run on the parameters as read (else: swapped in)
            self.actor_weights = Weights(
                mlp_layers(head, ("module", "0", "module"), self.actor_network_params)
                if self.direct
                else []
            )
            self.critic_weights = Weights(
                mlp_layers(critic, ("module",), self.critic_network_params) if self.direct else []
            )
            # a categorical actor's terms on its logits (BoundedActor.categorical), else None
            self.categorical = actor.categorical if self.direct else None

        def forward(self, tensordict: TensorDictBase) -> TensorDict:
            keys = self.tensor_keys
            advantage = tensordict.get(keys.advantage, None)
            prev_log_prob = tensordict.get(keys.sample_log_prob, None)
            if not (
                self.direct
                and isinstance(advantage, torch.Tensor)
                and isinstance(prev_log_prob, torch.Tensor)
                and advantage.shape == (*prev_log_prob.shape, 1)
            ):
                return super().forward(tensordict)
            advantage = standardized_advantage(self, advantage, tensordict)
            action = tensordict.get(keys.action)
            # traced or captured: TorchRL's entropy there is sampled, or checked without a sync
            traced = torch.compiler.is_compiling() or capturing()
            categorical = None if traced else self.categorical
            dist, entropy = None, None
            if categorical is not None:
                logits = self.actor_outputs(tensordict)[self.actor_network.module[-1].in_keys[0]]
                log_prob, entropy = categorical_scores(logits, action, one_hot=categorical)
            else:
                dist = self.policy(tensordict)
                log_prob = dist.log_prob(action)
            log_weight = (log_prob - prev_log_prob).unsqueeze(-1)
            kl_approx = (prev_log_prob - log_prob).unsqueeze(-1)
            with torch.no_grad():  # TorchRL's ESS, for logging
                lw = log_weight.squeeze(-1)
                ess = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp()
            gain1 = log_weight.exp() * advantage
            log_weight_clip = log_weight.clamp(*log_ratio_bounds(self))
            clip_fraction = (log_weight_clip != log_weight).to(log_weight.dtype).mean()
            gain2 = log_weight_clip.exp() * advantage
            gain = torch.stack([gain1, gain2], -1).min(dim=-1).values
            out = {
                "loss_objective": -gain,
                "clip_fraction": clip_fraction,
                "kl_approx": kl_approx.detach().mean(),
            }
            if self.entropy_bonus:
                if entropy is not None and entropy.isfinite().all():
                    entropy = entropy.unsqueeze(-1)
                else:  # TorchRL's (a sampled estimate where the analytic one is not finite)
                    dist = dist if dist is not None else self.policy(tensordict)
                    entropy = policy_entropy(self, dist, advantage.shape[:-1])
                out["entropy"] = entropy.detach().mean()
                out["loss_entropy"] = -self.entropy_coeff * entropy
            out.update(self.critic_terms(tensordict))
            out["ESS"] = ess / log_weight.shape[0]
            with torch.no_grad():
                ratio = log_weight.exp()
                out["max_ratio"], out["mean_ratio"] = ratio.max(), ratio.mean()
            for key, value in out.items():
                if key.startswith("loss_"):
                    out[key] = reduce_loss(self, value, tensordict).squeeze(-1)
            return TensorDict(out)

        def actor_outputs(self, batch: TensorDictBase) -> dict:
            """The actor's network on ``batch``, run on the loss's parameters, by output key."""
            actor = self.actor_network
            head = actor.module[0]
            weights = self.actor_weights(self.actor_network_params)
            outputs = network_outputs(head, weights, actor, batch)
            return dict(zip(head.out_keys, outputs, strict=True))

        def policy(self, batch: TensorDictBase) -> torch.distributions.Distribution:
            """The actor's distribution on ``batch``: TorchRL's head builds it from the
            network's outputs (and from the batch's other inputs of it, e.g. an action mask)."""
            params = self.actor_outputs(batch)
            draw = self.actor_network.module[-1]
            inputs = {key: params[key] if key in params else batch.get(key) for key in draw.in_keys}
            return draw.get_dist(TensorDict(inputs))

        def critic_terms(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
            """TorchRL's ``loss_critic`` (times ``critic_coeff``, not yet reduced) and the
            explained variance, the critic run on the loss's parameters."""
            target_return = batch.get(self.tensor_keys.value_target)
            critic = self.critic_network
            weights = self.critic_weights(self.critic_network_params)
            (state_value,) = network_outputs(critic, weights, critic, batch)
            loss_value = distance_loss(
                target_return, state_value, loss_function=self.loss_critic_type
            )
            out = {"loss_critic": self.critic_coeff * loss_value}
            if self.log_explained_variance:
                with torch.no_grad():
                    target, predicted = target_return.detach(), state_value.detach()
                    eps = torch.finfo(target.dtype).eps
                    resid = torch.var(target - predicted, correction=0, dim=0)
                    total = torch.var(target, correction=0, dim=0)
                    out["explained_variance"] = 1.0 - resid / (total + eps)
            return out

    return TensorPPOLoss


__getattr__ = defined_on_first_use(__name__, TensorPPOLoss=_tensor_ppo_loss)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """Clipped PPO on the actor and critic of ``ac``; ``ctx.fresh_batches``: each batch was
    collected with the weights of the previous update (not so for an async collector)."""
    from rlrun.builders.onpolicy import on_policy, require_critic

    require_critic(ctx.ac, cfg.name)
    loss = __getattr__("TensorPPOLoss")(
        ctx.ac.actor,
        ctx.ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    if ctx.ac.recurrent and not ctx.ac.recurrent_mode["loss"]:
        raise ConfigError(
            f"policy.recurrent_mode.loss=false is not valid with algo={cfg.name}: TorchRL's PPO "
            "loss replays whole sequences (it sets the mode itself); set it to true."
        )
    return on_policy(
        cfg,
        loss,
        ctx,
        cfg.minibatch_size,
        epochs=cfg.epochs,
        sequence_length=cfg.sequence_length,
        logprob_check_tol=cfg.logprob_check_tol,
    )


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_actor_critic",
    summary="Clipped PPO with GAE, minibatches of each fresh batch; MLP, LSTM, GRU or CNN",
    schema=ClipPPOConfig,
    data=Data.ON_POLICY,
    sequences=True,
    cudagraphs=True,
    check=check_minibatches,
)
