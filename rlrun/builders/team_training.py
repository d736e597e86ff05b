"""A team of agents' losses and how they train (the multi-agent algorithms' shared builders),
over the agents' ``("agents", ...)`` keys (``rlrun/builders/teams.py``) and the networks of
``rlrun/builders/multiagent.py``: TorchRL's ``MAPPOLoss`` (clipped PPO), ``QMixerLoss`` (value
decomposition), ``DDPGLoss`` and ``SACLoss`` (continuous actions, off-policy, each agent's value
from its own reward). The algorithms differ in their critics, which their networks build.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torch import nn
from torchrl.objectives import DDPGLoss, LossModule, SACLoss
from torchrl.objectives.multiagent import MAPPOLoss, QMixerLoss
from torchrl.objectives.value import MultiAgentGAE

from rlrun.builders.groups import GroupExploration, group_targets, joined_losses
from rlrun.builders.offpolicy import (
    AnnealExploration,
    SoftUpdate,
    epsilon_greedy,
    gaussian_noise,
    hard_or_soft,
    max_entropy,
    off_policy,
    require_qvalue,
)
from rlrun.builders.onpolicy import on_policy, require_critic
from rlrun.builders.policies import ActorCritic
from rlrun.builders.training import Context, Training


def mixed_value_training(
    cfg: DictConfig, ctx: Context, mixer: Callable[[str], tuple[nn.Module, list]]
) -> Training:
    """Value decomposition (TorchRL's ``QMixerLoss``: QMIX, VDN): the agents' chosen action
    values, mixed by ``mixer(group)`` (a network and the keys it reads) into the team's, regress
    on the team's TD(0) target (its reward: the agents' mean, ``rlrun/builders/teams.py``);
    each agent explores epsilon-greedily; target networks, hard or soft, for both. A team of
    several groups: a mixer, loss, target networks and exploration per group, each group's
    mixer valuing the team's reward from its own agents' values (value decomposition assumes a
    cooperative team: the groups share its reward), the losses summed."""
    require_qvalue(ctx.ac, cfg.name)
    losses = {}
    for group, ac in group_networks(ctx.ac).items():
        name = ac.action_key[0]
        module, reads = mixer(name)
        mixing = TensorDictModule(module.to(ctx.device), reads, ["chosen_action_value"])
        loss = QMixerLoss(ac.qvalue, mixing, loss_function=cfg.loss_function, delay_value=True)
        loss.set_keys(
            local_value=(name, "chosen_action_value"),
            action_value=(name, "action_value"),
            action=ac.action_key,
        )
        losses[group] = loss
    return off_policy(
        cfg,
        joined_losses(losses, team_errors=True),
        ctx.frames_per_batch,
        updater=group_targets(functools.partial(hard_or_soft, cfg), losses),
        exploration=team_exploration(epsilon_greedy, cfg, ctx.ac, ctx.device),
    )


def clipped_team_training(cfg: DictConfig, ctx: Context) -> Training:
    """Clipped PPO for a team (TorchRL's ``MAPPOLoss``; MAPPO and IPPO differ in their critic
    only): the actor and critic of ``ctx.ac`` over the agents' ``(group, ...)`` keys, each
    agent's advantages from its own rewards and values by TorchRL's ``MultiAgentGAE`` (which
    spreads the team's done flags over the agents), then PPO's minibatches of each fresh batch
    (``rlrun/builders/onpolicy.py``). A team of several groups: a loss per group, on its own
    networks (``ctx.ac.groups``), summed (``rlrun/builders/groups.py``)."""
    require_critic(ctx.ac, cfg.name)
    losses = {group: clipped_group_loss(cfg, ac) for group, ac in group_networks(ctx.ac).items()}
    return on_policy(
        cfg,
        joined_losses(losses),
        ctx,
        cfg.minibatch_size,
        epochs=cfg.epochs,
        logprob_check_tol=cfg.logprob_check_tol,
        estimator=MultiAgentGAE,
    )


def group_networks(ac: ActorCritic) -> dict[str | None, ActorCritic]:
    """Each group's networks (a team of several groups'), or ``{None: ac}``: the keys
    :func:`~rlrun.builders.groups.joined_losses` reads."""
    return ac.groups or {None: ac}


def clipped_group_loss(cfg: DictConfig, ac: ActorCritic) -> MAPPOLoss:
    """TorchRL's ``MAPPOLoss`` on one group's networks and keys (``ac.action_key``'s group)."""
    group = ac.action_key[:-1]
    loss = MAPPOLoss(
        ac.actor,
        ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    loss.set_keys(
        action=ac.action_key,
        sample_log_prob=(*group, "action_log_prob"),
        value=(*group, "state_value"),
        reward=(*group, "reward"),
    )
    return loss


class AgentSignals:
    """For a TorchRL loss whose TD(0) targets are per agent (``DDPGLoss``, ``SACLoss`` over the
    agents' keys): the team's ``done`` and ``terminated`` (``[*batch, 1]``) spread over the
    agents of its group as ``(group, "done")`` and ``(group, "terminated")`` (``[*batch,
    n_agents, 1]``) before each forward, as TorchRL's multi-agent recipes and BenchMARL do to each
    collected batch, and a prioritized replay's importance weights (``[*batch]``) over the
    agents' loss terms. Done here, every replay sample passes through it, however it was drawn
    (the fused update step's, a prioritized buffer's, a dataset's). The weights are spread for
    the length of this loss only: the next group's loss spreads them over its own agents."""

    # what it reads beyond the TorchRL loss's ``in_keys`` (a fused replay sample gathers them)
    batch_reads = (("next", "done"), ("next", "terminated"))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        after = tensordict.get("next")
        reward = self.tensor_keys.reward  # its group's: (group, "reward")
        shape = after.get(reward).shape
        for key in ("done", "terminated"):
            after.set((*reward[:-1], key), after.get(key).unsqueeze(-2).expand(shape))
        key = self.tensor_keys.priority_weight
        weight = tensordict.get(key, None)
        if weight is None or weight.shape != tensordict.shape:
            return super().forward(tensordict)
        tensordict.set(key, weight.unsqueeze(-1).expand(shape[:-1]))
        try:
            return super().forward(tensordict)
        finally:
            tensordict.set(key, weight)


@functools.cache
def with_agent_signals(loss_class: type) -> type:
    """``loss_class`` (a TorchRL loss) with :class:`AgentSignals` in front: the team's done
    flags and replay weights spread over the agents."""
    name = f"AgentSignals{loss_class.__name__}"
    return type(name, (AgentSignals, loss_class), {"__module__": __name__})


def agent_keys(loss: LossModule, ac: ActorCritic, **more: NestedKey) -> LossModule:
    """``loss`` reading each agent's Q-value, reward and done flags in its group (that of
    ``ac.action_key``: ``("agents", ...)`` by default), and ``more`` of its keys."""
    group = ac.action_key[:-1]
    loss.set_keys(
        state_action_value=(*group, "state_action_value"),
        reward=(*group, "reward"),
        done=(*group, "done"),
        terminated=(*group, "terminated"),
        **more,
    )
    return loss


def team_exploration(
    make: Callable[[DictConfig, ActorCritic, torch.device], AnnealExploration],
    cfg: DictConfig,
    ac: ActorCritic,
    device: torch.device,
) -> AnnealExploration:
    """``make``'s exploration (e.g. :func:`gaussian_noise`) on the team's actions, one module
    per group for a team of several, annealed together (the first group's logged)."""
    if not ac.groups:
        return make(cfg, ac, device)
    parts = [make(cfg, part, device) for part in ac.groups.values()]
    module = GroupExploration(*(part.module for part in parts))
    return AnnealExploration(module, parts[0].attr, parts[0].log_as, shown=parts[0].module)


def deterministic_team_training(cfg: DictConfig, ctx: Context) -> Training:
    """DDPG for a team (TorchRL's ``DDPGLoss`` over the agents' keys; MADDPG and IDDPG differ
    in their critic only): each agent's Q-value regresses on its own reward's TD(0) target,
    each actor climbs its Q-value; a target critic soft-updated with ``algo.tau`` (no target
    actor, as in TorchRL's recipe and BenchMARL), Gaussian noise on every agent's action while
    collecting. A team of several groups: a loss, target critic and noise per group."""
    require_qvalue(ctx.ac, cfg.name)
    losses = {
        group: agent_keys(
            with_agent_signals(DDPGLoss)(
                ac.actor, ac.qvalue, loss_function=cfg.loss_function, delay_value=True
            ),
            ac,
        )
        for group, ac in group_networks(ctx.ac).items()
    }
    exploration = team_exploration(gaussian_noise, cfg, ctx.ac, ctx.device)
    return off_policy(
        cfg,
        joined_losses(losses),
        ctx.frames_per_batch,
        updater=group_targets(functools.partial(SoftUpdate, tau=cfg.tau), losses),
        exploration=exploration,
    )


def soft_team_training(cfg: DictConfig, ctx: Context) -> Training:
    """SAC for a team (TorchRL's ``SACLoss`` over the agents' keys; MASAC and ISAC differ in
    their critic only): each agent's twin Q-values regress on its own reward's soft TD(0)
    target, each TanhNormal actor maximises its Q-value and entropy, one learned temperature
    for the team (target entropy: minus each agent's action dims), target critics
    soft-updated with ``algo.tau``. A team of several groups: a loss, temperature and target
    critics per group."""
    require_qvalue(ctx.ac, cfg.name)
    losses = {
        group: agent_keys(
            with_agent_signals(SACLoss)(
                ac.actor,
                ac.qvalue,
                loss_function=cfg.loss_function,
                delay_qvalue=True,
                **max_entropy(cfg, ac),
            ),
            ac,
            action=ac.action_key,
        )
        for group, ac in group_networks(ctx.ac).items()
    }
    soft = functools.partial(SoftUpdate, tau=cfg.tau)
    return off_policy(
        cfg, joined_losses(losses), ctx.frames_per_batch, updater=group_targets(soft, losses)
    )
