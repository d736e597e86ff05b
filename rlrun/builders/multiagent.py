"""A team of agents' networks and clipped PPO loss (the multi-agent algorithms' shared
pieces): TorchRL's ``MultiAgentMLP`` over the agent dimension of a multi-agent env's
``("agents", ...)`` keys (``rlrun/builders/vmas_env.py``), and its ``MAPPOLoss``.

Each agent acts on its own observation (decentralised actors); the critic values each agent's
state from its own observation (IPPO) or from the whole team's (MAPPO's centralised critic).
``policy.share_params``: one set of weights for every agent of the team, or one each. A user's
own factory takes the same keyword arguments as :func:`make_team_actor_critic`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omegaconf import DictConfig
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Composite, TensorSpec
from torchrl.modules import MultiAgentMLP, QValueModule, SafeSequential, TanhNormal
from torchrl.objectives.multiagent import MAPPOLoss, QMixerLoss
from torchrl.objectives.value import MultiAgentGAE

from rlrun.builders.offpolicy import epsilon_greedy, hard_or_soft, off_policy, require_qvalue
from rlrun.builders.onpolicy import on_policy, require_critic
from rlrun.builders.policies import (
    ACTIVATIONS,
    ActorCritic,
    BoundedActor,
    action_distribution,
    discrete_actions,
    normal_head,
)
from rlrun.builders.training import Context, Training
from rlrun.builders.vmas_env import AGENTS
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
    """A stochastic actor per agent, writing ``("agents", "action")`` and its log-prob, and a
    per-agent state-value critic, ``("agents", "state_value")``: centralised (every agent's
    observation) or local (its own)."""
    if kind != "mlp":
        raise ConfigError(
            f"policy.kind={kind}: the multi-agent algorithms build MLPs over the agents "
            "(TorchRL's MultiAgentMLP); use policy=mlp."
        )
    observation = observation_spec[AGENTS, "observation"]
    n_agents, obs_dim = observation.shape[-2], observation.shape[-1]
    dist_cls, dist_kwargs, n_out = action_distribution(action_spec)
    continuous = issubclass(dist_cls, TanhNormal)
    dist_keys = ["loc", "scale"] if continuous else ["logits"]
    layers: list[nn.Module] = []
    if continuous:
        n_out, head = normal_head(n_out, state_dependent_std)
        layers.append(head)
    sharing = {"share_params": share_params}
    net = team_mlp(obs_dim, n_out, n_agents, hidden_sizes, activation, centralized=False, **sharing)
    actor = BoundedActor(
        TensorDictModule(
            nn.Sequential(net, *layers),
            [(AGENTS, "observation")],
            [(AGENTS, key) for key in dist_keys],
        ),
        in_keys={key: (AGENTS, key) for key in dist_keys},
        out_keys=[(AGENTS, "action")],
        spec=action_spec,
        distribution_class=dist_cls,
        distribution_kwargs=dist_kwargs,
        return_log_prob=True,
    ).to(device)
    value = team_mlp(
        obs_dim, 1, n_agents, hidden_sizes, activation, centralized=centralised_critic, **sharing
    )
    critic = TensorDictModule(value, [(AGENTS, "observation")], [(AGENTS, "state_value")])
    return ActorCritic(actor=actor, critic=critic.to(device), action_key=(AGENTS, "action"))


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
    """Each agent's action values from its own observation, and its greedy action
    (``("agents", "action")``, the chosen action's value beside it: what a mixer sums up).
    Returned as ``ActorCritic(actor=q, qvalue=q)``; exploration is the algorithm's."""
    if kind != "mlp":
        raise ConfigError(f"policy.kind={kind}: the team's Q-networks are MLPs; use policy=mlp.")
    n_actions = discrete_actions(action_spec, f"{__name__}.make_team_qvalue_actor")
    observation = observation_spec[AGENTS, "observation"]
    n_agents, obs_dim = observation.shape[-2], observation.shape[-1]
    net = team_mlp(
        obs_dim, n_actions, n_agents, hidden_sizes, activation, centralized=False,
        share_params=share_params,
    )  # fmt: skip
    values = TensorDictModule(net, [(AGENTS, "observation")], [(AGENTS, "action_value")])
    team_actions = action_spec[(0,) * observation_spec.ndim]  # [n_agents]: the env's dims dropped
    greedy = QValueModule(
        action_value_key=(AGENTS, "action_value"),
        out_keys=[(AGENTS, "action"), (AGENTS, "action_value"), (AGENTS, "chosen_action_value")],
        # per agent (the agents' Composite is [n_agents], as the env's unbatched action spec)
        spec=Composite({AGENTS: Composite(action=team_actions, shape=team_actions.shape)}),
    )
    actor = SafeSequential(values, greedy).to(device)
    return ActorCritic(actor=actor, qvalue=actor, action_key=(AGENTS, "action"))


def mixed_value_training(cfg: DictConfig, ctx: Context, mixer: nn.Module, reads: list) -> Training:
    """Value decomposition (TorchRL's ``QMixerLoss``: QMIX, VDN): the agents' chosen action
    values, mixed by ``mixer`` (reading ``reads``) into the team's, regress on the team's TD(0)
    target (its reward: the agents' mean, ``rlrun/builders/vmas_env.py``); each agent explores
    epsilon-greedily; target networks, hard or soft, for both."""
    require_qvalue(ctx.ac, cfg.name)
    mixing = TensorDictModule(mixer.to(ctx.device), reads, ["chosen_action_value"])
    loss = QMixerLoss(ctx.ac.qvalue, mixing, loss_function=cfg.loss_function, delay_value=True)
    exploration = epsilon_greedy(cfg, ctx.ac, ctx.device)
    updater = hard_or_soft(cfg, loss)
    return off_policy(cfg, loss, ctx.frames_per_batch, updater=updater, exploration=exploration)


def team_size(ctx: Context) -> tuple[int, torch.Size]:
    """The number of agents and the shape of the team's observations (QMIX's state: every
    agent's observation), from the env's spec."""
    shape = ctx.observation_spec[AGENTS, "observation"].shape
    return shape[-2], shape[-2:]


def clipped_team_training(cfg: DictConfig, ctx: Context) -> Training:
    """Clipped PPO for a team (TorchRL's ``MAPPOLoss``; MAPPO and IPPO differ in their critic
    only): the actor and critic of ``ctx.ac`` over the agents' ``("agents", ...)`` keys, each
    agent's advantages from its own rewards and values by TorchRL's ``MultiAgentGAE`` (which
    spreads the team's done flags over the agents), then PPO's minibatches of each fresh batch
    (``rlrun/builders/onpolicy.py``)."""
    require_critic(ctx.ac, cfg.name)
    loss = MAPPOLoss(
        ctx.ac.actor,
        ctx.ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    loss.set_keys(
        action=(AGENTS, "action"),
        sample_log_prob=(AGENTS, "action_log_prob"),
        value=(AGENTS, "state_value"),
        reward=(AGENTS, "reward"),
    )
    return on_policy(
        cfg,
        loss,
        ctx,
        cfg.minibatch_size,
        epochs=cfg.epochs,
        logprob_check_tol=cfg.logprob_check_tol,
        estimator=MultiAgentGAE,
    )
