"""A team of agents' networks (the multi-agent algorithms' default ``policy._target_``s):
TorchRL's ``MultiAgentMLP`` over the agent dimension of a multi-agent env's ``("agents", ...)``
keys (``rlrun/builders/teams.py``). Their losses: ``rlrun/builders/team_training.py``.

Each agent acts on its own observation (decentralised actors); a critic values each agent's
state (or state and action) from its own observation (IPPO, IDDPG, ISAC) or from the whole
team's (MAPPO's, MADDPG's and MASAC's centralised critics). ``policy.share_params``: one set of
weights for every agent of the team, or one each. A user's own factory takes the same keyword
arguments as :func:`make_team_actor_critic` and :func:`make_team_actor_q`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import MultiAgentMLP, QValueModule, SafeSequential, TanhModule, TanhNormal

from rlrun.builders.action_masks import MASK_KEY
from rlrun.builders.policies import (
    ACTIVATIONS,
    ActorCritic,
    BoundedActor,
    action_distribution,
    discrete_actions,
    normal_head,
)
from rlrun.builders.teams import AGENTS, group_actions, groups
from rlrun.errors import ConfigError


def team_mlp(
    obs_dim: int, out: int, n_agents: int, sizes: Sequence[int], act: str, **kwargs: bool
) -> MultiAgentMLP:
    """An MLP per agent (or one shared: ``share_params``), on each agent's observation or on
    all of them (``centralized``)."""
    return MultiAgentMLP(
        n_agent_inputs=obs_dim,
        n_agent_outputs=out,
        n_agents=n_agents,
        depth=len(sizes),
        num_cells=list(sizes),
        activation_class=ACTIVATIONS[act],
        **kwargs,
    )


def team_actor(
    observation_spec: Composite,
    action_spec: TensorSpec,
    sizes: Sequence[int],
    act: str,
    share_params: bool,
    state_dependent_std: bool,
    return_log_prob: bool,
    group: str = AGENTS,
) -> BoundedActor:
    """A stochastic actor per agent of ``group`` on its own observation, writing
    ``(group, "action")`` (and, with ``return_log_prob``, its log-prob: PPO's ratio reads it):
    a TanhNormal for continuous actions, a categorical for discrete ones, masked where the
    group's observations carry an ``action_mask``."""
    n_agents, obs_dim = agents_and_width(observation_spec, group)
    masked = MASK_KEY in observation_spec[group].keys()
    dist_cls, dist_kwargs, n_out = action_distribution(action_spec, masked)
    continuous = issubclass(dist_cls, TanhNormal)
    dist_keys = ["loc", "scale"] if continuous else ["logits"]
    reads = {key: (group, key) for key in dist_keys}
    if masked:  # the env's legal actions (a turn-based game's: rlrun/builders/turns.py)
        reads["mask"] = (group, MASK_KEY)
    layers: list[nn.Module] = []
    if continuous:
        n_out, head = normal_head(n_out, state_dependent_std)
        layers.append(head)
    net = team_mlp(
        obs_dim, n_out, n_agents, sizes, act, centralized=False, share_params=share_params
    )
    return BoundedActor(
        TensorDictModule(
            nn.Sequential(net, *layers),
            [(group, "observation")],
            [(group, key) for key in dist_keys],
        ),
        in_keys=reads,
        out_keys=[(group, "action")],
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=return_log_prob,
    )


def agents_and_width(observation_spec: Composite, group: str = AGENTS) -> tuple[int, int]:
    """The number of agents of ``group`` and the width of each one's observation."""
    observation = observation_spec[group, "observation"]
    return observation.shape[-2], observation.shape[-1]


def one_env_actions(action_spec: TensorSpec, observation_spec: Composite) -> TensorSpec:
    """The team's action spec of one env (``[n_agents, ...]``): the env's batch dims dropped,
    as the modules' ``spec`` wants it."""
    return action_spec[(0,) * observation_spec.ndim]


def only_mlp(kind: str) -> None:
    """The team's networks are MLPs over the agent dimension: any other ``policy.kind`` is
    refused."""
    if kind != "mlp":
        raise ConfigError(
            f"policy.kind={kind}: the multi-agent algorithms build MLPs over the agents "
            "(TorchRL's MultiAgentMLP); use policy=mlp."
        )


def make_team_actor_critic(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    kind: str = "mlp",
    hidden_sizes: Sequence[int] = (64, 64),
    activation: str = "tanh",
    share_params: bool = True,
    state_dependent_std: bool = True,
    centralised_critic: bool = False,
    **_: object,
) -> ActorCritic:
    """For each group of the team (``env.group_map``), a stochastic actor per agent, writing
    ``(group, "action")`` and its log-prob, and a per-agent state-value critic,
    ``(group, "state_value")``: centralised (every agent of the group's observation) or local
    (its own). Several groups: one ``ActorCritic`` each in ``groups``, run one after the other
    by ``actor`` and ``critic``."""
    only_mlp(kind)
    parts = {}
    for group in groups(observation_spec):
        actor = team_actor(
            observation_spec, group_actions(action_spec, group), hidden_sizes, activation,
            share_params, state_dependent_std, return_log_prob=True, group=group,
        )  # fmt: skip
        n_agents, obs_dim = agents_and_width(observation_spec, group)
        value = team_mlp(
            obs_dim, 1, n_agents, hidden_sizes, activation, centralized=centralised_critic,
            share_params=share_params,
        )  # fmt: skip
        critic = TensorDictModule(value, [(group, "observation")], [(group, "state_value")])
        parts[group] = ActorCritic(
            actor=actor.to(device), critic=critic.to(device), action_key=(group, "action")
        )
    return joined(parts)


def joined(parts: dict[str, ActorCritic]) -> ActorCritic:
    """One group's networks as they are, or several groups' as one: actors (and critics or
    Q-networks) run one after the other, each group's kept in ``groups`` for its own loss."""
    first, *others = parts.values()
    if not others:
        return first

    def chained(name: str) -> TensorDictSequential | None:
        if getattr(first, name) is None:
            return None
        return TensorDictSequential(*(getattr(p, name) for p in parts.values()))

    return ActorCritic(
        actor=chained("actor"),
        critic=chained("critic"),
        qvalue=chained("qvalue"),
        action_key=first.action_key,
        groups=parts,
    )


def make_centralised_critic(**kwargs: object) -> ActorCritic:
    """:func:`make_team_actor_critic` whose critic sees the whole team's observations
    (MAPPO's)."""
    return make_team_actor_critic(**kwargs, centralised_critic=True)


def make_team_qvalue_actor(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    kind: str = "mlp",
    hidden_sizes: Sequence[int] = (64, 64),
    activation: str = "tanh",
    share_params: bool = True,
    **_: object,
) -> ActorCritic:
    """For each group of the team, each agent's action values from its own observation, and
    its greedy action (``(group, "action")``, the chosen action's value beside it: what a mixer
    sums up), among the legal ones where the group's observations carry an ``action_mask``.
    Returned as ``ActorCritic(actor=q, qvalue=q)``; exploration is the algorithm's. Several
    groups: one ``ActorCritic`` each in ``groups``."""
    only_mlp(kind)
    parts = {}
    for group in groups(observation_spec):
        actions = group_actions(action_spec, group)
        n_actions = discrete_actions(actions, f"{__name__}.make_team_qvalue_actor")
        n_agents, obs_dim = agents_and_width(observation_spec, group)
        net = team_mlp(
            obs_dim, n_actions, n_agents, hidden_sizes, activation, centralized=False,
            share_params=share_params,
        )  # fmt: skip
        values = TensorDictModule(net, [(group, "observation")], [(group, "action_value")])
        team_actions = one_env_actions(actions, observation_spec)  # [n_agents]
        masked = MASK_KEY in observation_spec[group].keys()
        greedy = QValueModule(
            action_value_key=(group, "action_value"),
            out_keys=[(group, key) for key in ("action", "action_value", "chosen_action_value")],
            action_mask_key=(group, MASK_KEY) if masked else None,
            # per agent (the group's Composite is [n_agents], as the env's unbatched action spec)
            spec=Composite({group: Composite(action=team_actions, shape=team_actions.shape)}),
        )
        actor = SafeSequential(values, greedy).to(device)
        parts[group] = ActorCritic(actor=actor, qvalue=actor, action_key=(group, "action"))
    return joined(parts)


def make_team_actor_q(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    kind: str = "mlp",
    hidden_sizes: Sequence[int] = (64, 64),
    activation: str = "tanh",
    share_params: bool = True,
    state_dependent_std: bool = True,
    deterministic: bool = False,
    centralised_critic: bool = False,
    **_: object,
) -> ActorCritic:
    """For each group of the team, an actor per agent on its own observation (TanhNormal;
    ``deterministic``: tanh-scaled to the action bounds, exploration noise being the
    algorithm's) and a Q-network per agent, ``(group, "state_action_value")``, on its own
    observation and action or, centralised, on the whole group's (the losses make the copies
    they need). Continuous actions only. Several groups: one ``ActorCritic`` each in
    ``groups``."""
    only_mlp(kind)
    sizes, act = hidden_sizes, activation
    parts = {}
    for group in groups(observation_spec):
        actions = group_actions(action_spec, group)
        if actions.domain != "continuous":
            raise ConfigError(
                f"policy._target_={__name__}.make_team_actor_q needs continuous actions; this "
                "env's are discrete: set env.kwargs.continuous_actions=true, or use a team "
                "algorithm for discrete actions (rlrun --help lists them)."
            )
        if deterministic:
            actor = team_deterministic_actor(
                observation_spec, actions, sizes, act, share_params, group
            )
        else:
            actor = team_actor(
                observation_spec, actions, sizes, act, share_params, state_dependent_std,
                return_log_prob=False, group=group,
            )  # fmt: skip
        n_agents, obs_dim = agents_and_width(observation_spec, group)
        # MultiAgentMLP joins its inputs, observation then action, per agent
        q = team_mlp(
            obs_dim + actions.shape[-1], 1, n_agents, sizes, act,
            centralized=centralised_critic, share_params=share_params,
        )  # fmt: skip
        reads = [(group, "observation"), (group, "action")]
        qvalue = TensorDictModule(q, reads, [(group, "state_action_value")])
        parts[group] = ActorCritic(
            actor=actor.to(device), qvalue=qvalue.to(device), action_key=(group, "action")
        )
    return joined(parts)


def team_deterministic_actor(
    observation_spec: Composite,
    action_spec: TensorSpec,
    sizes: Sequence[int],
    act: str,
    share_params: bool,
    group: str = AGENTS,
) -> SafeSequential:
    """A deterministic actor per agent of ``group`` on its own observation, tanh-scaled to the
    action bounds: its ``spec[(group, "action")]`` is the group's unbatched action spec."""
    n_agents, obs_dim = agents_and_width(observation_spec, group)
    team_actions = one_env_actions(action_spec, observation_spec)  # [n_agents, dim]
    net = team_mlp(
        obs_dim, action_spec.shape[-1], n_agents, sizes, act, centralized=False,
        share_params=share_params,
    )  # fmt: skip
    return SafeSequential(
        TensorDictModule(net, [(group, "observation")], [(group, "param")]),
        TanhModule([(group, "param")], [(group, "action")], spec=team_actions),
    )


def make_team_deterministic_actor_q(**kwargs: object) -> ActorCritic:
    """:func:`make_team_actor_q` with deterministic actors and a Q-network per agent on its
    own observation and action (IDDPG's)."""
    return make_team_actor_q(**kwargs, deterministic=True)


def make_team_deterministic_actor_centralised_q(**kwargs: object) -> ActorCritic:
    """:func:`make_team_actor_q` with deterministic actors and Q-networks on the whole team's
    observations and actions (MADDPG's)."""
    return make_team_actor_q(**kwargs, deterministic=True, centralised_critic=True)


def make_team_stochastic_actor_centralised_q(**kwargs: object) -> ActorCritic:
    """:func:`make_team_actor_q` with TanhNormal actors and Q-networks on the whole team's
    observations and actions (MASAC's)."""
    return make_team_actor_q(**kwargs, centralised_critic=True)
