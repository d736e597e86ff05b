"""Behaviour cloning (``algo=bc``): TorchRL's ``BCLoss`` on a dataset's actions, nothing else
learnt. A deterministic actor regresses continuous actions (l2); a categorical one maximises the
log-likelihood of discrete ones (:class:`OneHotBCLoss`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data, defined_on_first_use
from rlrun.config import AlgoConfig

if TYPE_CHECKING:
    from torchrl.data import Composite, TensorSpec

    from rlrun.builders.policies import ActorCritic
    from rlrun.builders.training import Context, Training


@dataclass
class BCConfig(AlgoConfig):
    """Behaviour cloning's keys (``conf/algo/bc.yaml``): it learns from ``dataset`` alone."""


def _one_hot_bc_loss() -> type:
    """:class:`OneHotBCLoss`, made on first use (its base is TorchRL's ``BCLoss``)."""
    from tensordict import TensorDict, TensorDictBase
    from torchrl.objectives import BCLoss

    class OneHotBCLoss(BCLoss):
        """``BCLoss`` for a categorical actor and one-hot actions, as rlrun's envs give them:
        their negative log-likelihood (``BCLoss`` reads integer actions as class indices)."""

        def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
            with self.actor_network_params.to_module(self.actor_network):
                dist = self.actor_network.get_dist(tensordict.copy())
            loss = -dist.log_prob(tensordict.get(self.tensor_keys.action)).mean()
            return TensorDict({"loss_bc": loss})

    return OneHotBCLoss


__getattr__ = defined_on_first_use(__name__, OneHotBCLoss=_one_hot_bc_loss)


def networks(
    *,
    observation_spec: Composite,
    action_spec: TensorSpec,
    **kwargs: Any,
) -> ActorCritic:
    """The actor BC trains, by the action space: a deterministic actor tanh-scaled to the
    bounds (its Q network is not trained) or a categorical one."""
    from rlrun.builders.policies import make_actor_critic, make_deterministic_actor_q

    if action_spec.domain == "discrete":
        kwargs["with_critic"] = False
        make = make_actor_critic
    else:
        make = make_deterministic_actor_q
    return make(observation_spec=observation_spec, action_spec=action_spec, **kwargs)


def build(cfg: DictConfig, ctx: Context) -> Training:
    """BC on ``ac.actor``: one optimisation step per frame (an offline run's frames are steps)."""
    from torchrl.objectives import BCLoss

    from rlrun.builders.training import Training

    if ctx.ac.actor.spec["action"].domain == "continuous":
        loss = BCLoss(ctx.ac.actor, loss_function="l2")
    else:
        loss = __getattr__("OneHotBCLoss")(ctx.ac.actor)
    return Training(
        loss=loss,
        optim_steps_per_batch=ctx.frames_per_batch,
        max_grad_norm=cfg.max_grad_norm,
    )


ALGORITHM = Algorithm(
    build=build,
    networks=f"{__name__}.networks",
    summary="Behaviour cloning of a dataset's actions (offline, no collector)",
    schema=BCConfig,
    data=Data.OFFLINE,
    collects=False,
)
