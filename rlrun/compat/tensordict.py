"""A fix to tensordict 0.14.3 that rlrun applies on import (of ``rlrun.builders.envs`` and
``rlrun.builders.policies``, so in collector workers too).

``TensorDictModule`` passes every output tensor through ``TensorDict.from_any``, which, for a
plain tensor, tries each container type in turn and then asks ``importlib.util.find_spec
("pandas")``: without pandas installed, that is a search of every ``sys.path`` entry on each
call. SAC's loss writes about 10 outputs a step; on 2026-11-25 ``from_any`` took 3.8% of a
``+experiment=sac_mujoco`` run on the CPU (py-spy). A tensor is returned unchanged by
``from_any`` in any case: here it is returned before the search.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

_from_any = TensorDictBase.from_any.__func__


def _tensor_first_from_any(cls: type, obj: Any, **kwargs: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj  # what the original returns for a tensor, after its search
    return _from_any(cls, obj, **kwargs)


if not getattr(TensorDictBase.from_any, "_rlrun", False):
    _tensor_first_from_any._rlrun = True
    TensorDictBase.from_any = classmethod(_tensor_first_from_any)
