"""Actor and critic from the ``policy`` config group: MLP, LSTM or GRU (CNN:
``rlrun/builders/cnn.py``).

``make_actor_critic`` is the default ``policy._target_``. A user's own factory receives the same
keyword arguments (``observation_spec``, ``action_spec``, ``device`` and every key of its YAML
file) and returns an :class:`ActorCritic`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import torch
from hydra.utils import get_method
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDictBase
from tensordict.nn import (
    AddStateIndependentNormalScale,
    NormalParamExtractor,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
    skip_existing,
)
from tensordict.utils import NestedKey
from torch import nn
from torch.distributions.utils import _sum_rightmost
from torchrl.data import Composite, OneHot, TensorSpec
from torchrl.envs import InitTracker, Transform
from torchrl.envs.utils import ExplorationType, exploration_type
from torchrl.modules import (
    MLP,
    BatchRenorm1d,
    GRUModule,
    LSTMModule,
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
    ProbabilisticActor,
    QValueActor,
    SafeSequential,
    TanhModule,
    TanhNormal,
    set_recurrent_mode,
)
from torchrl.modules.distributions.utils import safetanh_noeps, sample_and_log_prob
from torchrl.modules.utils import get_primers_from_module

import rlrun.compat.tensordict  # noqa: F401  (a speed fix, applied on import)
from rlrun.builders.action_masks import MASK_KEY, LegalActions, has_action_mask
from rlrun.config import PHASES
from rlrun.errors import ConfigError

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU}


class RecurrentScope(TensorDictModuleBase):
    """Run ``module`` under ``set_recurrent_mode(mode)``: how a phase's mode reaches a policy.

    Collectors and evaluators call their policy without a mode of their own; wrapping it here makes
    the mode a scope (restored on exit, exceptions included) that every RNN inside follows, a
    user's own ``_target_`` module too, without touching the module.
    """

    def __init__(self, module: TensorDictModuleBase, mode: bool) -> None:
        super().__init__()
        self.module = module
        self.mode = mode
        self.in_keys = module.in_keys
        self.out_keys = module.out_keys

    def forward(self, tensordict: TensorDictBase, *args, **kwargs) -> TensorDictBase:
        with set_recurrent_mode(self.mode):
            return self.module(tensordict, *args, **kwargs)


@dataclass
class ActorCritic:
    """What a policy factory returns.

    ``actor`` writes ``action`` (and its log-prob) from ``observation``; ``critic`` writes
    ``state_value``; ``primers`` are env transforms the policy needs (recurrent state primers),
    appended to every env it runs in; ``recurrent`` says whether sequence mode matters;
    ``action_mask``: the env's observations carry one (``build_policy`` sets it);
    ``action_key``: where the actor writes its action (a team's: ``("agents", "action")``);
    ``groups``: a team of several groups' networks, one ``ActorCritic`` per group (``actor``
    and ``critic`` run them all; ``action_key`` is the first group's).
    """

    actor: TensorDictModule
    critic: TensorDictModule | None = None
    qvalue: TensorDictModule | None = None
    primers: list[Transform] = field(default_factory=list)
    recurrent: bool = False
    recurrent_mode: dict[str, bool] = field(default_factory=lambda: dict(PHASES))
    action_mask: bool = False
    action_key: NestedKey = "action"
    groups: dict[str, ActorCritic] = field(default_factory=dict)

    def scope(self, phase: str) -> AbstractContextManager:
        """``set_recurrent_mode`` for ``phase`` (collect | loss | eval) as a context manager."""
        return set_recurrent_mode(self.recurrent_mode[phase])

    def rollout_policy(self, phase: str = "collect") -> TensorDictModuleBase:
        """The module a collector (or evaluator) steps, in ``phase``'s recurrent mode.

        While collecting, a recurrent critic runs after the actor so its hidden state is stored
        in the batch too (sequence-mode advantages start from it).
        """
        if not self.recurrent:
            return self.actor
        module = self.actor
        if phase == "collect" and self.critic is not None:
            module = TensorDictSequential(self.actor, self.critic)
        return RecurrentScope(module, self.recurrent_mode[phase])

    def env_transforms(self) -> list[Transform]:
        """Transforms an env needs to run this policy: ``LegalActions`` (the action mask as
        booleans, checked, and random actions kept legal), ``InitTracker`` (episode starts reset
        the hidden state) and the recurrent-state primers of actor and critic. Fresh on every
        call, so each env (training, evaluation) gets its own."""
        masks = [LegalActions()] if self.action_mask else []
        primers = [p.clone() for p in self.primers]
        if not self.recurrent:
            return [*masks, *primers]
        if not primers:  # a user's factory that left them out: ask its modules
            found = get_primers_from_module(self.rollout_policy().module, warn=False)
            primers = [found] if found is not None else []
        return [*masks, InitTracker(), *primers]


def mlp(in_features: int | None, out: int, sizes: Sequence[int], act: str) -> MLP:
    return MLP(
        in_features=in_features,
        out_features=out,
        num_cells=list(sizes),
        activation_class=ACTIVATIONS[act],
    )


class BoundedActor(ProbabilisticActor):
    """TorchRL's ``ProbabilisticActor`` whose distribution bounds (TanhNormal's ``low`` and
    ``high``) move with it, and whose exploring calls skip tensordict's module plumbing.

    Bounds: TorchRL keeps them in a plain dict that ``.to(device)`` leaves where they were
    built: on a GPU, TanhNormal then copied them from the CPU at every call, and a CUDA graph
    cannot capture that copy ("Cannot copy between CPU and CUDA tensors during CUDA graph
    capture"). TorchRL's own SAC recipe builds them on the device instead.

    Exploring calls (a collector's, under ``ExplorationType.RANDOM``): the network on the
    input's tensors, then TorchRL's distribution, draw (and log-probability) as its
    ``SafeProbabilisticModule`` makes them (``sample_and_log_prob``), written to the same keys:
    the same values, draw for draw (tests/test_policies.py). Unmasked discrete actions skip the
    distribution object too: ``categorical_draw`` runs its operations on the logits. The
    wrappers around them (key dispatch, skip-existing scopes, output selection) cost a small
    network's actor more than its network on the CPU (docs/benchmarks.md, PPO). Any other
    call, or an actor built with options beyond rlrun's (a spec-projecting ``safe``, a
    ``generator``, several samples), is TorchRL's.
    """

    def __init__(self, module: TensorDictModule, *args, **kwargs) -> None:
        super().__init__(module, *args, **kwargs)
        head, draw = self.module[0], self.module[-1]
        self.direct = (
            len(self.module) == 2
            and type(head) is TensorDictModule
            and not self.return_composite
            and self.inplace is None
            and len(draw.dist_sample_keys) == 1
            and draw.dist_sample_keys[0] not in head.out_keys
            and not any(kwargs.get(key) for key in ("safe", "generator", "num_samples"))
        )
        # one-hot (True) or index (False) actions drawn by ``categorical_draw``; None: others
        self.categorical = (
            CATEGORICAL.get(draw.distribution_class)
            if self.direct and list(draw.dist_keys) == ["logits"] and not draw.distribution_kwargs
            else None
        )

    def forward(self, *args, **kwargs) -> TensorDictBase:
        tensordict = args[0] if len(args) == 1 and not kwargs else None
        draw = self.module[-1]
        exploring = (exploration_type() or draw.default_interaction_type) is ExplorationType.RANDOM
        if not (self.direct and isinstance(tensordict, TensorDictBase) and exploring):
            return super().forward(*args, **kwargs)
        if skip_existing():  # TorchRL's skips a call whose outputs are there
            return super().forward(*args, **kwargs)
        head = self.module[0]
        outputs = head.module(*(tensordict.get(key) for key in head.in_keys))
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for key, value in zip(head.out_keys, outputs, strict=True):
            tensordict.set(key, value)
        logits = tensordict.get(draw.in_keys[0]) if self.categorical is not None else None
        if logits is not None and logits.shape[-1] > 1:  # TorchRL's draw, without the object
            sample, log_prob = categorical_draw(logits, one_hot=self.categorical)
            tensordict.set(draw.dist_sample_keys[0], sample)
            if draw.return_log_prob:
                tensordict.set(draw.log_prob_key, log_prob)
            return tensordict
        dist = draw.get_dist(tensordict)
        if not draw.return_log_prob:  # tensordict's random draw
            tensordict.set(
                draw.dist_sample_keys[0], dist.rsample() if dist.has_rsample else dist.sample()
            )
            return tensordict
        sample, log_prob = sample_and_log_prob(dist, reparameterize=dist.has_rsample)
        tensordict.set(draw.dist_sample_keys[0], sample)
        tensordict.set(draw.log_prob_key, log_prob)
        return tensordict

    def _apply(self, fn, recurse: bool = True):
        super()._apply(fn, recurse)
        for module in self.modules():
            kwargs = getattr(module, "distribution_kwargs", None) or {}
            for key in ("low", "high"):
                if isinstance(kwargs.get(key), torch.Tensor):
                    kwargs[key] = fn(kwargs[key])
        return self


# The discrete distributions ``categorical_draw`` replays: one-hot actions or indices
CATEGORICAL = {OneHotCategorical: True, torch.distributions.Categorical: False}


def categorical_draw(logits: torch.Tensor, one_hot: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``sample_and_log_prob`` of TorchRL's ``OneHotCategorical(logits=logits)`` (``one_hot``)
    or torch's ``Categorical``, on the tensors: torch's normalisation, ``multinomial`` draw and
    log-probability gather in their order, so the same action and log-probability bit for bit
    (tests/test_policies.py). Building the distribution (argument checks, its one-hot wrapper,
    the action's argmax back to an index for ``log_prob``) cost a small actor more than its
    network at every collected step (a draw for 8 CartPoles: 93-109 µs against 50-55, one
    CPU thread, 2026-12-07)."""
    events = logits.shape[-1]
    normalized = logits - logits.logsumexp(dim=-1, keepdim=True)
    probs = torch.softmax(normalized, dim=-1)
    index = torch.multinomial(probs.reshape(-1, events), 1, True).reshape(logits.shape[:-1])
    log_prob = normalized.gather(-1, index.unsqueeze(-1)).squeeze(-1)
    sample = nn.functional.one_hot(index, events) if one_hot else index
    return sample, log_prob


def categorical_scores(
    logits: torch.Tensor, action: torch.Tensor, one_hot: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """The log-probability of ``action`` and the entropy of TorchRL's
    ``OneHotCategorical(logits=logits)`` (``one_hot``) or torch's ``Categorical``, on the
    tensors: the same values and gradients bit for bit (tests/test_tensor_ppo.py), without
    building the distribution at every minibatch."""
    normalized = logits - logits.logsumexp(dim=-1, keepdim=True)
    index = (action.argmax(dim=-1) if one_hot else action).long().unsqueeze(-1)
    log_prob = normalized.gather(-1, index).squeeze(-1)
    probs = torch.softmax(normalized, dim=-1)
    entropy = -(normalized.clamp(min=torch.finfo(normalized.dtype).min) * probs).sum(-1)
    return log_prob, entropy


class CapturableTanhNormal(TanhNormal):
    """TorchRL's ``TanhNormal`` whose non-reparameterised samples a CUDA graph can capture.

    ``sample()`` draws through ``torch.normal(loc, scale)``, which checks ``scale >= 0`` with a
    host sync; capture refuses it ("operation not permitted when stream is capturing"; seen on an
    H200, 2026-11-26, in CrossQ's target actions and PPO's sampled entropy). Drawn as
    ``loc + eps * scale`` without gradients instead: the same distribution, no sync.
    """

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(torch.Size(sample_shape))

    def sample_and_log_prob(
        self, sample_shape: torch.Size | tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # TanhNormal's own, with ``rsample`` for its ``sample``: the action carries no
        # pathwise gradient, its log-prob keeps the score-function one
        with torch.no_grad():
            preimage = self.base_dist.rsample(torch.Size(sample_shape))
            sample = self.transforms[0](preimage)
        jacobian = self.transforms[0].log_abs_det_jacobian(preimage, sample)
        log_prob = self.base_dist.log_prob(preimage) - _sum_rightmost(
            jacobian, len(self.event_shape)
        )
        return sample, log_prob


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))  # as torch's Normal.log_prob computes it


def tanh_normal_draw(
    loc: torch.Tensor, scale: torch.Tensor, low: torch.Tensor, high: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``TanhNormal(loc, scale, low=low, high=high).rsample_and_log_prob()`` with TorchRL's
    other defaults (no ``tanh_loc``, its safe tanh, the last dim the event), on the tensors:
    its operations in its order without building the distribution, so the same draw,
    log-probability and gradients bit for bit (tests/test_policies.py). Building it (torch's
    transforms, their shape checks, a host read of the bounds) and walking its transforms
    cost more than the arithmetic on a small batch (a draw of 256: 377-401 µs against 155-162,
    one CPU thread, 2026-12-06). The bounds' affine map is applied even
    where they are -1 and 1 (TorchRL skips it there): ``0 + 1 * y`` and ``+ log(1)`` change
    no bit, and nothing reads the bounds on the host."""
    preimage = loc + torch.empty(loc.shape, dtype=loc.dtype, device=loc.device).normal_() * scale
    stretch = (high - low) / 2
    sample = (high + low) / 2 + stretch * safetanh_noeps(preimage)
    normal = -((preimage - loc) ** 2) / (2 * scale**2) - scale.log() - LOG_SQRT_2PI
    tanh = 2.0 * (math.log(2.0) - preimage - nn.functional.softplus(-2.0 * preimage))
    jacobian = tanh + stretch.abs().log().expand(preimage.shape)
    return sample, normal.sum(-1) - jacobian.sum(-1)


class CapturableMaskedCategorical(MaskedCategorical):
    """TorchRL's ``MaskedCategorical`` whose most likely action ``torch.export`` can capture
    (``rlrun export``): TorchRL's reads ``super().mode`` inside a property, which Dynamo
    cannot trace ("Encountered unrecognized type GetAttrVariable(SuperVariable(), mode)",
    torch 2.13). The same action: the argmax of the masked logits (rlrun's masks are dense)."""

    @property
    def mode(self) -> torch.Tensor:
        return self.logits.argmax(-1)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.mode


def action_distribution(action_spec: TensorSpec, masked: bool = False) -> tuple[type, dict, int]:
    """Distribution class, its kwargs and the number of network outputs for an action spec;
    ``masked``: discrete actions drawn among the legal ones only (the env's action mask)."""
    if isinstance(action_spec, OneHot):
        cls = MaskedOneHotCategorical if masked else OneHotCategorical
        return cls, {}, action_spec.shape[-1]
    if action_spec.domain == "discrete":
        cls = CapturableMaskedCategorical if masked else torch.distributions.Categorical
        return cls, {}, int(action_spec.space.n)
    low, high = action_spec.space.low, action_spec.space.high
    kwargs = {"low": low.reshape(-1, low.shape[-1])[0], "high": high.reshape(-1, high.shape[-1])[0]}
    return CapturableTanhNormal, kwargs, 2 * action_spec.shape[-1]


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
    state_dependent_std: bool = True,
    with_critic: bool = True,
    **_: object,
) -> ActorCritic:
    """Build a stochastic actor and a state-value critic for the env's specs. Continuous
    actions: a TanhNormal whose std the network outputs per state, or (``state_dependent_std``
    false, as CleanRL's and TorchRL's PPO MuJoCo recipes) one learned log-std per action dim."""
    if kind == "cnn":
        raise ConfigError(
            "policy.kind=cnn is built by rlrun.builders.cnn.make_cnn_actor_critic: use policy=cnn."
        )
    obs_dim = observation_spec["observation"].shape[-1]
    masked = has_action_mask(observation_spec)
    dist_cls, dist_kwargs, n_out = action_distribution(action_spec, masked)
    primers: list[Transform] = []

    def trunk(prefix: str, net_out: nn.Module | None, out: int, out_keys: list[str]):
        """Observation -> ``out_keys``: one module (MLP) or a recurrent cell and an MLP head.
        ``net_out`` is appended to the head (NormalParamExtractor for continuous actions)."""
        in_features, in_key, mods = obs_dim, "observation", []
        if kind != "mlp":
            core = _recurrent_core(kind, obs_dim, hidden_size, num_layers, prefix)
            primers.append(core.make_tensordict_primer())
            in_features, in_key, mods = hidden_size, f"{prefix}_embed", [core]
        net = mlp(in_features, out, hidden_sizes, activation)
        if net_out is not None:
            net = nn.Sequential(net, net_out)
        head = TensorDictModule(net, [in_key], out_keys)
        return TensorDictSequential(*mods, head) if mods else head

    continuous = issubclass(dist_cls, TanhNormal)
    dist_keys = ["loc", "scale"] if continuous else ["logits"]
    extractor = None
    if continuous:
        n_out, extractor = normal_head(n_out, state_dependent_std)
    actor = BoundedActor(
        trunk("actor", extractor, n_out, dist_keys),
        # a masked categorical reads the env's mask beside the logits
        in_keys={"logits": "logits", "mask": MASK_KEY} if masked else dist_keys,
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=True,
    ).to(device)
    critic = None
    if with_critic:
        if kind != "mlp" and not recurrent_critic:  # feed-forward critic beside an RNN actor
            net = mlp(obs_dim, 1, [64, 64], activation)
            critic = TensorDictModule(net, ["observation"], ["state_value"])
        else:
            critic = trunk("critic", None, 1, ["state_value"])
        critic = critic.to(device)
    return ActorCritic(actor=actor, critic=critic, primers=primers, recurrent=kind != "mlp")


def build_policy(
    cfg: DictConfig, observation_spec: Composite, action_spec: TensorSpec, device: torch.device
) -> ActorCritic:
    """Call ``policy._target_`` with the env's specs, the device and the YAML keys.

    ``recurrent_mode`` is rlrun's, not the factory's: it is checked and applied as scopes around
    collection, advantage/loss computation and evaluation, whatever module the factory returns.
    So is the env's action mask: a policy that ignores it is refused.
    """
    kwargs = OmegaConf.to_container(cfg, resolve=True)
    factory = get_method(kwargs.pop("_target_"))
    modes = recurrent_modes(kwargs.pop("recurrent_mode", None) or {})
    ac = factory(
        observation_spec=observation_spec, action_spec=action_spec, device=device, **kwargs
    )
    if not isinstance(ac, ActorCritic):
        raise ConfigError(
            f"policy._target_={cfg._target_} returned {type(ac).__name__}; a policy factory must "
            f"return {__name__}.ActorCritic (see docs/guides/collectors.md, 'Your own policy')."
        )
    ac.recurrent_mode = modes
    ac.action_mask = has_action_mask(observation_spec)
    if ac.action_mask and MASK_KEY not in ac.actor.in_keys:
        raise ConfigError(
            f"the env's observations carry an {MASK_KEY}, which policy._target_={cfg._target_} "
            "does not read: its actions would ignore the mask. Use an algorithm whose own "
            "networks read it, with policy._target_=null (docs/guides/action-masks.md)."
        )
    return ac


def recurrent_modes(flags: dict[str, bool]) -> dict[str, bool]:
    """``policy.recurrent_mode`` (checked by ``rlrun/validation.py``) with the defaults of the
    phases it leaves out."""
    return {**PHASES, **flags}


def make_qvalue_actor(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (128, 128),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """An MLP of action values behind TorchRL's greedy ``QValueActor``.

    Returned as ``ActorCritic(actor=q_actor, qvalue=q_actor)``: the actor acts greedily, the
    loss trains the same module's values. Exploration is the algorithm's.
    """
    n_actions = discrete_actions(action_spec, f"{__name__}.make_qvalue_actor")
    net = mlp(observation_spec["observation"].shape[-1], int(n_actions), hidden_sizes, activation)
    # with the env's action mask: the greedy action, and the loss's max over the next state's
    # actions, among the legal ones only
    mask_key = MASK_KEY if has_action_mask(observation_spec) else None
    actor = QValueActor(
        net, in_keys=["observation"], spec=action_spec, action_mask_key=mask_key
    ).to(device)
    return ActorCritic(actor=actor, qvalue=actor)


def make_stochastic_actor_q(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    state_dependent_std: bool = True,
    **_: object,
) -> ActorCritic:
    """A TanhNormal actor scaled to the action bounds and one Q(s, a) network (the losses of the
    soft actor-critic family make the copies they need)."""
    actor = tanh_normal_actor(
        observation_spec, action_spec, hidden_sizes, activation, state_dependent_std
    )
    qvalue = qvalue_network(observation_spec, action_spec, hidden_sizes, activation)
    return ActorCritic(actor=actor.to(device), qvalue=qvalue.to(device))


def normal_head(n_out: int, state_dependent_std: bool) -> tuple[int, nn.Module]:
    """The network's output width and the module that splits it into ``loc`` and ``scale``:
    both from the network, or (``state_dependent_std`` false) one learned log-std per action
    dim, as CleanRL's and TorchRL's PPO MuJoCo recipes and the IQL paper's actor."""
    if state_dependent_std:
        return n_out, NormalParamExtractor()
    n_out //= 2  # the locs; the scales are parameters
    return n_out, AddStateIndependentNormalScale(n_out, scale_mapping="exp", init_value=0.0)


def tanh_normal_actor(
    observation_spec: Composite,
    action_spec: TensorSpec,
    sizes: Sequence[int],
    act: str,
    state_dependent_std: bool,
) -> BoundedActor:
    """A TanhNormal actor (stochastic, continuous actions), scaled to the action bounds."""
    dist_cls, dist_kwargs, n_out = action_distribution(action_spec)
    if not issubclass(dist_cls, TanhNormal):
        raise ConfigError(
            "a TanhNormal actor needs a continuous action space; this env's actions are "
            "discrete: choose an algorithm for discrete actions (rlrun --help lists them)."
        )
    obs_dim = observation_spec["observation"].shape[-1]
    n_out, head = normal_head(n_out, state_dependent_std)
    body = nn.Sequential(mlp(obs_dim, n_out, sizes, act), head)
    return BoundedActor(
        TensorDictModule(body, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=False,
    )


def qvalue_network(
    observation_spec: Composite,
    action_spec: TensorSpec,
    sizes: Sequence[int],
    act: str,
    out: int = 1,
    norm_kwargs: list[dict] | None = None,
) -> TensorDictModule:
    """Q(s, a) (the losses make the copies they need): ``out`` values (e.g. quantiles), batch
    renormalisation after each hidden layer given ``norm_kwargs``."""
    obs_dim, act_dim = observation_spec["observation"].shape[-1], action_spec.shape[-1]
    net = MLP(  # torchrl's MLP concatenates its inputs
        in_features=obs_dim + act_dim,
        out_features=out,
        num_cells=list(sizes),
        activation_class=ACTIVATIONS[act],
        norm_class=BatchRenorm1d if norm_kwargs else None,
        norm_kwargs=norm_kwargs,
    )
    return TensorDictModule(net, ["observation", "action"], ["state_action_value"])


def discrete_actions(action_spec: TensorSpec, factory: str) -> int:
    """The number of actions of a discrete action spec; a continuous one is a user's mistake."""
    if action_spec.domain != "discrete":
        raise ConfigError(
            f"policy._target_={factory} needs a discrete action space; this env's actions are "
            "continuous: choose an algorithm for continuous actions (rlrun --help lists them)."
        )
    n = action_spec.shape[-1] if isinstance(action_spec, OneHot) else action_spec.space.n
    return int(n)


def make_categorical_actor_q(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """A categorical actor (:func:`make_actor_critic`'s) and one network of action values
    Q(s, .) (the loss makes the copies it needs). No action masks: TorchRL 0.14.1's
    ``DiscreteSACLoss`` weighs every action's log-probability by its probability, and a
    masked action's is -inf (0 * -inf: NaN, seen at the first update)."""
    if has_action_mask(observation_spec):
        raise ConfigError(
            f"policy._target_={__name__}.make_categorical_actor_q (discrete SAC's and IQL's "
            f"networks) cannot honour the env's {MASK_KEY}: TorchRL's discrete SAC loss turns "
            "masked actions into NaN. docs/guides/action-masks.md lists the algorithms that "
            "honour a mask."
        )
    n_actions = discrete_actions(action_spec, f"{__name__}.make_categorical_actor_q")
    actor = make_actor_critic(
        observation_spec=observation_spec,
        action_spec=action_spec,
        device=device,
        hidden_sizes=hidden_sizes,
        activation=activation,
        with_critic=False,
    ).actor
    obs_dim = observation_spec["observation"].shape[-1]
    qvalue = TensorDictModule(
        mlp(obs_dim, n_actions, hidden_sizes, activation), ["observation"], ["action_value"]
    )
    return ActorCritic(actor=actor, qvalue=qvalue.to(device))


def make_deterministic_actor_q(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    **_: object,
) -> ActorCritic:
    """A deterministic actor, tanh-scaled to the action bounds, and one Q(s, a) network (the
    losses make the copies they need; exploration noise is the algorithm's)."""
    if action_spec.domain != "continuous":
        raise ConfigError(
            f"policy._target_={__name__}.make_deterministic_actor_q needs a continuous action "
            "space; this env's actions are discrete: choose an algorithm for discrete actions."
        )
    obs_dim, act_dim = observation_spec["observation"].shape[-1], action_spec.shape[-1]
    one = action_spec[(0,) * (action_spec.ndim - 1)]  # the env's batch dims dropped
    net = mlp(obs_dim, act_dim, hidden_sizes, activation)
    actor = SafeSequential(  # its ``spec["action"]`` is the bounded action spec
        TensorDictModule(net, ["observation"], ["param"]),
        TanhModule(["param"], ["action"], spec=one),
    ).to(device)
    qvalue = qvalue_network(observation_spec, action_spec, hidden_sizes, activation).to(device)
    return ActorCritic(actor=actor, qvalue=qvalue)
