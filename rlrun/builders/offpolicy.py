"""The replay-buffer skeleton every off-policy and offline algorithm shares, written once.

Each of them is a TorchRL loss with TD(0) targets (``algo.gamma``), ``algo.utd_ratio`` optimisation
steps per collected frame on replay samples, target networks (all but CrossQ) stepped by the update
step after each optimisation (``algo.tau`` or a hard copy; ``rlrun/builders/updates.py``), and,
where the algorithm explores with a module appended to its actor in the collector (epsilon-greedy,
Gaussian noise: built here once), that module annealed by collected frames.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey
from torchrl.modules import AdditiveGaussianModule, EGreedyModule
from torchrl.objectives import HardUpdate, LossModule, ValueEstimators
from torchrl.objectives import SoftUpdate as TorchRLSoftUpdate
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.action_masks import MASK_KEY
from rlrun.builders.groups import GroupTargets
from rlrun.builders.policies import ActorCritic
from rlrun.builders.training import Training
from rlrun.compat.torchrl import target_updater_tensors
from rlrun.errors import ConfigError


class SoftUpdate(TorchRLSoftUpdate):
    """TorchRL's soft target update as one ``_foreach_lerp_`` over every target tensor (TorchRL
    lerps network by network), so that it fits in the fused update step: one kernel launch per
    step on CUDA, nothing for a captured graph to freeze but the tensors themselves."""

    def pairs(self) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """(targets, sources), in the same order, read once. The update step reads them before
        compiling itself: read inside a compiled (or captured) function, the lookup came back
        with ``None`` targets on CUDA (H100, 2026-11-27)."""
        pairs = self.__dict__.get("_pairs")
        if pairs is None:
            sources, all_targets = target_updater_tensors(self)
            keys = list(sources.keys(True, True))
            named = [unravel_key(("", k))[1:] for k in keys]  # each key as a tuple
            targets = [all_targets.get(("target_" + k[0], *k[1:])) for k in named]
            pairs = self.__dict__["_pairs"] = (targets, [sources.get(k) for k in keys])
        return pairs

    def step(self) -> None:
        targets, sources = self.pairs()
        with torch.no_grad():
            torch._foreach_lerp_(targets, sources, 1 - self.eps)


class AnnealExploration(TrainerHookBase):
    """Anneal an exploration module (``EGreedyModule``, ``AdditiveGaussianModule``: its
    ``step``) by the frames of each batch, and log its current ``attr`` (``eps``, ``sigma``) as
    ``shown`` has it (default: ``module``; a team of several groups' anneals them together)."""

    def __init__(
        self,
        module: TensorDictModule,
        attr: str,
        log_as: str,
        shown: TensorDictModule | None = None,
    ) -> None:
        self.module = module
        self.attr = attr
        self.log_as = log_as
        self.shown = module if shown is None else shown

    def anneal(self, batch: TensorDictBase) -> None:
        self.module.step(batch.numel())

    def log(self, batch: TensorDictBase) -> dict[str, Any]:
        return {f"train/{self.log_as}": getattr(self.shown, self.attr).item()}

    def state_dict(self) -> dict[str, Any]:
        return self.module.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.module.load_state_dict(state_dict)

    def register(self, trainer: Trainer, name: str = "exploration") -> None:
        trainer.register_module(name, self)
        trainer.register_op("batch_process", self.anneal)
        trainer.register_op("pre_steps_log", self.log)


def require_qvalue(ac: ActorCritic, algo: str) -> None:
    """The off-policy losses train ``ac.qvalue``: a policy factory without one is a user's
    mistake (the algorithm's own networks have one)."""
    if ac.qvalue is None:
        raise ConfigError(
            f"algo={algo} needs a Q-network, but policy._target_ returned qvalue=None: set "
            "policy._target_=null (the algorithm's own networks) or return one from your factory."
        )


def epsilon_greedy(cfg: DictConfig, ac: ActorCritic, device: torch.device) -> AnnealExploration:
    """Value-based exploration: epsilon from ``algo.eps_start`` to ``algo.eps_end``
    over ``algo.eps_anneal_frames`` collected frames; its random actions among the legal ones
    where the env has an action mask."""
    epsilon = EGreedyModule(
        ac.actor.spec[ac.action_key],
        action_key=ac.action_key,
        eps_init=float(cfg.eps_start),
        eps_end=float(cfg.eps_end),
        annealing_num_steps=cfg.eps_anneal_frames,
        action_mask_key=legal_actions_key(ac),
        device=device,
    )
    return AnnealExploration(epsilon, "eps", "epsilon")


def legal_actions_key(ac: ActorCritic) -> NestedKey | None:
    """The env's action mask beside the policy's action (``action_mask``; a team group's
    ``(group, "action_mask")``) where the actor reads one, else None."""
    group = ac.action_key[:-1] if isinstance(ac.action_key, tuple) else ()
    key = (*group, MASK_KEY) if group else MASK_KEY
    return key if key in ac.actor.in_keys else None


def gaussian_noise(cfg: DictConfig, ac: ActorCritic, device: torch.device) -> AnnealExploration:
    """Deterministic actors' exploration: Gaussian noise whose std is
    ``algo.exploration_sigma_*`` times half the action range (as CleanRL's), annealed over
    ``algo.exploration_anneal_frames`` (equal start and end: fixed noise)."""
    spec = ac.actor.spec[ac.action_key]
    half_range = ((spec.space.high - spec.space.low) / 2).to(device)
    noise = AdditiveGaussianModule(
        spec,
        action_key=ac.action_key,
        sigma_init=float(cfg.exploration_sigma_start),
        sigma_end=float(cfg.exploration_sigma_end),
        annealing_num_steps=cfg.exploration_anneal_frames,
        std=half_range,
        device=device,
    )
    return AnnealExploration(noise, "sigma", "exploration_sigma")


def hard_or_soft(cfg: DictConfig, loss: LossModule) -> TargetNetUpdater:
    """``algo.target_update``: a hard copy every ``algo.target_update_period`` optimisation
    steps, or a soft update with ``algo.tau`` after each."""
    if cfg.target_update == "hard":
        return hard_update(loss, cfg.target_update_period)
    return SoftUpdate(loss, tau=cfg.tau)


def hard_update(loss: LossModule, period: int) -> HardUpdate:
    """TorchRL's ``HardUpdate`` copying every ``period`` steps. Asked for an interval of N, it
    counts to N and copies on the step after, every N + 1 steps (torchrl 0.14.1; the counter is
    public): given N - 1, it copies every N, as ``algo.target_update_period`` promises."""
    return CountingHardUpdate(loss, value_network_update_interval=period - 1)


class CountingHardUpdate(HardUpdate):
    """TorchRL's ``HardUpdate``, its parameters read only on the steps that copy: its ``step``
    reads every source and target parameter on every step to copy on one in N."""

    def step(self) -> None:
        if self.counter == self.value_network_update_interval:
            super().step()  # copies, and counts from 0 again
        else:
            self.counter += 1


def off_policy(
    cfg: DictConfig,
    loss: LossModule,
    frames_per_batch: int,
    *,
    updater: TargetNetUpdater | GroupTargets | None = None,
    exploration: AnnealExploration | None = None,
    target_networks: bool = True,
) -> Training:
    """``loss`` trained from the replay buffer: TD(0) targets, ``algo.utd_ratio`` steps per
    frame, ``updater`` (default: soft updates with ``algo.tau``; none without
    ``target_networks``) stepped with each optimisation step, and ``exploration``
    annealed while collecting."""
    loss.make_value_estimator(ValueEstimators.TD0, gamma=cfg.gamma)
    if updater is None and target_networks:
        updater = SoftUpdate(loss, tau=cfg.tau)
    return Training(
        loss=loss,
        optim_steps_per_batch=max(1, round(cfg.utd_ratio * frames_per_batch)),
        max_grad_norm=cfg.max_grad_norm,
        collect_hooks=[exploration] if exploration is not None else [],
        exploration=exploration.module if exploration is not None else None,
        target_updater=updater,
    )


class DelayedActor:
    """For a loss with an actor term (TorchRL's ``TD3Loss``, ``TD3BCLoss``, ``CrossQLoss``): the
    terms named in ``delayed`` reach the gradient only on every ``policy_delay``-th step.

    In between they are returned detached (still logged): the actor's parameters then get no
    gradient at all, and torch optimisers leave parameters without a gradient untouched (no
    Adam momentum step), as in TD3's separate actor optimiser. The step count is a buffer, so
    it is saved in checkpoints and a resumed run keeps the rhythm.

    rlrun's update step counts the steps itself, outside the compiled or captured function,
    through :meth:`begin_step` (``stepped_outside``): a count kept inside a captured step would
    replay the value it was captured with. TorchRL's own step (Ray learners) calls ``forward``
    only, which then counts.

    Where the actor's term is a method of its own that nothing else in the loss reads (TD3's and
    TD3+BC's ``actor_loss``: ``skips_actor``), the steps in between do not compute it at all, as
    a plain TD3 loop does not: they report those of the actor's last update (or of the first
    step) instead (gradients and random draws are the same either way; TD3 on HalfCheetah-v5 on
    the CPU: 120 update steps/s computing it, 131 skipping it, 2026-12-06). Those values are
    kept in tensors updated in place, which a compiled or captured step reads; the first step,
    which creates them, is not :attr:`steady` and runs eagerly. With ``policy_delay=1`` nothing
    is skipped.
    """

    delayed: tuple[str, ...] = ("loss_actor",)
    skips_actor = False

    def __init__(self, *args: Any, policy_delay: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.policy_delay = policy_delay
        self.skips_actor = self.skips_actor and policy_delay > 1
        self.register_buffer("critic_steps", torch.zeros((), dtype=torch.long))
        self._steps = 0  # the buffer's value, kept on the host (no device sync per step)
        self.actor_updated = False
        self.stepped_outside = False
        self._last_actor: tuple[torch.Tensor, dict[str, torch.Tensor]] | None = None
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

    @property
    def steady(self) -> bool:
        """Whether this step is the same function as the later ones of its phase: not so for
        the first step of a run (or of its resume), which creates the tensors of the skipped
        actor term."""
        return not self.skips_actor or self._last_actor is not None

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        if not self.skips_actor:
            return super().actor_loss(tensordict)
        if not self.actor_updated and self._last_actor is not None:
            loss, metadata = self._last_actor
            return loss.clone(), {key: value.clone() for key, value in metadata.items()}
        loss, metadata = super().actor_loss(tensordict)
        if self._last_actor is None:
            self._last_actor = (
                loss.detach().clone(),
                {key: value.detach().clone() for key, value in metadata.items()},
            )
        else:
            self._last_actor[0].copy_(loss.detach())
            for key, value in metadata.items():
                self._last_actor[1][key].copy_(value.detach())
        return loss, metadata

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.stepped_outside:
            self.begin_step()
        out = super().forward(tensordict)
        if not self.actor_updated:
            for key in self.delayed:
                out.set(key, out.get(key).detach())
        return out


def with_delayed_actor(
    loss_class: type, delayed: tuple[str, ...] = ("loss_actor",), skips_actor: bool = False
) -> type:
    """``loss_class`` (a TorchRL loss) with :class:`DelayedActor` in front: its ``delayed``
    terms reach the gradient every ``policy_delay`` steps; ``skips_actor``: its ``actor_loss``
    is not computed in between."""
    return _delayed(loss_class, delayed, skips_actor)


@functools.cache
def _delayed(loss_class: type, delayed: tuple[str, ...], skips_actor: bool) -> type:
    name = f"Delayed{loss_class.__name__}"
    members = {"delayed": delayed, "skips_actor": skips_actor, "__module__": __name__}
    return type(name, (DelayedActor, loss_class), members)


class DelayedSoftUpdate(SoftUpdate):
    """Soft target updates after the actor's updates only (every ``policy_delay`` critic
    steps), read from the loss itself, so that the rhythm holds wherever the updater is stepped:
    in rlrun's update step (each phase its own captured function) or by a Ray learner
    (``trainer.learner_backend=ray``)."""

    def step(self) -> None:
        if self.loss_module.actor_updated:
            super().step()


def twin_delayed(
    loss_class: type, cfg: DictConfig, ac: ActorCritic, **kwargs: Any
) -> tuple[LossModule, DelayedSoftUpdate]:
    """A twin-Q loss with clipped target policy smoothing (TorchRL's ``TD3Loss`` and its kin),
    its actor delayed to every ``algo.policy_delay`` critic steps, and the soft target updates
    that follow the actor; ``kwargs``: the loss's own further arguments."""
    loss = with_delayed_actor(loss_class, skips_actor=True)(
        ac.actor,
        ac.qvalue,
        action_spec=ac.actor.spec[ac.action_key],
        num_qvalue_nets=cfg.num_qvalue_nets,
        policy_noise=cfg.policy_noise,
        noise_clip=cfg.noise_clip,
        loss_function=cfg.loss_function,
        policy_delay=cfg.policy_delay,
        **kwargs,
    )
    return loss, DelayedSoftUpdate(loss, tau=cfg.tau)


def max_entropy(cfg: DictConfig, ac: ActorCritic) -> dict[str, Any]:
    """What SAC's loss shares with its continuous kin (REDQ, TQC, CrossQ) and its team
    versions: the number of critics, the initial temperature and the target entropy -|A|, from
    the action spec's last dim only (the spec carries the env batch dims too; a team's, the
    agent dim: each agent's own entropy)."""
    return {
        "num_qvalue_nets": cfg.num_qvalue_nets,
        "alpha_init": cfg.alpha_init,
        "target_entropy": -float(ac.actor.spec[ac.action_key].shape[-1]),
    }
