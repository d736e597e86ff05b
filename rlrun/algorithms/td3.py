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
    from tensordict import TensorDictBase, unravel_key
    from tensordict.nn import TensorDictModule, TensorDictSequential
    from torch import nn
    from torchrl.modules import MLP, TanhModule
    from torchrl.objectives import TD3Loss
    from torchrl.objectives.utils import distance_loss

    from rlrun.builders.tensor_losses import plain_td0, shares_parameters, td0_target

    # parameter-free layers that compute the same on a stack of networks' activations as on one
    elementwise = (nn.ReLU, nn.Tanh, nn.ELU, nn.GELU, nn.SiLU, nn.LeakyReLU, nn.Identity)
    Layers = list  # per layer: a Linear's (weight key, bias key) in the parameters, or the module

    def mlp_layers(net: nn.Module, prefix: tuple[str, ...], *params: TensorDictBase) -> Layers:
        """``net``'s layers, each ``Linear`` as the keys of its weight and bias in ``params``
        (every one must hold them), where ``net`` is a plain MLP: TorchRL's ``MLP`` (its
        inputs concatenated) or an ``nn.Sequential``, of ``Linear`` layers with a bias and
        elementwise activations; empty otherwise."""
        if type(net) not in (MLP, nn.Sequential) or not isinstance(
            getattr(net, "out_features", 0), int
        ):  # an MLP's reshaped outputs
            return []
        layers: Layers = []
        for name, layer in net.named_children():
            if type(layer) is nn.Linear and layer.bias is not None:
                keys = ((*prefix, name, "weight"), (*prefix, name, "bias"))
                if any(p.get(key, None) is None for p in params for key in keys):
                    return []
                layers.append(keys)
            elif type(layer) in elementwise:
                layers.append(layer)
            else:
                return []
        return layers if any(isinstance(layer, tuple) for layer in layers) else []

    class TensorTD3Loss(TD3Loss):
        """TorchRL's ``TD3Loss``, its actor and critic terms computed straight on the batch's
        tensors (``rlrun/builders/tensor_losses.py``) where the networks are those
        ``make_deterministic_actor_q`` builds (an MLP actor behind TorchRL's ``TanhModule``,
        an MLP Q(s, a)) and the batch a plain one; TorchRL's own terms otherwise (priority
        weights, loss masks, n-step, other networks). The delayed actor (``DelayedActor``)
        calls the same ``actor_loss`` and ``value_loss``, so its skipping holds as it was.

        The critics are one batched module, each ``Linear`` a ``bmm`` over the stacked weights
        plus the bias: the operations TorchRL's ``vmap`` of the critic runs, without its
        tensordicts and parameter swaps; the target actor runs on its parameters as read
        (``F.linear``, what ``nn.Linear`` computes), not swapped in. The actor's term takes the
        gradient through the first critic only (TorchRL evaluates them all with detached
        weights and drops the others' outputs, whose gradient is zero); the others are
        evaluated without a graph, for the logged ``state_action_value_actor``. The loss terms,
        logged values, priorities and gradients are TorchRL's, bitwise
        (``tests/test_tensor_td3.py``; ``bench/bench_td3_step.py`` checks it on
        ``+experiment=td3_mujoco``'s shapes). rlrun's update step there, one CPU thread:
        5.50 ms against 6.67 ms with TorchRL's terms, the plain PyTorch loop's 5.16 ms
        (0.94x its pace, was 0.77x; 2026-12-06)."""

        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.actor_layers: Layers = []  # the target actor's MLP
            self.qvalue_layers: Layers = []  # the critics' MLP
            self.qvalue_output = 0  # the index of its output layer
            self.direct = self.direct_networks()

        def direct_networks(self) -> bool:
            """Whether the networks are ones the tensor path computes (and its layers set)."""
            actor, qvalue, keys = self.actor_network, self.qvalue_network, self.tensor_keys
            if self.deactivate_vmap or not isinstance(actor, TensorDictSequential):
                return False
            if len(actor.module) != 2 or type(qvalue) is not TensorDictModule:
                return False
            head, tanh = actor.module
            if type(head) is not TensorDictModule or type(tanh) is not TanhModule:
                return False
            if len(head.out_keys) != 1 or tanh.in_keys != head.out_keys:
                return False
            if tanh.out_keys != [keys.action] or qvalue.out_keys != [keys.state_action_value]:
                return False
            inputs = {*head.in_keys, keys.action}
            if keys.action not in qvalue.in_keys or not set(qvalue.in_keys) <= inputs:
                return False
            if type(head.module) is nn.Sequential and len(head.in_keys) != 1:
                return False
            if type(qvalue.module) is nn.Sequential and len(qvalue.in_keys) != 1:
                return False
            if not shares_parameters(self.actor_network_params, actor):
                return False
            bounds = [("module", "1", name) for name in self.bound_names(tanh)]
            if any(self.target_actor_network_params.get(key, None) is None for key in bounds):
                return False
            self.actor_layers = mlp_layers(
                head.module, ("module", "0", "module"), self.target_actor_network_params
            )
            self.qvalue_layers = mlp_layers(
                qvalue.module,
                ("module",),
                self.qvalue_network_params,
                self.target_qvalue_network_params,
            )
            linear = [i for i, layer in enumerate(self.qvalue_layers) if isinstance(layer, tuple)]
            self.qvalue_output = linear[-1] if linear else 0
            return bool(self.actor_layers and self.qvalue_layers)

        @staticmethod
        def bound_names(tanh: TanhModule) -> tuple[str, str]:
            """The names of ``tanh``'s low and high buffers (TanhModule names them so)."""
            key = tanh.out_keys[0]
            name = key if isinstance(key, str) else "_".join(key)
            return f"{name}_low", f"{name}_high"

        def on_tensors(self, tensordict: TensorDictBase) -> bool:
            """Whether this batch takes the tensor path: plain networks, a plain batch of
            one batch dim."""
            return self.direct and tensordict.batch_dims == 1 and plain_td0(self, tensordict)

        def squash(
            self, param: torch.Tensor, low: torch.Tensor, high: torch.Tensor
        ) -> torch.Tensor:
            """The actor's ``TanhModule`` on ``param``: its operations, in its order."""
            tanh = self.actor_network.module[1]
            feature = param.tanh()
            if tanh.clamp:
                eps = torch.finfo(feature.dtype).resolution
                feature = feature.clamp(-1 + eps, 1 - eps)
            if tanh.non_trivial:  # a non-empty dict: always so, as in TorchRL's TanhModule
                feature = low + (high - low) * (feature + 1) / 2
            return feature

        def target_action(self, inputs: list[torch.Tensor]) -> torch.Tensor:
            """The target actor's action: its MLP on the target parameters, then the squash
            with the target copies of the bounds (TorchRL swaps those in too)."""
            params = self.target_actor_network_params
            x = torch.cat(inputs, -1) if len(inputs) > 1 else inputs[0]
            for layer in self.actor_layers:
                if isinstance(layer, tuple):
                    x = nn.functional.linear(x, params.get(layer[0]), params.get(layer[1]))
                else:
                    x = layer(x)
            low, high = self.bound_names(self.actor_network.module[1])
            return self.squash(
                x, params.get(("module", "1", low)), params.get(("module", "1", high))
            )

        def critics(
            self,
            params: TensorDictBase,
            inputs: list[torch.Tensor],
            which: int | None = None,
            detach: bool = False,
        ) -> torch.Tensor:
            """Every critic on the same ``inputs`` (or critic ``which`` alone), shape
            ``[critics, *batch, 1]``: the stacked weights as one batched MLP, the ``bmm`` and
            bias add that TorchRL's vmap of the critics computes (the same floats;
            ``F.linear`` per critic gives others)."""
            n = self.num_qvalue_nets
            count = n if which is None else 1
            xs = [x.expand(count, *x.shape) for x in inputs]  # as TorchRL expands its batch
            x = torch.cat(xs, -1) if len(xs) > 1 else xs[0]
            for i, layer in enumerate(self.qvalue_layers):
                if not isinstance(layer, tuple):
                    x = layer(x)
                    continue
                weight, bias = params.get(layer[0]), params.get(layer[1])
                if which is not None:
                    weight, bias = weight[which : which + 1], bias[which : which + 1]
                if detach:
                    weight, bias = weight.detach(), bias.detach()
                if which is not None and i == self.qvalue_output:
                    # one critic's output layer, as in a batch of them all: a batch of one
                    # runs another kernel there, other floats (a 256-wide layer's single
                    # output, 2026-12-06); the hidden layers give the same either way
                    x, weight, bias = (t.expand(n, *t.shape[1:]) for t in (x, weight, bias))
                    x = (torch.bmm(x, weight.transpose(1, 2)) + bias.unsqueeze(1))[:1]
                else:
                    x = torch.bmm(x, weight.transpose(1, 2)) + bias.unsqueeze(1)
            return x

        def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
            if not self.on_tensors(tensordict):
                return super().actor_loss(tensordict)
            head, tanh = self.actor_network.module
            low, high = (getattr(tanh, name) for name in self.bound_names(tanh))
            values = {key: tensordict.get(key) for key in head.in_keys}
            action = self.squash(head.module(*values.values()), low, high)
            values[self.tensor_keys.action] = action
            inputs = [values[key] for key in self.qvalue_network.in_keys]
            # the gradient through the first critic only: TorchRL evaluates them all, with
            # detached weights, and drops the others' outputs (a zero gradient); they are
            # evaluated without a graph, for the logged values
            params = self.qvalue_network_params
            first = self.critics(params, inputs, which=0, detach=True)
            with torch.no_grad():
                others = [
                    self.critics(params, inputs, which=j) for j in range(1, self.num_qvalue_nets)
                ]
            loss_actor = -(first.squeeze(-1)[0])
            value = torch.cat([first.detach(), *others]).squeeze(-1)
            return loss_actor.mean(), {"state_action_value_actor": value}

        def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
            if not self.on_tensors(tensordict):
                return super().value_loss(tensordict)
            keys = self.tensor_keys
            act = tensordict.get(keys.action)
            # drawn first, as TorchRL draws it
            noise = (torch.randn_like(act) * self.policy_noise).clamp(
                -self.noise_clip, self.noise_clip
            )
            head = self.actor_network.module[0]
            with torch.no_grad():
                values = {key: tensordict.get(unravel_key(("next", key))) for key in head.in_keys}
                next_action = self.target_action(list(values.values()))
                values[keys.action] = (next_action + noise).clamp(self.min_action, self.max_action)
                inputs = [values[key] for key in self.qvalue_network.in_keys]
                next_target_q1q2 = self.critics(self.target_qvalue_network_params, inputs)
            next_target_qvalue = next_target_q1q2.squeeze(-1).min(0)[0]
            inputs = [tensordict.get(key) for key in self.qvalue_network.in_keys]
            current_qvalue = self.critics(self.qvalue_network_params, inputs).squeeze(-1)
            target_value = td0_target(self, tensordict, next_target_qvalue.unsqueeze(-1))
            target_value = target_value.squeeze(-1)
            td_error = (current_qvalue - target_value).pow(2)
            loss_qval = distance_loss(
                current_qvalue,
                target_value.expand_as(current_qvalue),
                loss_function=self.loss_function,
            ).sum(0)
            metadata = {
                "td_error": td_error,
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
