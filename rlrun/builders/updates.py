"""The learner's update: the optimiser (``optim`` group) and one optimisation step as one function
(``algo.compile``, ``algo.cudagraphs``).

Every optimisation step is the same: loss forward, backward of the sum of the ``loss_*`` terms,
gradient clipping to ``algo.max_grad_norm``, optimiser step; off-policy with uniform replay, the
sample before it and the soft target update after it. :class:`UpdateStep` runs it as the
Trainer's ``OptimizationStepper``, as one function that can be compiled (``torch.compile``) and,
on CUDA, captured in a CUDA graph (tensordict's ``CudaGraphModule``), the way LeanRL and TorchRL's
own recipes make small-network RL fast on a GPU. The gradient norm stays a tensor: no step waits
for the GPU (TorchRL's default optimizer hook reads it back with ``float()`` every step).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDictBase
from tensordict.nn import CudaGraphModule
from torchrl.objectives import LossModule, SoftUpdate
from torchrl.objectives.utils import TargetNetUpdater
from torchrl.trainers import OptimizationStepper, Trainer

from rlrun.builders.buffers import UniformSampler
from rlrun.builders.devices import Placement, synchronize
from rlrun.builders.tensor_losses import batch_keys
from rlrun.compat.torchrl import run_post_loss_hooks
from rlrun.errors import ConfigError, RunError

CUDAGRAPH_WARMUP = 5  # eager steps before capture (compiled code must settle first), as LeanRL


def make_optimizer(
    cfg: DictConfig, loss: LossModule, where: Placement, *, cudagraphs: bool, compile: bool
):
    """``optim._target_`` over the loss's parameters (``optim.kwargs`` passed through).

    For a CUDA graph the optimiser must be ``capturable``. Compiled or captured, its learning
    rate is a tensor on the learner: a captured step replays the lr it was captured with unless
    it reads it from memory, and torch.compile guards on a float lr, so each new value of an
    annealed lr compiled the step again (``optim.anneal_lr`` updates that tensor in place).

    An optimiser that has a fused implementation (torch's Adam, AdamW, SGD) gets it unless
    ``optim.kwargs`` picks ``fused`` or ``foreach`` itself: one kernel for all parameters
    instead of a Python loop over them (Adam's step over SAC's networks on one CPU thread:
    1.04 ms per-tensor, 0.26 ms fused, measured 2026-11-25).
    """
    kwargs = OmegaConf.to_container(cfg, resolve=True)
    kwargs.pop("anneal_lr")
    kwargs.update(kwargs.pop("kwargs"))
    if not {"fused", "foreach"} & kwargs.keys() and has_fused(kwargs["_target_"]):
        kwargs["fused"] = True
    if cudagraphs:
        kwargs["capturable"] = True
    if cudagraphs or compile:
        kwargs["lr"] = torch.tensor(float(kwargs["lr"]), device=where.learner)
    try:
        return instantiate(kwargs, params=list(loss.parameters()))
    except InstantiationException as err:
        why = str(err.__cause__ or err).splitlines()[0]
        extra = " (algo.cudagraphs=true needs an optimiser with capturable=True, e.g. Adam)"
        raise ConfigError(
            f"optim._target_={cfg._target_} could not be built: {why}{extra if cudagraphs else ''}"
        ) from None


def has_fused(target: str) -> bool:
    """Whether the optimiser class ``target`` takes ``fused=True`` (torch's own, not a user's)."""
    if not target.startswith("torch.optim."):
        return False
    try:
        cls = get_class(target)
    except Exception:  # a wrong name: instantiate reports it below
        return False
    return "fused" in inspect.signature(cls).parameters


class NonFiniteLoss(RunError):
    """A loss term became NaN or inf: the run stops with status ``failed``."""


class UpdateStep(OptimizationStepper):
    """One optimisation step: loss, backward, clip, optimiser step; compiled or captured on request.

    Off-policy, the step is fused: with a ``sampler`` (a uniform replay sample read straight from
    the storage, ``rlrun/builders/buffers.py``) it samples its own batch, and a soft target update
    (one foreach lerp) ends it, so sample, loss, backward, clip, optimiser step and target update
    are one function that compiles and captures. What has Python state stays outside that function,
    stepped here between two calls: a hard target copy (its counter), TD3's actor delay (the
    loss's ``begin_step`` picks one of two functions, each captured on its own; a step for which
    the loss is not ``steady`` runs eagerly), the learning rate (a tensor, annealed in place by
    its hook).

    Without a sampler (PPO's minibatches, prioritized or slice replay), the Trainer's
    ``process_optim_batch`` hooks hand the batch in, and its ``post_loss`` hooks see it afterwards
    with the loss's priority key (``td_error``) written in, so a prioritized replay buffer
    updates its priorities as before. Non-finite loss terms are noted on the device (no host sync
    per step) and checked once per batch, before the trained weights reach the collector or a
    checkpoint (:meth:`register`). The time of the first calls of each compiled or captured
    function (compilation, capture) is kept apart in ``warmup_s``.
    """

    def __init__(
        self,
        loss: LossModule,
        optimizer: torch.optim.Optimizer,
        max_grad_norm: float | None,
        device: torch.device,
        *,
        compile: bool = False,
        cudagraphs: bool = False,
        sampler: UniformSampler | None = None,
        target_updater: TargetNetUpdater | None = None,
    ) -> None:
        self.loss = loss
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.max_norm = float("inf") if max_grad_norm is None else float(max_grad_norm)
        self.priority_key = getattr(getattr(loss, "tensor_keys", None), "priority", None)
        self.device = device
        self.compile = compile
        self.cudagraphs = cudagraphs
        self.sampler = sampler
        if sampler is not None:
            sampler.read_only(batch_keys(loss))
        # a soft update is a lerp of tensors: inside the function; anything else after it
        soft = isinstance(target_updater, SoftUpdate)
        self.inner_target = target_updater if soft else None
        self.outer_target = None if soft else target_updater
        self.begin = getattr(loss, "begin_step", None)  # TD3: counts steps, picks the phase
        if self.begin is not None:
            loss.stepped_outside = True
        self.functions: dict[Any, Callable] = {}  # phase -> compiled or captured step
        self.calls: dict[Any, int] = {}
        self.warmup_calls = CUDAGRAPH_WARMUP + 1 if cudagraphs else 2 if compile else 0
        self.warmup_s = 0.0
        # loss term -> the sum of its values this batch, each times 0: NaN where one was NaN or inf
        # (one op a step and term)
        self.nonfinite: dict[str, torch.Tensor] = {}

    def function(self, phase: Any) -> Callable:
        """The step for ``phase``, compiled and captured on first use."""
        if phase not in self.functions:
            if self.inner_target is not None:
                self.inner_target.pairs()  # eagerly: the compiled step only lerps them
            update = self.update if self.sampler is None else self.fused_update
            if self.compile:
                # TorchRL's losses set their in_keys on first read; read inside the compiled
                # step, that first read compiled it a second time (DQNLoss, 2026-11-28)
                getattr(self.loss, "in_keys", None)
                update = torch.compile(update)
            if self.cudagraphs:  # fused: no input (in_keys None); else the batch's tensors
                keys = None if self.sampler is not None else []
                update = CudaGraphModule(
                    update, in_keys=keys, out_keys=keys, warmup=CUDAGRAPH_WARMUP
                )
            self.functions[phase] = update
            self.calls[phase] = 0
        return self.functions[phase]

    def update(self, batch: TensorDictBase) -> TensorDictBase:
        """The step itself; returns the detached loss terms (plus ``grad_norm`` and the
        priorities the loss wrote into ``batch``)."""
        self.optimizer.zero_grad(set_to_none=True)
        losses = self.loss(batch)
        sum(value for key, value in losses.items() if key.startswith("loss")).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()
        if self.inner_target is not None:
            self.inner_target.step()
        out = losses.detach()
        out.set("grad_norm", grad_norm.detach())
        has_priority = self.priority_key is not None and self.priority_key in batch.keys()
        if has_priority and self.sampler is None:  # a fused uniform sample has no priorities
            out.set(self.priority_key, batch.get(self.priority_key).detach())
        return out

    def fused_update(self) -> TensorDictBase:
        """Sample, then :meth:`update`: the whole off-policy step as one function."""
        return self.update(self.sampler.sample())

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        phase = self.begin() if self.begin is not None else None
        if getattr(self.loss, "steady", True):
            update = self.function(phase)
            warming = self.calls[phase] < self.warmup_calls
        else:  # unlike the later steps of its phase (TD3's first step): not compiled
            update = self.update if self.sampler is None else self.fused_update
            warming = False
        started = time.perf_counter() if warming else 0.0
        try:
            if self.sampler is not None:  # ``sub_batch``: the collected batch, not trained on
                out = update()
            else:
                # A captured graph copies its input into fixed buffers on the learner's device:
                # every entry must be there (a sampler's ``index`` may not be). ``sub_batch``
                # keeps its own for the priority update.
                batch = sub_batch
                if self.cudagraphs:
                    batch = sub_batch.to(self.device, non_blocking=True)
                out = update(batch)
        except Exception:  # e.g. sampling from NaN weights: report the NaN, not its symptom
            self.check_finite(trainer)
            raise
        if warming:
            synchronize(self.device)
            self.warmup_s += time.perf_counter() - started
            self.calls[phase] += 1
        if self.outer_target is not None:
            self.outer_target.step()
        if self.sampler is None:
            if self.priority_key is not None and self.priority_key in out.keys():
                sub_batch.set(self.priority_key, out.pop(self.priority_key))
            run_post_loss_hooks(trainer, sub_batch)  # the Trainer's post_loss stage (priorities)
        for key, value in out.items():
            if key.startswith("loss"):  # NaN from this step on where a term is NaN or inf
                seen = self.nonfinite.get(key)
                self.nonfinite[key] = value * 0 if seen is None else seen.add(value, alpha=0)
        return out

    def check_finite(self, trainer: Trainer) -> None:
        """Stop the run if a loss term was NaN or inf in this batch's steps: its weights are
        broken, so they are neither sent to the collector nor saved (the last checkpoint holds
        the last good ones)."""
        bad = [key for key, flag in self.nonfinite.items() if flag.isnan().any().item()]
        self.nonfinite.clear()
        if bad:
            raise NonFiniteLoss(
                f"{', '.join(bad)} became NaN or inf in the batch ending at frame "
                f"{trainer.collected_frames}; the run stopped and saved nothing from this batch "
                "(the last checkpoint holds the last good weights). Lower optim.lr or "
                "algo.max_grad_norm, then resume= that run."
            )

    def register(self, trainer: Trainer, name: str = "optimization_stepper") -> None:
        """Called by the Trainer as it is built, so the check is the first ``post_steps`` hook:
        before weight syncs, annealing and saves."""
        super().register(trainer, name)
        trainer.register_op("post_steps", lambda: self.check_finite(trainer))
        if self.warmup_calls:
            trainer.register_op("post_steps_log", self.log)

    def log(self, batch: TensorDictBase) -> dict[str, float]:
        """Compilation and capture time so far, apart from the training speed, and with compile
        the graphs torch.compile has built in this process: a count that still grows after the
        first batch means recompiles (a guard on a changing Python value)."""
        out = {"train/update_warmup_s": self.warmup_s}
        if self.compile:
            from torch._dynamo.utils import counters

            out["train/compiled_graphs"] = counters["stats"]["unique_graphs"]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}  # the optimiser is saved by the Trainer itself

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass
