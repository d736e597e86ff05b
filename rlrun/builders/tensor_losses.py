"""TorchRL's off-policy losses computed straight on the batch's tensors, where nothing in the
batch or the loss asks for more than the plain math.

TorchRL's losses route every network call through tensordicts, key lookups and functional
parameter swaps; on the CPU that bookkeeping outweighed the small networks' arithmetic (update
steps/s against plain PyTorch loops, ``python bench/bench_devices.py``, 2 cores, 2026-12-06:
TD3 0.72x with TorchRL's ``forward``, 0.94x on tensors; SAC 0.75x and 0.88x; DQN 0.59x and
0.80x). An algorithm's loss may take a direct path where
:func:`plain_td0` holds, and TorchRL's own ``forward`` everywhere else (priority weights, loss
masks, n-step returns, another reduction or value estimator); the algorithm's test checks the
two give the same terms and gradients on the same batch. TorchRL's loss stays the source of
truth for the math.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn
from torchrl.modules import MLP
from torchrl.objectives import LossModule
from torchrl.objectives.value import TD0Estimator
from torchrl.objectives.value.functional import td0_return_estimate

from rlrun.compat.torchrl import loss_mask_keys


def plain_td0(loss: LossModule, batch: TensorDictBase) -> bool:
    """Whether ``loss.forward`` would do no more on ``batch`` than the plain terms: mean
    reduction, TD(0) targets without reward standardising, and no priority weights, loss mask
    or n-step gap in the batch (what the fused uniform replay sample hands the loss)."""
    estimator = loss.value_estimator
    if loss.reduction != "mean" or type(estimator) is not TD0Estimator:
        return False
    if estimator.average_rewards:
        return False
    keys = optional_keys(loss)
    if loss.use_prioritized_weights in (True, "auto"):
        keys.append(loss.tensor_keys.priority_weight)
    return all(batch.get(key, None) is None for key in keys)


def optional_keys(loss: LossModule) -> list[NestedKey]:
    """The entries a TorchRL loss acts on where a batch has them, beyond its ``in_keys``: the
    loss masks its reduction looks for and its value estimator's n-step gaps."""
    keys = list(loss_mask_keys(loss))
    if getattr(type(loss), "default_value_estimator", None) is not None:
        steps = getattr(loss.value_estimator.tensor_keys, "steps_to_next_obs", None)
        keys += [steps] if steps is not None else []
    return keys


def batch_keys(loss: nn.Module) -> list[NestedKey] | None:
    """Every entry ``loss`` may read from a batch: a TorchRL loss's ``in_keys``,
    :func:`optional_keys`, and what an rlrun wrapper of it reads before TorchRL's ``forward``
    (its ``batch_reads``: a team's done flags, spread over the agents). None, every entry,
    for a loss of several groups' (no ``in_keys``) and for a user's loss class (``_target_``),
    even one derived from TorchRL's: its ``forward`` may read more than its ``in_keys``."""
    known = type(loss).__module__.split(".")[0] in ("torchrl", "rlrun")
    keys = getattr(loss, "in_keys", None) if known and isinstance(loss, LossModule) else None
    extra = getattr(loss, "batch_reads", ())
    return [*keys, *optional_keys(loss), *extra] if keys else None


def td0_target(loss: LossModule, batch: TensorDictBase, next_value: torch.Tensor) -> torch.Tensor:
    """``reward + gamma * (not terminated) * next_value``: TorchRL's TD(0) return on the batch's
    tensors, as its estimator reads them (what ``value_estimate`` does without a network)."""
    estimator = loss.value_estimator
    keys = estimator.tensor_keys
    reward = batch.get(("next", keys.reward))
    if estimator.gamma.device != reward.device:  # as TorchRL's estimator, on its first call
        estimator.gamma = estimator.gamma.to(reward.device)
    done = batch.get(("next", keys.done))
    terminated = batch.get(("next", keys.terminated), done)
    return td0_return_estimate(estimator.gamma, next_value, reward, terminated)


def call(
    module: TensorDictModule, batch: TensorDictBase, prefix: tuple[str, ...] = ()
) -> torch.Tensor:
    """``module``'s network on its ``in_keys`` read from ``batch`` (under ``prefix``, e.g.
    ``("next",)``): the call a ``TensorDictModule`` makes, without writing a tensordict."""
    return module.module(*(batch.get(unravel_key((*prefix, key))) for key in module.in_keys))


# --- plain MLPs on the loss's own parameters --------------------------------------------------
# A loss keeps its networks' parameters apart from the modules (``<name>_params``, stacked with a
# leading dim for an ensemble of critics, and their ``target_`` copies), and TorchRL swaps them
# into the module for each call, or vmaps the module over the stacked ones. Where a network is
# a plain MLP, the direct path reads those parameters and runs the layers itself.

# parameter-free layers that compute the same on any input shape, element by element
ELEMENTWISE = (nn.ReLU, nn.Tanh, nn.ELU, nn.GELU, nn.SiLU, nn.LeakyReLU, nn.Sigmoid, nn.Identity)
# a layer of :func:`mlp_layers`: a Linear's weight and bias keys (None: no bias), or the module
Layer = tuple[NestedKey, NestedKey | None] | nn.Module


