"""PPO (``algo=ppo``): TorchRL's ``ClipPPOLoss`` with GAE, fed minibatches of each fresh batch.

``make_ppo`` returns the loss plus the hook that computes advantages over the collected batch and
cuts it into minibatches (whole sequences for a recurrent policy; ``onpolicy.py``, shared with A2C).
"""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torch.distributions import Distribution
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.ppo import CompositeDistribution, has_analytic_entropy, sample_and_log_prob

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.onpolicy import OnPolicyBatches, log_prob_error, make_gae, require_critic
from rlrun.builders.devices import capturing
from rlrun.builders.policies import ActorCritic
from rlrun.errors import ConfigError

__all__ = ["CapturablePPOLoss", "entropy_without_sync", "log_prob_error", "make_ppo"]


class CapturablePPOLoss(ClipPPOLoss):
    """``ClipPPOLoss`` whose entropy term can be captured in a CUDA graph without compile.

    TorchRL falls back to a sampled entropy where the analytic one is not finite, and decides so
    with ``if not entropy.isfinite().all()``: a host sync, which CUDA graph capture refuses
    ("operation not permitted when stream is capturing"; Categorical, i.e. CartPole, has an
    analytic entropy). Under compile TorchRL already picks per element with ``torch.where``;
    while capturing eagerly, this does the same.
    """

    def _get_entropy(self, dist: Distribution, adv_shape: torch.Size) -> torch.Tensor:
        if (
            # compiled: TorchRL's own picks per element; asked first, so that dynamo never
            # traces ``capturing()``, whose answer changes at capture and recompiled the step
            # there, which capture refuses (``algo.compile=true algo.cudagraphs=true``, H200)
            torch.compiler.is_compiling()
            or not capturing()
            or isinstance(dist, CompositeDistribution)
            or not has_analytic_entropy(dist)
        ):
            return super()._get_entropy(dist, adv_shape)
        return entropy_without_sync(dist, self.samples_mc_entropy).unsqueeze(-1)


def entropy_without_sync(dist: Distribution, samples: int) -> torch.Tensor:
    """The analytic entropy where it is finite, else a ``samples``-sample estimate: per
    element, with no host sync."""
    entropy = dist.entropy()
    _, log_prob = sample_and_log_prob(dist, (samples,), reparameterize=dist.has_rsample)
    return torch.where(entropy.isfinite(), entropy, -log_prob.mean(0))


def make_ppo(
    cfg: DictConfig,
    ac: ActorCritic,
    frames_per_batch: int,
    device: torch.device,
    fresh_batches: bool,
) -> Algorithm:
    """Clipped PPO on the actor and critic of ``ac``; ``fresh_batches``: each batch was collected
    with the weights of the previous update (not so for an async collector)."""
    require_critic(ac, "ppo")
    loss = CapturablePPOLoss(
        ac.actor,
        ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    if ac.recurrent and not ac.recurrent_mode["loss"]:
        raise ConfigError(
            "policy.recurrent_mode.loss=false is not valid with algo=ppo: TorchRL's PPO loss "
            "replays whole sequences (it sets the mode itself); set it to true."
        )
    advantage = make_gae(cfg, ac, loss)
    hook = OnPolicyBatches(
        advantage,
        loss,
        ac,
        cfg.minibatch_size,
        frames_per_batch,
        cfg.sequence_length,
        cfg.logprob_check_tol,
        device,
        fresh_batches,
    )
    return Algorithm(
        loss=loss,
        optim_steps_per_batch=frames_per_batch // cfg.minibatch_size,
        num_epochs=cfg.epochs,
        max_grad_norm=cfg.max_grad_norm,
        hooks=[hook],
        advantage=advantage,
    )
