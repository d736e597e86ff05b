"""Every patch of tensordict that rlrun applies, in one place, applied on import (of
``rlrun.builders.envs`` and ``rlrun.builders.policies``, so in collector workers too).

Each entry names the tensordict version it was checked against and why the public API does not
serve; ``tests/test_compat.py`` fails with a message naming the entry when an upgrade changes
what it relies on. Nothing else in rlrun touches a ``_private`` name of tensordict.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

CHECKED = "tensordict 0.14.3"

ORIGINAL_FROM_ANY = TensorDictBase.from_any.__func__  # the unpatched classmethod's function


def tensor_first_from_any(cls: type, obj: Any, **kwargs: Any) -> Any:
    """``TensorDictBase.from_any``, returning a tensor at once (unchanged, as the original
    returns it after its search).

    ``TensorDictModule`` passes every output tensor through ``from_any``, which, for a plain
    tensor, tries each container type in turn and then asks ``importlib.util.find_spec
    ("pandas")``: without pandas installed, that is a search of every ``sys.path`` entry on each
    call. SAC's loss writes about 10 outputs a step; on 2026-11-25 ``from_any`` took 3.8% of a
    ``+experiment=sac_mujoco`` run on the CPU (py-spy). Patched (tensordict 0.14.3):
    ``TensorDictBase.from_any``, replaced on the class; ``TensorDictModule`` calls it with no
    option to skip the conversion."""
    if isinstance(obj, torch.Tensor):
        return obj  # what the original returns for a tensor, after its search
    return ORIGINAL_FROM_ANY(cls, obj, **kwargs)


if not getattr(TensorDictBase.from_any, "_rlrun", False):
    tensor_first_from_any._rlrun = True
    TensorDictBase.from_any = classmethod(tensor_first_from_any)
