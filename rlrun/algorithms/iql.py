"""IQL (``algo=iql``; Kostrikov et al. 2021): implicit Q-learning, continuous or discrete by the
env's action space. TorchRL's ``IQLLoss`` or ``DiscreteIQLLoss``: V(s) fitted by expectile
regression (``algo.expectile``) to Q(s, a) of dataset actions only, Q to r + gamma V(s'), the
actor by advantage-weighted regression (``algo.temperature``); soft target updates of Q. Its
networks (``rlrun.builders.policies.make_iql_networks``) add V(s) to SAC's or discrete SAC's."""

from __future__ import annotations

import torch
from omegaconf import DictConfig
from torchrl.objectives import DiscreteIQLLoss, IQLLoss

from rlrun.algorithms.base import Algorithm
from rlrun.algorithms.offpolicy import off_policy, require_qvalue
from rlrun.builders.policies import ActorCritic
from rlrun.errors import ConfigError


def make_iql(
    cfg: DictConfig, ac: ActorCritic, frames_per_batch: int, device: torch.device, _fresh: bool
) -> Algorithm:
    """IQL on ``ac.actor``, ``ac.qvalue`` and ``ac.critic`` (V(s))."""
    require_qvalue(ac, "iql", "make_iql_networks", "iql")
    if ac.critic is None:
        raise ConfigError(
            "algo=iql needs a state-value network too: set "
            "policy._target_=rlrun.builders.policies.make_iql_networks (or start from +experiment=iql)."
        )
    spec = ac.actor.spec["action"]
    common = {
        "num_qvalue_nets": cfg.num_qvalue_nets,
        "loss_function": cfg.loss_function,
        "temperature": cfg.temperature,
        "expectile": cfg.expectile,
    }
    if spec.domain == "discrete":
        loss = DiscreteIQLLoss(ac.actor, ac.qvalue, ac.critic, action_space=spec, **common)
        loss.set_keys(state_action_value="action_value")  # Q(s, .) of discrete SAC's network
    else:
        loss = IQLLoss(ac.actor, ac.qvalue, ac.critic, **common)
    return off_policy(cfg, loss, frames_per_batch)
