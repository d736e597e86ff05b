"""Convolutional policies for stacked frames (``policy=cnn``): the Nature-DQN torso.

Observations arrive as ``uint8`` frames ``[*batch, C, H, W]`` (``rlrun/builders/atari.py``) and stay
so through the collector and the buffers; the torso scales them to floats in [0, 1] as its first
step, on whatever device it lives on: the learner's, 4x less memory and host-to-device traffic than
float frames.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import ActorValueOperator, QValueActor, TanhNormal

from rlrun.builders.policies import ACTIVATIONS, ActorCritic, BoundedActor, action_distribution
from rlrun.errors import ConfigError


def _init(layer: nn.Module, gain: float) -> nn.Module:
    """Orthogonal weights, zero biases: the initialisation of CleanRL's and SB3's Atari nets."""
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class NatureCNN(nn.Module):
    """Mnih et al. (2015): conv 32x8x8/4, 64x4x4/2, 64x3x3/1, then ``hidden_sizes`` dense
    layers. Any leading batch dims (envs, time) are folded for the convolutions."""

    def __init__(self, frames_shape: Sequence[int], hidden_sizes: Sequence[int], act: str) -> None:
        super().__init__()
        channels, height, width = frames_shape
        act_cls, gain = ACTIVATIONS[act], math.sqrt(2)
        self.convs = nn.Sequential(
            _init(nn.Conv2d(channels, 32, 8, stride=4), gain),
            act_cls(),
            _init(nn.Conv2d(32, 64, 4, stride=2), gain),
            act_cls(),
            _init(nn.Conv2d(64, 64, 3, stride=1), gain),
            act_cls(),
            nn.Flatten(),
        )
        with torch.no_grad():
            width_in = self.convs(torch.zeros(1, channels, height, width)).shape[-1]
        dense: list[nn.Module] = []
        for size in hidden_sizes:
            dense += [_init(nn.Linear(width_in, size), gain), act_cls()]
            width_in = size
        self.dense = nn.Sequential(*dense)
        self.out_features = width_in

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        x = frames.float().div(255.0)  # uint8 -> [0, 1], here, on this module's device
        # [batch, C, H, W] needs no reshape, so a traced (exported) copy takes any batch size
        if x.dim() == 4:
            return self.dense(self.convs(x))
        batch = x.shape[:-3]
        return self.dense(self.convs(x.reshape(-1, *x.shape[-3:]))).reshape(*batch, -1)


def _frames_shape(observation_spec: Composite) -> tuple[int, int, int]:
    shape = tuple(observation_spec["observation"].shape[observation_spec.ndim :])
    if len(shape) != 3:
        raise ConfigError(
            "policy=cnn needs image observations [frames, height, width] (an Atari env: "
            "env=pong, env=breakout or env=atari); use policy=mlp for vector observations."
        )
    return shape  # type: ignore[return-value]


def make_cnn_actor_critic(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (512,),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """PPO's network: one CNN torso shared by a policy head and a value head (TorchRL's
    ``ActorValueOperator``), as CleanRL's and TorchRL's PPO Atari recipes build it."""
    dist_cls, dist_kwargs, n_out = action_distribution(action_spec)
    torso = NatureCNN(_frames_shape(observation_spec), hidden_sizes, activation)
    common = TensorDictModule(torso, ["observation"], ["hidden"])
    body: nn.Module = _init(nn.Linear(torso.out_features, n_out), 0.01)
    dist_keys = ["logits"]
    if issubclass(dist_cls, TanhNormal):
        body, dist_keys = nn.Sequential(body, NormalParamExtractor()), ["loc", "scale"]
    policy_head = BoundedActor(
        TensorDictModule(body, ["hidden"], dist_keys),
        in_keys=dist_keys,
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=True,
    )
    value_head = TensorDictModule(
        _init(nn.Linear(torso.out_features, 1), 1.0), ["hidden"], ["state_value"]
    )
    shared = ActorValueOperator(common, policy_head, value_head).to(device)
    return ActorCritic(actor=shared.get_policy_operator(), critic=shared.get_value_operator())


def make_cnn_qvalue_actor(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (512,),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """DQN's network: the CNN torso and one action value per action, behind TorchRL's greedy
    ``QValueActor`` (``algo=dqn`` adds the exploration)."""
    if action_spec.domain != "discrete":
        raise ConfigError(
            f"policy._target_={__name__}.make_cnn_qvalue_actor needs a discrete action space."
        )
    n_actions = int(action_spec.space.n)
    torso = NatureCNN(_frames_shape(observation_spec), hidden_sizes, activation)
    net = nn.Sequential(torso, _init(nn.Linear(torso.out_features, n_actions), 1.0))
    one = action_spec[(0,) * observation_spec.ndim]  # one env's: index (envpool) or one-hot
    actor = QValueActor(net, in_keys=["observation"], spec=one).to(device)
    return ActorCritic(actor=actor, qvalue=actor)
