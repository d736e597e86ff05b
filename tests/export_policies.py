"""A policy for tests/test_export.py, imported by ``_target_`` in rlrun processes: it acts in
Python, but a branch on a tensor's value leaves no graph to export."""

from __future__ import annotations

import torch
from torch import nn

from rlrun.builders.policies import ActorCritic, make_actor_critic


class SignFlip(nn.Module):
    """Negates the logits when they sum below zero: a Python ``if`` on data."""

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        if logits.sum() < 0:
            return -logits
        return logits


def build_branching(**kwargs) -> ActorCritic:
    """rlrun's MLP actor-critic with :class:`SignFlip` after the actor's network."""
    ac = make_actor_critic(**kwargs)
    trunk = ac.actor.module[0]
    trunk.module = nn.Sequential(trunk.module, SignFlip())
    return ac
