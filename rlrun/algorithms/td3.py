"""TD3 (``algo=td3``): TorchRL's ``TD3Loss`` (twin Q, target policy smoothing with clipped noise),
computed on tensors where the networks and the batch allow (:class:`TensorTD3Loss`), actor and
target updates every ``algo.policy_delay`` critic steps, and Gaussian exploration noise added to
the deterministic actor while collecting (fixed, or annealed over frames)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import BOX, Algorithm, Auto, defined_on_first_use
from rlrun.config import GaussianNoiseConfig, TwinDelayedConfig

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class TD3Config(GaussianNoiseConfig, TwinDelayedConfig):
    """TD3's keys (``conf/algo/td3.yaml``): exploration noise, twin delayed critics."""


def _tensor_td3_loss() -> type:
    """:class:`TensorTD3Loss`, made on first use (its base is TorchRL's ``TD3Loss``)."""
    import torch
    from tensordict import TensorDictBase
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from torchrl.modules import TanhModule
    from torchrl.objectives import TD3Loss
    from torchrl.objectives.utils import distance_loss

    from rlrun.builders.tensor_losses import (
        Weights,
        ensemble,
        mlp,
        mlp_input,
        mlp_layers,
        plain_td0,
        read_weights,
        td0_target,
    )

    class TensorTD3Loss(TD3Loss):
        """TorchRL's ``TD3Loss``, its actor and critic terms computed straight on the batch's
        tensors (``rlrun/builders/tensor_losses.py``) where the networks are those
        ``make_deterministic_actor_q`` builds (an MLP actor behind TorchRL's ``TanhModule``,
        an MLP Q(s, a)) and the batch a plain one; TorchRL's own terms otherwise (priority
        weights, loss masks, n-step, other networks). The delayed actor (``DelayedActor``)
        calls the same ``actor_loss`` and ``value_loss``, so its skipping holds as it was.

        Every network runs on the loss's own parameters as read (online, target, each critic
        of the stack), nothing swapped into a module. The actor's term takes its gradient
        through the first critic only: TorchRL evaluates them all with detached weights and
        drops the others' outputs (a zero gradient); the others run without a graph, for the
        logged ``state_action_value_actor``. The same terms, logged values, priorities and
        gradients as TorchRL's but for the critics' rounding (``tests/test_tensor_td3.py``);
        rlrun's update step of ``+experiment=td3_mujoco``'s shape on one CPU thread against
        TorchRL's terms and the plain PyTorch loop: ``bench/bench_td3_step.py``."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.actor_weights = Weights([])  # the actor's MLP (online and target)
            self.qvalue_layers: list = []  # the critics' MLP (each of the stack, and targets)
            self.direct = self.direct_networks()

        def direct_networks(self) -> bool:
            """Whether the networks are ones the tensor path computes (and its layers set)."""
            actor, qvalue, keys = self.actor_network, self.qvalue_network, self.tensor_keys
            if not isinstance(actor, TensorDictSequential) or len(actor.module) != 2:
                return False
            head, tanh = actor.module
            if type(head) is not TensorDictModule or type(tanh) is not TanhModule:
                return False
            if len(head.out_keys) != 1 or tanh.in_keys != head.out_keys:
                return False
            if type(qvalue) is not TensorDictModule:
                return False
            if tanh.out_keys != [keys.action] or qvalue.out_keys != [keys.state_action_value]:
                return False
            if keys.action not in qvalue.in_keys or not set(qvalue.in_keys) <= {
                *head.in_keys,
                keys.action,
            }:
                return False
            actors = (self.actor_network_params, self.target_actor_network_params)
            bounds = self.bound_keys()
            if any(params.get(key, None) is None for params in actors for key in bounds):
                return False
            self.actor_weights = Weights(mlp_layers(head, ("module", "0", "module"), *actors))
            self.qvalue_layers = mlp_layers(
                qvalue, ("module",), self.qvalue_network_params, self.target_qvalue_network_params
            )
            return bool(self.actor_weights.layers and self.qvalue_layers)

        def bound_keys(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
            """Where the actor's parameters keep its ``TanhModule``'s low and high bounds (it
            names its buffers after its output key)."""
            key = self.actor_network.module[1].out_keys[0]
            name = key if isinstance(key, str) else "_".join(key)
            return ("module", "1", f"{name}_low"), ("module", "1", f"{name}_high")

        def on_tensors(self, tensordict: TensorDictBase) -> bool:
            """Whether this batch takes the tensor path: plain networks, a plain batch of
            one batch dim."""
            return self.direct and tensordict.batch_dims == 1 and plain_td0(self, tensordict)

        def action(
            self, params: TensorDictBase, batch: TensorDictBase, prefix: tuple[str, ...] = ()
        ) -> torch.Tensor:
            """The actor's action with ``params`` (the loss's or the target's) on the states
            under ``prefix``: its MLP, then its ``TanhModule``'s operations in its order, with
            the bounds those parameters hold."""
            head, tanh = self.actor_network.module
            feature = mlp(self.actor_weights(params), mlp_input(head, batch, prefix))
            feature = feature.tanh()
            if tanh.clamp:
                eps = torch.finfo(feature.dtype).resolution
                feature = feature.clamp(-1 + eps, 1 - eps)
            if tanh.non_trivial:
                low, high = (params.get(key) for key in self.bound_keys())
                feature = low + (high - low) * (feature + 1) / 2
            return feature

        def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
            if not self.on_tensors(tensordict):
                return super().actor_loss(tensordict)
            action = self.action(self.actor_network_params, tensordict)
            x = mlp_input(self.qvalue_network, tensordict, given={self.tensor_keys.action: action})
            critics = read_weights(
                self.qvalue_layers, self.qvalue_network_params, stacked=True, detach=True
            )
            first = mlp(critics, x, 0).squeeze(-1)
            with torch.no_grad():
                others = [mlp(critics, x, i).squeeze(-1) for i in range(1, self.num_qvalue_nets)]
            value = torch.stack([first.detach(), *others])
            return (-first).mean(), {"state_action_value_actor": value}

        def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
            if not self.on_tensors(tensordict):
                return super().value_loss(tensordict)
            keys = self.tensor_keys
            act = tensordict.get(keys.action)
            noise = (torch.randn_like(act) * self.policy_noise).clamp(  # drawn first, as TorchRL
                -self.noise_clip, self.noise_clip
            )
            with torch.no_grad():
                next_action = self.action(self.target_actor_network_params, tensordict, ("next",))
                next_action = (next_action + noise).clamp(self.min_action, self.max_action)
                x = mlp_input(
                    self.qvalue_network, tensordict, ("next",), {keys.action: next_action}
                )
                targets = read_weights(
                    self.qvalue_layers, self.target_qvalue_network_params, stacked=True
                )
                next_target_qvalue = ensemble(targets, x).squeeze(-1).min(0)[0]
            critics = read_weights(self.qvalue_layers, self.qvalue_network_params, stacked=True)
            current_qvalue = ensemble(critics, mlp_input(self.qvalue_network, tensordict))
            current_qvalue = current_qvalue.squeeze(-1)
            target_value = td0_target(self, tensordict, next_target_qvalue.unsqueeze(-1))
            target_value = target_value.squeeze(-1)
            loss_qval = distance_loss(
                current_qvalue,
                target_value.expand_as(current_qvalue),
                loss_function=self.loss_function,
            ).sum(0)
            metadata = {
                "td_error": (current_qvalue - target_value).pow(2),
                "next_state_value": next_target_qvalue.detach(),
                "pred_value": current_qvalue.detach(),
                "target_value": target_value.detach(),
            }
            return loss_qval.mean(), metadata

    return TensorTD3Loss


__getattr__ = defined_on_first_use(__name__, TensorTD3Loss=_tensor_td3_loss)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """TD3 on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; the actor learns and
    the targets follow it every ``algo.policy_delay`` steps (``DelayedActor``)."""
    from rlrun.builders.offpolicy import gaussian_noise, off_policy, require_qvalue, twin_delayed

    require_qvalue(ctx.ac, cfg.name)
    loss, updater = twin_delayed(__getattr__("TensorTD3Loss"), cfg, ctx.ac)
    exploration = gaussian_noise(cfg, ctx.ac, ctx.device)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater, exploration=exploration)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_deterministic_actor_q",
    summary="Twin delayed DDPG: twin Q, target smoothing, delayed actor updates",
    schema=TD3Config,
    actions=(BOX,),
    ray_learners=True,
    cudagraphs=True,
    # compiled and captured on an H100 (2026-11-27, docs/guides/gpu.md): 111 frames/s against 61
    # eager, after over 60 s of compiling both phases (from its whole-run rate)
    auto={"cuda": Auto(compile=True, cudagraphs=True, min_steps=20_000)},
)
