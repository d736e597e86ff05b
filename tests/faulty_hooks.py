"""A user's buggy hook for tests/test_updates.py, imported by ``_target_`` in rlrun processes."""

from __future__ import annotations

from tensordict import TensorDictBase


class ZeroStdAdvantages:
    """``process_optim_batch`` hook that standardises PPO's advantages by their std; after
    ``after`` minibatches the advantages are constant, and 0 / 0 makes them NaN."""

    def __init__(self, after: int) -> None:
        self.after = after
        self.calls = 0

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        self.calls += 1
        advantage = batch.get("advantage")
        if self.calls > self.after:
            advantage = advantage * 0
        centred = advantage - advantage.mean()
        batch.set("advantage", centred / centred.std())
        return batch


class FailsToBuild:
    """A user hook whose constructor raises (``fail``): the run fails after its loggers
    started. Otherwise it does nothing at its hook point."""

    def __init__(self, fail: bool = True) -> None:
        if fail:
            raise RuntimeError("this hook is broken")

    def __call__(self, *args: object) -> None:
        pass
