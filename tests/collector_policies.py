"""Policies for tests/test_collectors.py, imported by ``policy._target_`` in rlrun subprocesses.

``build_locked`` is the example's lock-holding policy *without* the ``rlrun_copyable = False``
declaration, so rlrun must find out by itself that it cannot be copied. With ``trace_dir``,
each process that runs a network appends ``<process name> <weight checksum> <garbage
collector on> <objects frozen>`` to its own file whenever the checksum changes: a test reads
which processes ran the policy, whether the weights they ran changed, and how the process
left Python's garbage collector.
"""

from __future__ import annotations

import functools
import gc
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from my_lab.policies import LockedMLP, actor_critic

from rlrun.builders.policies import ActorCritic


class UndeclaredLockedMLP(LockedMLP):
    """Holds a lock like LockedMLP but does not say so: deepcopy and pickle simply fail."""

    rlrun_copyable = True

    def __init__(self, *args, trace_dir: str | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.trace_dir = trace_dir
        self.last: float | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.trace_dir is not None:
            checksum = round(sum(p.sum().item() for p in self.parameters()), 4)
            if checksum != self.last:
                self.last = checksum
                name = multiprocessing.current_process().name
                with open(Path(self.trace_dir) / f"{os.getpid()}.txt", "a") as f:
                    f.write(f"{name} {checksum} {gc.isenabled()} {gc.get_freeze_count()}\n")
        return super().forward(x)


def build_locked(
    *,
    observation_spec,
    action_spec,
    device,
    hidden_sizes: Sequence[int] = (16,),
    trace_dir: str | None = None,
    **_: object,
) -> ActorCritic:
    """The example policy, undeclared (and traced when ``trace_dir`` is given)."""
    make_net = functools.partial(
        UndeclaredLockedMLP, hidden_sizes=list(hidden_sizes), trace_dir=trace_dir
    )
    return actor_critic(observation_spec, action_spec, device, make_net)
