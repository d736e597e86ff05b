"""Actor and critic from the ``policy`` config group: MLP, LSTM or GRU.

``make_actor_critic`` is the default ``policy._target_``. A user's own factory receives the same
keyword arguments (``observation_spec``, ``action_spec``, ``device`` and every key of its YAML
file) and returns an :class:`ActorCritic`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.envs import Transform
from torchrl.modules import (
    MLP,
    GRUModule,
    LSTMModule,
    OneHotCategorical,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
)

from rlrun.errors import ConfigError, choose

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU}
KINDS = ("mlp", "lstm", "gru")


@dataclass
class ActorCritic:
    """What a policy factory returns.

    ``actor`` writes ``action`` (and its log-prob) from ``observation``; ``critic`` writes
    ``state_value``; ``primers`` are env transforms the policy needs (recurrent state primers),
    appended to every env it runs in; ``recurrent`` says whether sequence mode matters.
    """

    actor: TensorDictModule
    critic: TensorDictModule | None = None
    qvalue: TensorDictModule | None = None
    primers: list[Transform] = field(default_factory=list)
    recurrent: bool = False


def _mlp(in_features: int | None, out: int, sizes: Sequence[int], act: str) -> MLP:
    return MLP(
        in_features=in_features,
        out_features=out,
        num_cells=list(sizes),
        activation_class=ACTIVATIONS[act],
    )


def _distribution(action_spec: TensorSpec) -> tuple[type, dict, int]:
    """Distribution class, its kwargs and the number of network outputs for an action spec."""
    if isinstance(action_spec, OneHot):
        return OneHotCategorical, {}, action_spec.shape[-1]
    if action_spec.domain == "discrete":
        return torch.distributions.Categorical, {}, int(action_spec.space.n)
    low, high = action_spec.space.low, action_spec.space.high
    kwargs = {"low": low.reshape(-1, low.shape[-1])[0], "high": high.reshape(-1, high.shape[-1])[0]}
    return TanhNormal, kwargs, 2 * action_spec.shape[-1]


def _recurrent_core(
    kind: str, in_features: int, hidden_size: int, num_layers: int, prefix: str
) -> LSTMModule | GRUModule:
    cls = LSTMModule if kind == "lstm" else GRUModule
    names = ("h", "c") if kind == "lstm" else ("h",)
    return cls(
        input_size=in_features,
        hidden_size=hidden_size,
        num_layers=num_layers,
        in_keys=["observation", *(f"{prefix}_{n}" for n in names)],
        out_keys=[f"{prefix}_embed", *(("next", f"{prefix}_{n}") for n in names)],
    )


def make_actor_critic(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    kind: str = "mlp",
    hidden_sizes: Sequence[int] = (64, 64),
    activation: str = "tanh",
    hidden_size: int = 64,
    num_layers: int = 1,
    recurrent_critic: bool = True,
    with_critic: bool = True,
    **_: object,
) -> ActorCritic:
    """Build a stochastic actor and a state-value critic for the env's specs."""
    choose("policy.kind", kind, KINDS)
    choose("policy.activation", activation, ACTIVATIONS)
    obs_dim = observation_spec["observation"].shape[-1]
    dist_cls, dist_kwargs, n_out = _distribution(action_spec)
    primers: list[Transform] = []

    def trunk(prefix: str, out: int) -> list[TensorDictModule]:
        if kind == "mlp":
            net = _mlp(obs_dim, out, hidden_sizes, activation)
            return [TensorDictModule(net, ["observation"], [f"{prefix}_out"])]
        core = _recurrent_core(kind, obs_dim, hidden_size, num_layers, prefix)
        primers.append(core.make_tensordict_primer())
        head = _mlp(hidden_size, out, hidden_sizes, activation)
        return [core, TensorDictModule(head, [f"{prefix}_embed"], [f"{prefix}_out"])]

    actor_mods = trunk("actor", n_out)
    if dist_cls is TanhNormal:
        actor_mods.append(TensorDictModule(NormalParamExtractor(), ["actor_out"], ["loc", "scale"]))
        in_keys = ["loc", "scale"]
    else:
        actor_mods.append(TensorDictModule(nn.Identity(), ["actor_out"], ["logits"]))
        in_keys = ["logits"]
    actor = ProbabilisticActor(
        TensorDictSequential(*actor_mods),
        in_keys=in_keys,
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=True,
    ).to(device)
    critic = None
    if with_critic:
        critic_kind_is_rnn = kind != "mlp" and recurrent_critic
        if critic_kind_is_rnn:
            critic_mods = trunk("critic", 1)
        else:
            net = _mlp(obs_dim, 1, hidden_sizes if kind == "mlp" else [64, 64], activation)
            critic_mods = [TensorDictModule(net, ["observation"], ["critic_out"])]
        critic_mods.append(TensorDictModule(nn.Identity(), ["critic_out"], ["state_value"]))
        critic = TensorDictSequential(*critic_mods).to(device)
    return ActorCritic(actor=actor, critic=critic, primers=primers, recurrent=kind != "mlp")