def mlp_layers(
    module: TensorDictModule, prefix: tuple[str, ...], *params: TensorDictBase
) -> list[Layer]:
    """The layers of ``module``'s network where it is a plain MLP (TorchRL's ``MLP`` with a
    flat output, its inputs concatenated, or an ``nn.Sequential`` of one input) of ``Linear``
    layers and :data:`ELEMENTWISE` activations: each ``Linear`` as the keys of its weight and
    bias under ``prefix`` in the loss's parameters (every one of ``params`` holding them), each
    activation as it is. Empty for any other network: its loss takes TorchRL's path."""
    net = module.module
    if type(net) is MLP:
        if not isinstance(net.out_features, int):  # reshaped outputs
            return []
    elif type(net) is not nn.Sequential or len(module.in_keys) != 1:
        return []
    layers: list[Layer] = []
    for name, layer in net.named_children():
        if type(layer) is nn.Linear:
            bias = (*prefix, name, "bias") if layer.bias is not None else None
            keys = ((*prefix, name, "weight"), bias)
            if any(p.get(key, None) is None for p in params for key in keys if key is not None):
                return []
            layers.append(keys)
        elif type(layer) in ELEMENTWISE:
            layers.append(layer)
        else:
            return []
    return layers if any(isinstance(layer, tuple) for layer in layers) else []


def read_weights(
    layers: list[Layer], params: TensorDictBase, *, stacked: bool = False, detach: bool = False
) -> list:
    """``layers`` (:func:`mlp_layers`) with their weights read from ``params``: each ``Linear``
    as a pair of sequences, the weights and the biases of each network (``stacked``: one per
    index of the tensors' leading dim, an ensemble; else the one network's); ``detach``: for a
    term whose gradient moves the input only."""
    out: list = []
    for layer in layers:
        if not isinstance(layer, tuple):
            out.append(layer)
            continue
        weight = params.get(layer[0])
        bias = None if layer[1] is None else params.get(layer[1])
        if detach:
            weight, bias = weight.detach(), None if bias is None else bias.detach()
        if stacked:
            weights = weight.unbind(0)
            out.append((weights, [None] * len(weights) if bias is None else bias.unbind(0)))
        else:
            out.append(((weight,), (bias,)))
    return out


def mlp(weights: list, x: torch.Tensor, index: int = 0) -> torch.Tensor:
    """Network ``index`` of ``weights`` (:func:`read_weights`) on ``x``: one plain call, each
    ``Linear`` an ``F.linear`` (the bias added in the matmul; a vmap adds it after, so values
    differ from TorchRL's in their last bits), ReLU in place on a layer's own output."""
    h = x
    for layer in weights:
        if isinstance(layer, tuple):
            h = nn.functional.linear(h, layer[0][index], layer[1][index])
        elif type(layer) is nn.ReLU and h is not x:
            h = torch.relu_(h)
        else:
            h = layer(h)
    return h


def ensemble(weights: list, x: torch.Tensor) -> torch.Tensor:
    """Every network of a stacked ``weights`` (an ensemble of critics) on the same ``x``,
    stacked on a first dim as TorchRL's vmap returns them: one plain call each. Faster on the
    CPU than one batched call over the stacked weights (SAC's update step on one thread: 8.00
    ms against 8.63, the batched tensors making every elementwise op slower, 2026-12-06)."""
    count = next(len(layer[0]) for layer in weights if isinstance(layer, tuple))
    return torch.stack([mlp(weights, x, i) for i in range(count)])


class Weights:
    """What :func:`network_outputs` runs a network with: a plain MLP's ``layers``
    (:func:`mlp_layers`) read from the given parameters (:func:`read_weights`), else the
    parameters themselves, to swap in. A step's several calls of the same network share them.

    The read is kept from step to step, per parameters' tensordict: reading each nested entry
    of a ``TensorDictParams`` anew cost DQN's step 48 µs for its online network and 26 for its
    target (2026-12-06, one CPU thread). A ``TensorDictParams`` keeps its tensors as objects
    when the loss is cast, moved or loaded (their data change in place, even with
    ``load_state_dict(assign=True)``, tensordict 0.14.3); a deep copy's is another tensordict,
    read anew."""

    def __init__(self, layers: list[Layer]) -> None:
        self.layers = layers
        self.kept: dict[int, tuple[TensorDictBase, list]] = {}  # id -> (parameters, read)

    def __call__(self, params: TensorDictBase) -> list | TensorDictBase:
        if not self.layers:
            return params
        kept = self.kept.get(id(params))  # (kept with the tensordict: its id is not reused)
        if kept is None:
            kept = self.kept[id(params)] = (params, read_weights(self.layers, params))
        return kept[1]


def network_outputs(
    module: TensorDictModule,
    weights: list | TensorDictBase,
    root: nn.Module,
    batch: TensorDictBase,
    prefix: tuple[str, ...] = (),
) -> tuple[torch.Tensor, ...]:
    """``module``'s network on its inputs read from ``batch`` (under ``prefix``) with the
    loss's ``weights`` (:class:`Weights`): a plain MLP's run as read, any other network's
    parameters swapped into ``root`` (the loss's module holding ``module``) as TorchRL does (a
    deep copy of a loss leaves its modules with copies of their own); its outputs as a tuple,
    one per ``module.out_keys``."""
    if isinstance(weights, list):
        outputs = mlp(weights, mlp_input(module, batch, prefix))
    else:
        with weights.to_module(root, preserve_module_state=False):
            outputs = call(module, batch, prefix)
    return outputs if isinstance(outputs, tuple) else (outputs,)


def mlp_input(
    module: TensorDictModule,
    batch: TensorDictBase,
    prefix: tuple[str, ...] = (),
    given: dict[NestedKey, torch.Tensor] | None = None,
) -> torch.Tensor:
    """The input of ``module``'s plain MLP: its ``in_keys`` read from ``batch`` (under
    ``prefix``) or from ``given`` (e.g. a freshly drawn action), concatenated on the last dim
    as TorchRL's ``MLP`` concatenates them."""
    given = given or {}
    inputs = [
        given[key] if key in given else batch.get(unravel_key((*prefix, key)))
        for key in module.in_keys
    ]
    return torch.cat(inputs, -1) if len(inputs) > 1 else inputs[0]
