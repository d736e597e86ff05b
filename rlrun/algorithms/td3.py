"""TD3 (``algo=td3``): TorchRL's ``TD3Loss`` (twin Q, target policy smoothing with clipped noise),
actor and target updates every ``algo.policy_delay`` critic steps, and Gaussian exploration noise
added to the deterministic actor while collecting (fixed, or annealed over frames)."""

from __future__ import annotations

from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from torchrl.objectives import TD3Loss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import SoftUpdate, gaussian_noise, off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic


class DelayedActor:
    """For a loss with an actor term (``TD3Loss``, ``TD3BCLoss``, ``CrossQLoss``): the terms named
    in ``delayed`` reach the gradient only on every ``policy_delay``-th step.

    In between they are returned detached (still logged): the actor's parameters then get no
    gradient at all, and torch optimisers leave parameters without a gradient untouched (no
    Adam momentum step), as in TD3's separate actor optimiser. The step count is a buffer, so
    it is saved in checkpoints and a resumed run keeps the rhythm.

    rlrun's update step counts the steps itself, outside the compiled or captured function,
    through :meth:`begin_step` (``stepped_outside``): a count kept inside a captured step would
    replay the value it was captured with. TorchRL's own step (Ray learners) calls ``forward``
    only, which then counts.
    """

    delayed: tuple[str, ...] = ("loss_actor",)

    def __init__(self, *args: Any, policy_delay: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy_delay = policy_delay
        self.register_buffer("critic_steps", torch.zeros((), dtype=torch.long))
        self._steps = 0  # the buffer's value, kept on the host (no device sync per step)
        self.actor_updated = False
        self.stepped_outside = False
        self.register_load_state_dict_post_hook(DelayedActor._reload_steps)

    def _load_from_state_dict(self, state_dict: dict, prefix: str, *args, **kwargs) -> None:
        # a td3_bc or crossq checkpoint saved before its actor was delayed (2026-11-26) starts
        # counting
        state_dict.setdefault(f"{prefix}critic_steps", torch.zeros_like(self.critic_steps))
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    @staticmethod
    def _reload_steps(module: DelayedActor, _incompatible: Any) -> None:
        module._steps = int(module.critic_steps)

    def begin_step(self) -> bool:
        """Count one critic step; returns whether the actor learns in it (the step's phase)."""
        self._steps += 1
        self.critic_steps.add_(1)
        self.actor_updated = self._steps % self.policy_delay == 0
        return self.actor_updated

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.stepped_outside:
            self.begin_step()
        out = super().forward(tensordict)
        if not self.actor_updated:
            for key in self.delayed:
                out.set(key, out.get(key).detach())
        return out


class DelayedTD3Loss(DelayedActor, TD3Loss):
    """TorchRL's ``TD3Loss``, its actor delayed (:class:`DelayedActor`)."""


class DelayedSoftUpdate(SoftUpdate):
    """Soft target updates after the actor's updates only (TD3: every ``policy_delay`` critic
    steps), read from the loss itself, so that the rhythm holds wherever the updater is stepped:
    in rlrun's update step (each phase its own captured function) or by a Ray learner
    (``trainer.learner_backend=ray``)."""

    def step(self) -> None:
        if self.loss_module.actor_updated:
            super().step()


def make_td3(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """TD3 on ``ac.actor`` (deterministic, bounded) and ``ac.qvalue``; targets follow the actor."""
    require_qvalue(ac, "td3", "make_td3_networks", "td3_mujoco")
    spec = ac.actor.spec["action"]
    loss = DelayedTD3Loss(
        ac.actor,
        ac.qvalue,
        action_spec=spec,
        num_qvalue_nets=cfg.num_qvalue_nets,
        policy_noise=cfg.policy_noise,
        noise_clip=cfg.noise_clip,
        loss_function=cfg.loss_function,
        policy_delay=cfg.policy_delay,
    )
    exploration = gaussian_noise(cfg, ac, device)
    updater = DelayedSoftUpdate(loss, tau=cfg.tau)
    return off_policy(cfg, loss, frames_per_batch, updater=updater, exploration=exploration)