def build_policy(
    cfg: DictConfig, observation_spec: Composite, action_spec: TensorSpec, device: torch.device
) -> ActorCritic:
    """Call ``policy._target_`` with the env's specs, the device and the YAML keys."""
    kwargs = OmegaConf.to_container(cfg, resolve=True)
    factory = get_method(kwargs.pop("_target_"))
    ac = factory(
        observation_spec=observation_spec, action_spec=action_spec, device=device, **kwargs
    )
    if not isinstance(ac, ActorCritic):
        raise ConfigError(
            f"policy._target_={cfg._target_} returned {type(ac).__name__}; a policy factory must "
            "return rlrun.policies.ActorCritic (see README, 'Your own policy')."
        )
    return ac


def make_qvalue_actor(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (128, 128),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """DQN's network: an MLP of action values behind TorchRL's greedy ``QValueActor``.

    Returned as ``ActorCritic(actor=q_actor, qvalue=q_actor)``: the actor acts greedily, the
    loss trains the same module's values. Exploration is added by ``algo=dqn``.
    """
    choose("policy.activation", activation, ACTIVATIONS)
    if action_spec.domain != "discrete":
        raise ConfigError(
            "policy._target_=rlrun.policies.make_qvalue_actor needs a discrete action space; "
            "for continuous actions use +experiment=sac."
        )
    n_actions = action_spec.shape[-1] if isinstance(action_spec, OneHot) else action_spec.space.n
    net = _mlp(observation_spec["observation"].shape[-1], int(n_actions), hidden_sizes, activation)
    actor = QValueActor(net, in_keys=["observation"], spec=action_spec).to(device)
    return ActorCritic(actor=actor, qvalue=actor)


def make_sac_networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """SAC's networks: a TanhNormal actor scaled to the action bounds and one Q(s, a) network
    (``algo=sac`` makes the twin copies)."""
    choose("policy.activation", activation, ACTIVATIONS)
    dist_cls, dist_kwargs, n_out = _distribution(action_spec)
    if dist_cls is not TanhNormal:
        raise ConfigError(
            "policy._target_=rlrun.policies.make_sac_networks needs a continuous action space; "
            "for discrete actions use +experiment=dqn."
        )
    obs_dim = observation_spec["observation"].shape[-1]
    act_dim = action_spec.shape[-1]
    body = nn.Sequential(_mlp(obs_dim, n_out, hidden_sizes, activation), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=False,
    ).to(device)
    qvalue = TensorDictModule(  # torchrl's MLP concatenates its inputs
        _mlp(obs_dim + act_dim, 1, hidden_sizes, activation),
        ["observation", "action"],
        ["state_action_value"],
    ).to(device)
    return ActorCritic(actor=actor, qvalue=qvalue)
