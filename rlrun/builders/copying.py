"""Can this policy be copied? And does the loss train the very policy the collector runs?

Collectors copy a policy to move it to another device (``copy.deepcopy``) or to send it to
worker processes (pickling). A module bound to hardware or holding a native handle (a lock, an
open file, a driver context) cannot be copied. Its class says so with one attribute::

    class MyPolicyNet(nn.Module):
        rlrun_copyable = False

and rlrun then never copies it: the collector runs it in place and the loss must train it in
place. Without the attribute, rlrun probes a copy of the module without its tensors (no
memory, no change to the policy) before any collector or worker process is built.
"""

from __future__ import annotations

import copy
import pickle
from typing import Literal

import torch
from torch import nn
from torchrl.objectives import LossModule

from rlrun.errors import ConfigError

COPYABLE_ATTR = "rlrun_copyable"


class _Discard:
    """A file that forgets what it is given."""

    def write(self, data: bytes) -> int:
        return len(data)


class _TensorsAside(pickle.Pickler):
    """Pickles into nothing, leaving tensors out: finds out whether the rest pickles."""

    def __init__(self) -> None:
        super().__init__(_Discard())

    def persistent_id(self, obj: object) -> int | None:
        return id(obj) if isinstance(obj, torch.Tensor) else None


def _copies(module: nn.Module, how: Literal["deepcopy", "pickle"]) -> Exception | None:
    """Copy ``module`` without its tensors (no memory, no change to it); the error if any."""
    try:
        if how == "deepcopy":
            tensors = [*module.parameters(), *module.buffers()]
            copy.deepcopy(module, memo={id(t): t for t in tensors})
        else:
            _TensorsAside().dump(module)
    except Exception as err:  # any failure of the user's object is the answer we want
        return err
    return None


def declared_not_copyable(module: nn.Module) -> str | None:
    """Name of the first submodule class that declares ``rlrun_copyable = False``, if any."""
    for sub in module.modules():
        if getattr(type(sub), COPYABLE_ATTR, True) is False:
            return type(sub).__name__
    return None


def copy_problem(module: nn.Module, how: Literal["deepcopy", "pickle"]) -> str | None:
    """Why ``module`` cannot be copied ``how``, naming the culprit class; None if it can."""
    declared = declared_not_copyable(module)
    if declared is not None:
        return f"{declared} declares {COPYABLE_ATTR} = False"
    err = _copies(module, how)
    if err is None:
        return None
    culprit = module
    while failing := [m for m in culprit.children() if _copies(m, how) is not None]:
        culprit = failing[0]  # the innermost module that still fails names the problem
    where = "" if culprit is module else f" (inside {type(module).__name__})"
    return f"{type(culprit).__name__}{where} failed to {how}: {type(err).__name__}: {err}"


def check_loss_trains_in_place(loss: LossModule, policy: nn.Module) -> None:
    """The collector runs ``policy`` itself: the loss must optimise its parameters, not copies.

    TorchRL's functional losses keep references to the module's parameters; a loss that copied
    them would train an object the collector never sees, so rlrun refuses to start.
    """
    trained = {id(p) for p in loss.parameters()}
    if any(p.requires_grad and id(p) not in trained for p in policy.parameters()):
        raise ConfigError(
            f"{type(loss).__name__} trains copies of the policy's parameters, but the collector "
            "runs the policy in place, so it would never see an update. Use a policy that can "
            "be copied and collector.policy_copy=always."
        )
