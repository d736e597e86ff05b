"""CrossQ (``algo=crossq``; Bhatt et al. 2024): TorchRL's ``CrossQLoss``, SAC without target
networks whose critics (``policy=crossq``: batch renormalisation) see the current and the next
state-action pairs in one joint batch, so their normalisation statistics cover both; the actor and
the temperature learn every ``algo.policy_delay`` critic steps, as in the paper's code."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import BOX, Algorithm
from rlrun.config import MaxEntropyConfig, PolicyConfig, RegressionLoss, ranged

if TYPE_CHECKING:
    import torch
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class CrossQConfig(MaxEntropyConfig):
    """CrossQ's keys (``conf/algo/crossq.yaml``): no target networks."""

    policy_delay: int = ranged(1)
    loss_function: RegressionLoss = MISSING


@dataclass
class CrossQPolicyConfig(PolicyConfig):
    """``policy=crossq``: wide critics with batch renormalisation, no target networks."""

    critic_hidden_sizes: list[int] = MISSING
    batch_norm_momentum: float = ranged(0, 1, low_open=True)
    batch_norm_warmup_steps: int = ranged(0)


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: str | torch.device = "cpu",
    hidden_sizes: Sequence[int] = (256, 256),
    activation: str = "relu",
    state_dependent_std: bool = True,
    critic_hidden_sizes: Sequence[int] = (2048, 2048),
    batch_norm_momentum: float = 0.01,
    batch_norm_warmup_steps: int = 100000,
    **_: object,
) -> ActorCritic:
    """CrossQ's networks (``policy=crossq``): a TanhNormal actor and a wide critic with batch
    renormalisation after each hidden layer (TorchRL's ``BatchRenorm1d``). The actor has none:
    the collector runs it on one step per env, where batch statistics mean nothing."""
    from rlrun.builders.policies import ActorCritic, qvalue_network, tanh_normal_actor

    actor = tanh_normal_actor(
        observation_spec, action_spec, hidden_sizes, activation, state_dependent_std
    )
    renorm = {"momentum": batch_norm_momentum, "warmup_steps": batch_norm_warmup_steps}
    norm = [{"num_features": n, **renorm} for n in critic_hidden_sizes]
    qvalue = qvalue_network(
        observation_spec, action_spec, critic_hidden_sizes, activation, norm_kwargs=norm
    )
    return ActorCritic(actor=actor.to(device), qvalue=qvalue.to(device))


def build(cfg: DictConfig, ctx: Context) -> Training:
    """CrossQ on ``ac.actor`` (TanhNormal) and ``ac.qvalue``; nothing to update but the
    networks themselves. TorchRL's ``CrossQLoss``, its actor and temperature delayed."""
    from torchrl.objectives import CrossQLoss

    from rlrun.builders.offpolicy import (
        max_entropy,
        off_policy,
        require_qvalue,
        with_delayed_actor,
    )

    require_qvalue(ctx.ac, cfg.name)
    loss = with_delayed_actor(CrossQLoss, ("loss_actor", "loss_alpha"))(
        ctx.ac.actor,
        ctx.ac.qvalue,
        loss_function=cfg.loss_function,
        policy_delay=cfg.policy_delay,
        **max_entropy(cfg, ctx.ac),
    )
    return off_policy(cfg, loss, ctx.frames_per_batch, target_networks=False)


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="SAC without target networks, batch-renormalised critics (policy=crossq)",
    schema=CrossQConfig,
    actions=(BOX,),
    cudagraphs=True,
    policy_schemas={"crossq": CrossQPolicyConfig},
)
