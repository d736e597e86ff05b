"""SAC with a fixed entropy temperature ``algo.alpha``, as the first SAC paper had it (Haarnoja et
al. 2018), where rlrun's ``algo=sac`` learns it (the automatic tuning of the follow-up paper).
TorchRL's ``SACLoss`` with ``fixed_alpha=True``: twin Q, no separate value network, soft target
updates, on rlrun's own TanhNormal actor and Q network.

The whole algorithm is this module: its keys (:class:`FixedAlphaSACConfig`), what it builds
(:func:`build`) and what it can do (``ALGORITHM``). Its YAML names it by ``_target_``:
``examples/my_conf/algo/fixed_alpha_sac.yaml``. Use it (from the repository root):
    PYTHONPATH=examples rlrun --config-dir examples/my_conf +experiment=fixed_alpha_sac

Nothing heavy at the top: rlrun reads ``ALGORITHM`` to validate a run before it imports torch
or TorchRL (a config mistake answers in under a second), so :func:`build` imports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from omegaconf import MISSING, DictConfig

from rlrun.algorithms import BOX, Algorithm, Data
from rlrun.config import POSITIVE, RegressionLoss, TargetNetConfig, ranged

if TYPE_CHECKING:
    from rlrun.builders.training import Context, Training


@dataclass
class FixedAlphaSACConfig(TargetNetConfig):
    """Its keys: rlrun's common ones (``_target_``, ``name``, ``gamma``, ``max_grad_norm``,
    ``compile``, ``cudagraphs``), the replay keys (``utd_ratio``, ``tau``), and its own."""

    alpha: float = ranged(**POSITIVE)  # the entropy temperature, fixed for the whole run
    num_qvalue_nets: int = ranged(1)  # critics; the target takes their minimum
    loss_function: RegressionLoss = MISSING  # Q regression: l2 | smooth_l1 | l1


def build(cfg: DictConfig, ctx: Context) -> Training:
    """The loss on ``ctx.ac.actor`` (a TanhNormal policy, explores by sampling) and
    ``ctx.ac.qvalue`` (copied ``num_qvalue_nets`` times by the loss), trained from the replay
    buffer; ``cfg`` is the composed ``algo`` node, checked against the schema above."""
    from torchrl.objectives import SACLoss

    from rlrun.builders.offpolicy import off_policy, require_qvalue

    require_qvalue(ctx.ac, cfg.name)
    loss = SACLoss(
        ctx.ac.actor,
        ctx.ac.qvalue,
        num_qvalue_nets=cfg.num_qvalue_nets,
        loss_function=cfg.loss_function,
        alpha_init=cfg.alpha,
        fixed_alpha=True,  # the one difference from algo=sac: log(alpha) is a buffer, not learned
        delay_qvalue=True,  # target critics, soft-updated with algo.tau
    )
    # TD(0) targets with algo.gamma, round(utd_ratio * frames_per_batch) steps per batch, soft
    # target updates after each step
    return off_policy(cfg, loss, ctx.frames_per_batch)


ALGORITHM = Algorithm(
    build=build,
    networks="rlrun.builders.policies.make_stochastic_actor_q",  # used when policy._target_=null
    summary="SAC with a fixed entropy temperature (algo.alpha): TanhNormal actor, twin Q",
    schema=FixedAlphaSACConfig,
    actions=(BOX,),  # a TanhNormal actor: continuous actions only
    data=Data.OFF_POLICY,  # a replay buffer of collected frames (the default, said here)
)
