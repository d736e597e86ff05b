"""PPO (``algo=ppo``): TorchRL's ``ClipPPOLoss`` with GAE, fed minibatches of each fresh batch.

The loss comes with the hook that computes advantages over the collected batch and cuts it into
minibatches (whole sequences for a recurrent policy; ``rlrun/builders/onpolicy.py``, shared with
the other on-policy algorithms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data
from rlrun.algorithms.minibatches import check_minibatches
from rlrun.config import ClipPPOConfig
from rlrun.errors import ConfigError

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


def build(cfg: DictConfig, ctx: Context) -> Training:
    """Clipped PPO on the actor and critic of ``ac``; ``ctx.fresh_batches``: each batch was
    collected with the weights of the previous update (not so for an async collector)."""
    from rlrun.builders.onpolicy import on_policy, require_critic
    from rlrun.compat.torchrl import CapturablePPOLoss

    require_critic(ctx.ac, cfg.name)
    loss = CapturablePPOLoss(
        ctx.ac.actor,
        ctx.ac.critic,
        clip_epsilon=cfg.clip_epsilon,
        entropy_coeff=cfg.entropy_coef,
        critic_coeff=cfg.critic_coef,
        normalize_advantage=cfg.normalize_advantage,
        loss_critic_type="l2",
    )
    if ctx.ac.recurrent and not ctx.ac.recurrent_mode["loss"]:
        raise ConfigError(
            f"policy.recurrent_mode.loss=false is not valid with algo={cfg.name}: TorchRL's PPO "
            "loss replays whole sequences (it sets the mode itself); set it to true."
        )
    return on_policy(
        cfg,
        loss,
        ctx,
        cfg.minibatch_size,
        epochs=cfg.epochs,
        sequence_length=cfg.sequence_length,
        logprob_check_tol=cfg.logprob_check_tol,
    )


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_actor_critic",
    summary="Clipped PPO with GAE, minibatches of each fresh batch; MLP, LSTM, GRU or CNN",
    schema=ClipPPOConfig,
    data=Data.ON_POLICY,
    sequences=True,
    cudagraphs=True,
    check=check_minibatches,
)
