"""TorchRL's off-policy losses computed straight on the batch's tensors, where nothing in the
batch or the loss asks for more than the plain math.

TorchRL's losses route every network call through tensordicts, key lookups and functional
parameter swaps; on the CPU that bookkeeping outweighed the small networks' arithmetic (DQN's
update step on CartPole, one thread: 1.55 ms with ``DQNLoss.forward``, 0.87 ms computing the same
terms on tensors, 2026-12-06). An algorithm's loss may take a direct path where
:func:`plain_td0` holds, and TorchRL's own ``forward`` everywhere else (priority weights, loss
masks, n-step returns, another reduction or value estimator); the algorithm's test checks the
two give the same terms and gradients on the same batch. TorchRL's loss stays the source of
truth for the math.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.objectives import LossModule
from torchrl.objectives.value import TD0Estimator

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
    keys = [estimator.tensor_keys.steps_to_next_obs, *loss_mask_keys(loss)]
    if loss.use_prioritized_weights in (True, "auto"):
        keys.append(loss.tensor_keys.priority_weight)
    return all(batch.get(key, None) is None for key in keys)


def td0_target(loss: LossModule, batch: TensorDictBase, next_value: torch.Tensor) -> torch.Tensor:
    """``reward + gamma * (not terminated) * next_value``, as TorchRL's TD(0) estimator computes
    it (same operations, same order: the same floats)."""
    keys = loss.value_estimator.tensor_keys
    reward = batch.get(("next", keys.reward))
    done = batch.get(("next", keys.done))
    terminated = batch.get(("next", keys.terminated), done)
    return reward + loss.value_estimator.gamma * (~terminated).int() * next_value


def call(
    module: TensorDictModule, batch: TensorDictBase, prefix: tuple[str, ...] = ()
) -> torch.Tensor:
    """``module``'s network on its ``in_keys`` read from ``batch`` (under ``prefix``, e.g.
    ``("next",)``): the call a ``TensorDictModule`` makes, without writing a tensordict."""
    return module.module(*(batch.get(unravel_key((*prefix, key))) for key in module.in_keys))


def shares_parameters(params: TensorDictBase, module: nn.Module) -> bool:
    """Whether the loss's functional ``params`` are ``module``'s own parameters (TorchRL swaps
    them in before each call; the direct path calls ``module`` as it is)."""
    own = {id(p) for p in module.parameters()}
    values = list(params.values(True, True))
    return bool(values) and all(id(v) in own for v in values if isinstance(v, nn.Parameter))
