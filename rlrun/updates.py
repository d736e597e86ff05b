"""The learner's update: the optimiser (``optim`` group) and one optimisation step as one function
(``algo.compile``, ``algo.cudagraphs``).

Every optimisation step is the same: loss forward, backward of the sum of the ``loss_*`` terms,
gradient clipping to ``algo.max_grad_norm``, optimiser step. :class:`UpdateStep` runs it as the
Trainer's ``OptimizationStepper``, as one function that can be compiled (``torch.compile``) and,
on CUDA, captured in a CUDA graph (tensordict's ``CudaGraphModule``), the way LeanRL and TorchRL's
own recipes make small-network RL fast on a GPU. The gradient norm stays a tensor: no step waits
for the GPU (TorchRL's default optimizer hook reads it back with ``float()`` every step).
"""

from __future__ import annotations

from typing import Any

import torch
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tensordict import TensorDictBase
from tensordict.nn import CudaGraphModule
from torchrl.objectives import LossModule
from torchrl.trainers import OptimizationStepper, Trainer

from rlrun.devices import Placement
from rlrun.errors import ConfigError, RunError

CUDAGRAPH_WARMUP = 5  # eager steps before capture (compiled code must settle first), as LeanRL


def make_optimizer(cfg: DictConfig, loss: LossModule, where: Placement, cudagraphs: bool):
    """``optim._target_`` over the loss's parameters (``optim.kwargs`` passed through).

    For a CUDA graph the optimiser must be ``capturable`` and its learning rate a tensor on the
    learner: a captured step replays the lr it was captured with unless it reads it from memory
    (``optim.anneal_lr`` then updates that tensor in place).
    """
    kwargs = OmegaConf.to_container(cfg, resolve=True)
    kwargs.pop("anneal_lr")
    kwargs.update(kwargs.pop("kwargs"))
    if cudagraphs:
        kwargs["capturable"] = True
        kwargs["lr"] = torch.tensor(float(kwargs["lr"]), device=where.learner)
    try:
        return instantiate(kwargs, params=list(loss.parameters()))
    except InstantiationException as err:
        why = str(err.__cause__ or err).splitlines()[0]
        extra = " (algo.cudagraphs=true needs an optimiser with capturable=True, e.g. Adam)"
        raise ConfigError(
            f"optim._target_={cfg._target_} could not be built: {why}{extra if cudagraphs else ''}"
        ) from None


class NonFiniteLoss(RunError):
    """A loss term became NaN or inf: the run stops with status ``failed``."""


class UpdateStep(OptimizationStepper):
    """One optimisation step: loss, backward, clip, optimiser step; compiled or captured on request.

    After the step, the Trainer's ``post_loss`` hooks see the batch with the loss's priority key
    (``td_error``) written in, so a prioritized replay buffer updates its priorities as before.
    Non-finite loss terms are noted on the device (no host sync per step) and checked once per
    batch, before the trained weights reach the collector or a checkpoint (:meth:`register`).
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
    ) -> None:
        self.loss = loss
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.max_norm = float("inf") if max_grad_norm is None else float(max_grad_norm)
        self.priority_key = getattr(getattr(loss, "tensor_keys", None), "priority", None)
        self.device = device
        self.cudagraphs = cudagraphs
        update = self.update
        if compile:
            update = torch.compile(update)
        if cudagraphs:
            update = CudaGraphModule(update, in_keys=[], out_keys=[], warmup=CUDAGRAPH_WARMUP)
        self._update = update
        self.nonfinite: dict[str, torch.Tensor] = {}  # loss term -> "was NaN/inf" this batch

    def update(self, batch: TensorDictBase) -> TensorDictBase:
        """The step itself; returns the detached loss terms (plus ``grad_norm`` and the
        priorities the loss wrote into ``batch``)."""
        self.optimizer.zero_grad(set_to_none=True)
        losses = self.loss(batch)
        sum(value for key, value in losses.items() if key.startswith("loss")).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.max_norm)
        self.optimizer.step()
        out = losses.detach()
        out.set("grad_norm", grad_norm.detach())
        if self.priority_key is not None and self.priority_key in batch.keys():
            out.set(self.priority_key, batch.get(self.priority_key).detach())
        return out

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        # A captured graph copies its input into fixed buffers on the learner's device: every
        # entry must be there (a sampler's ``index`` may not be). ``sub_batch`` keeps its own for
        # the priority update.
        batch = sub_batch.to(self.device, non_blocking=True) if self.cudagraphs else sub_batch
        try:
            out = self._update(batch)
        except Exception:  # e.g. sampling from NaN weights: report the NaN, not its symptom
            self.check_finite(trainer)
            raise
        if self.priority_key is not None and self.priority_key in out.keys():
            sub_batch.set(self.priority_key, out.pop(self.priority_key))
        trainer._post_loss_hook(sub_batch)  # the Trainer's own post_loss stage (priorities)
        for key, value in out.items():
            if key.startswith("loss"):
                bad = ~torch.isfinite(value).all()
                self.nonfinite[key] = self.nonfinite[key] | bad if key in self.nonfinite else bad
        return out

    def check_finite(self, trainer: Trainer) -> None:
        """Stop the run if a loss term was NaN or inf in this batch's steps: its weights are
        broken, so they are neither sent to the collector nor saved (the last checkpoint holds
        the last good ones)."""
        bad = [key for key, flag in self.nonfinite.items() if flag.item()]
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

    def state_dict(self) -> dict[str, Any]:
        return {}  # the optimiser is saved by the Trainer itself

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass
