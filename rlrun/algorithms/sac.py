"""SAC (``algo=sac``): TorchRL's ``SACLoss``, computed on tensors where the batch and networks
allow (:class:`TensorSACLoss`), a TanhNormal actor, twin Q, a learned entropy temperature (target
entropy -|A|) and soft target updates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm, Auto, defined_on_first_use
from rlrun.config import SoftActorCriticConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class SACConfig(SoftActorCriticConfig):
    """SAC's keys (``conf/algo/sac.yaml``)."""


def _tensor_sac_loss() -> type:
    """:class:`TensorSACLoss`, made on first use (its base is TorchRL's ``SACLoss``)."""
    import torch
    from tensordict import TensorDict, TensorDictBase
    from tensordict.nn import (
        ProbabilisticTensorDictModule,
        ProbabilisticTensorDictSequential,
        TensorDictModule,
    )
    from torch import nn
    from torchrl.envs.utils import ExplorationType, set_exploration_type
    from torchrl.modules import TanhNormal
    from torchrl.objectives import SACLoss
    from torchrl.objectives.sac import compute_rsample_log_prob
    from torchrl.objectives.utils import distance_loss

    from rlrun.builders.policies import CapturableTanhNormal, tanh_normal_draw
    from rlrun.builders.tensor_losses import (
        call,
        ensemble,
        mlp_input,
        mlp_layers,
        plain_td0,
        read_weights,
        td0_target,
    )

    def plain_actor(actor: nn.Module) -> bool:
        """Whether ``actor`` is a network of the distribution's parameters (one
        ``TensorDictModule`` on plain keys) and one distribution head, as rlrun's
        ``tanh_normal_actor``: the direct path calls the one and asks the other for the
        distribution."""
        if not isinstance(actor, ProbabilisticTensorDictSequential) or actor.return_composite:
            return False
        if len(actor.module) != 2:
            return False
        body, head = actor.module
        return (
            type(body) is TensorDictModule
            and isinstance(head, ProbabilisticTensorDictModule)
            and all(isinstance(key, str) for key in body.out_keys)
            and list(body.out_keys) == list(head.in_keys)
        )

    class TensorSACLoss(SACLoss):
        """TorchRL's ``SACLoss`` (v2: no value network), its terms computed straight on the
        batch's tensors (``rlrun/builders/tensor_losses.py``) where the actor is a plain one
        (a network of the distribution's parameters and a distribution head), the Q network a
        plain MLP and the batch a plain one (:func:`plain_td0`, one batch dim, terminal next
        states kept); TorchRL's ``forward`` otherwise (priority weights, loss masks, n-step,
        ``skip_done_states``, SAC v1, another reduction or value estimator).

        The same random draws in the same order (the next actions, then the actor's) and the
        same operations but for the critics, one plain MLP call each (:meth:`critics`): the
        draws, log-probabilities, temperature terms and entropy come out bit for bit, the
        critic and actor terms, priorities and gradients within rounding
        (``tests/test_tensor_sac.py``). The update step of ``+experiment=sac``'s shape on one
        CPU thread (Pendulum-v1, batch 256): 7.53 ms against 9.10 with TorchRL's ``forward``
        and 6.95 for the plain PyTorch loop, 0.92 of its pace (its loss and backward alone:
        7.06 against 6.33; ``bench/bench_sac_step.py``, 2026-12-06)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            qvalue = self.qvalue_network
            self.qvalue_layers = (  # the critics' MLP (each of the stack, and targets)
                mlp_layers(
                    qvalue,
                    ("module",),
                    self.qvalue_network_params,
                    self.target_qvalue_network_params,
                )
                if type(qvalue) is TensorDictModule
                and qvalue.out_keys == [self.tensor_keys.state_action_value]
                and self.tensor_keys.action in qvalue.in_keys
                else []
            )
            self.direct = (
                self.value_network_params is None  # SAC v2
                and plain_actor(self.actor_network)
                and bool(self.qvalue_layers)
            )
            # a TanhNormal of TorchRL's defaults but its bounds: drawn on tensors
            head = self.actor_network.module[-1]
            kwargs = getattr(head, "distribution_kwargs", None) or {}
            self.tanh_normal = (
                self.direct
                and head.distribution_class in (TanhNormal, CapturableTanhNormal)
                and sorted(head.dist_keys) == ["loc", "scale"]
                and set(kwargs) == {"low", "high"}
                and all(isinstance(kwargs[key], torch.Tensor) for key in ("low", "high"))
            )

        def forward(self, tensordict: TensorDictBase) -> TensorDict:
            if (
                not self.direct
                or self.skip_done_states
                or tensordict.batch_dims != 1
                or not plain_td0(self, tensordict)
            ):
                return super().forward(tensordict)
            # the loss's actor parameters into its actor, as TorchRL does: a deep copy of the
            # loss (the fused update step's test makes one) gives the module copies of its own
            with self.actor_network_params.to_module(
                self.actor_network, preserve_module_state=False
            ):
                return self.terms(tensordict)

        def terms(self, tensordict: TensorDictBase) -> TensorDict:
            """The direct path's loss terms and priorities."""
            keys = self.tensor_keys
            alpha = self.alpha()
            # the critics' target first: its draw of the next actions comes before the actor's
            with torch.no_grad():
                next_action, next_log_prob, dist = self.sample(tensordict, ("next",))
                target = self.target_qvalue_network_params
                next_q = self.critics(target, tensordict, next_action, ("next",))
                if next_q.shape[-next_log_prob.ndim :] != next_log_prob.shape:
                    next_log_prob = next_log_prob.unsqueeze(-1)
                next_value = (next_q - alpha * next_log_prob).min(0)[0]
                target_value = td0_target(self, tensordict, next_value).squeeze(-1)
            online = self.qvalue_network_params
            pred_val = self.critics(online, tensordict, tensordict.get(keys.action)).squeeze(-1)
            td_error = abs(pred_val - target_value)
            loss_qvalue = distance_loss(
                pred_val, target_value.expand_as(pred_val), loss_function=self.loss_function
            ).sum(0)
            action, log_prob, _ = self.sample(tensordict, dist=dist)
            # the actor's term moves the action only: the critics' weights detached
            min_q = self.critics(online, tensordict, action, detach=True).min(0)[0].squeeze(-1)
            if log_prob.shape != min_q.shape:
                raise RuntimeError(f"Losses shape mismatch: {log_prob.shape} and {min_q.shape}")
            loss_actor = alpha * log_prob - min_q
            log_prob = log_prob.detach()
            loss_alpha = -self.log_alpha * (log_prob + self.target_entropy)
            tensordict.set(keys.priority, td_error.detach().max(0)[0])
            out = {
                "loss_actor": loss_actor.mean(),
                "loss_qvalue": loss_qvalue.mean(),
                "loss_alpha": loss_alpha.mean(),
                "alpha": alpha,
                "entropy": (-log_prob).detach().mean(),
            }
            return TensorDict(out, batch_size=[])

        def alpha(self) -> torch.Tensor:
            """The temperature, ``log_alpha`` first clamped to its bounds as TorchRL does."""
            if self.min_log_alpha is not None or self.max_log_alpha is not None:
                self.log_alpha.data.clamp_(self.min_log_alpha, self.max_log_alpha)
            with torch.no_grad():
                return self.log_alpha.exp()

        def sample(
            self,
            batch: TensorDictBase,
            prefix: tuple[str, ...] = (),
            dist: torch.distributions.Distribution | None = None,
        ) -> tuple[torch.Tensor, torch.Tensor, torch.distributions.Distribution | None]:
            """A reparameterised action of the actor (the loss's parameters: :meth:`forward`
            swaps them in) on the states under ``prefix``, its log-probability, and the
            distribution drawn from: None for rlrun's actor's TanhNormal, drawn on the
            tensors (``tanh_normal_draw``: the same draw, bit for bit). Another distribution
            is TorchRL's; a ``TanhNormal`` ``dist`` of an earlier call is re-pointed at the new
            parameters (its ``update``) rather than built again: building a second one (its
            transforms, their checks) cost 0.18 ms of the step's 4.2 ms forward on one CPU
            thread (2026-12-06)."""
            body, head = self.actor_network.module
            with set_exploration_type(ExplorationType.RANDOM):
                params = call(body, batch, prefix)
                if not isinstance(params, tuple):
                    params = (params,)
                if self.tanh_normal:  # the same draw and log-prob, no distribution built
                    named = dict(zip(head.dist_keys, params, strict=True))
                    bounds = head.distribution_kwargs
                    return (
                        *tanh_normal_draw(
                            named["loc"], named["scale"], bounds["low"], bounds["high"]
                        ),
                        None,
                    )
                if isinstance(dist, TanhNormal):
                    dist.update(**dict(zip(head.dist_keys, params, strict=True)))
                else:
                    dist = head.get_dist(TensorDict(dict(zip(head.in_keys, params, strict=True))))
                return *compute_rsample_log_prob(dist), dist

        def critics(
            self,
            params: TensorDictBase,
            batch: TensorDictBase,
            action: torch.Tensor,
            prefix: tuple[str, ...] = (),
            detach: bool = False,
        ) -> torch.Tensor:
            """Every critic's Q(s, ``action``) with the stacked ``params`` (the loss's or the
            target's), the states under ``prefix``, stacked on a first dim."""
            x = mlp_input(self.qvalue_network, batch, prefix, {self.tensor_keys.action: action})
            return ensemble(
                read_weights(self.qvalue_layers, params, stacked=True, detach=detach), x
            )

    return TensorSACLoss


__getattr__ = defined_on_first_use(__name__, TensorSACLoss=_tensor_sac_loss)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """SAC on ``ac.actor`` (stochastic, explores by sampling) and ``ac.qvalue``."""
    from rlrun.builders.offpolicy import max_entropy, off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = __getattr__("TensorSACLoss")(
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
