"""Trainer hooks rlrun always registers: episode statistics, loss logging, LR annealing.

Every metric is logged against collected frames (the Trainer's step), under ``train/...``.
Each hook has ``state_dict``/``load_state_dict`` so a resumed run continues its statistics.
"""

from __future__ import annotations

import math
import time
from typing import Any

import torch
from tensordict import TensorDictBase
from torchrl.trainers import Trainer, TrainerHookBase

import rlrun


class EpisodeStats(TrainerHookBase):
    """Mean return and length of the episodes that ended in each batch, and frames per second.

    It also keeps what ``summary.json`` reports (last and best return, wall time, frames).
    """

    def __init__(self) -> None:
        self.trainer: Trainer | None = None
        self.return_last: float | None = None
        self.return_best: float | None = None
        self.eval_return_last: float | None = None
        self.wall_time_s = 0.0
        self.first_batch_s: float | None = None
        self._t_last: float | None = None
        self._frames_last = 0
        self._return_now: float | None = None

    def episodes(self, batch: TensorDictBase) -> dict[str, Any] | None:
        done = batch.get(("next", "done")).squeeze(-1)
        now = time.perf_counter()
        frames = self.trainer.collected_frames
        if self._t_last is None:  # first batch: time from the trainer's start
            self._t_last = self._t_start
            self.first_batch_s = time.time() - rlrun.LAUNCHED_AT
        dt = now - self._t_last
        self.wall_time_s += dt
        fps = (frames - self._frames_last) / dt if dt > 0 else math.nan
        self._t_last, self._frames_last = now, frames
        out: dict[str, Any] = {"train/fps": fps, "train/wall_time_s": self.wall_time_s}
        self._return_now = None
        if done.any():
            returns = batch.get(("next", "episode_reward")).squeeze(-1)[done]
            lengths = batch.get(("next", "step_count")).squeeze(-1)[done]
            self.return_last = self._return_now = returns.float().mean().item()
            self.return_best = max(self.return_best or -math.inf, self.return_last)
            out["train/episode_length"] = lengths.float().mean().item()
        return out

    def returns(self, batch: TensorDictBase) -> dict[str, Any] | None:
        """Mean return of the batch's finished episodes, also shown on the progress bar."""
        if self._return_now is None:
            return None
        return {"train/episode_return": self._return_now, "log_pbar": True}

    def start_clock(self) -> None:
        self._t_start = time.perf_counter()
        self._frames_last = self.trainer.collected_frames

    def stop_clock(self) -> None:
        """Count the last batch's optimisation time too."""
        if self._t_last is not None:
            self.wall_time_s += time.perf_counter() - self._t_last
            self._t_last = None

    def state_dict(self) -> dict[str, Any]:
        return {
            "return_last": self.return_last,
            "return_best": self.return_best,
            "eval_return_last": self.eval_return_last,
            "wall_time_s": self.wall_time_s,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for key, value in state_dict.items():
            setattr(self, key, value)

    def register(self, trainer: Trainer, name: str = "episode_stats") -> None:
        self.trainer = trainer
        trainer.register_module(name, self)
        trainer.register_op("setup", self.start_clock)
        trainer.register_op("shutdown", self.stop_clock)
        trainer.register_op("pre_steps_log", self.episodes)
        trainer.register_op("pre_steps_log", self.returns)


class LossLog(TrainerHookBase):
    """Log each loss term, averaged over the batch's optimisation steps, as ``train/<key>``."""

    def __call__(self, optim_steps: int, average_losses: TensorDictBase | None) -> dict | None:
        if average_losses is None:
            return None
        out = {f"train/{k}": v.mean().item() for k, v in average_losses.items()}
        out["train/optim_steps"] = optim_steps
        return out

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "loss_log") -> None:
        trainer.register_op("post_optim_complete_log", self)


class LinearLRAnnealing(TrainerHookBase):
    """Decay every param group's learning rate linearly to 0 over ``total_frames``."""

    def __init__(self, optimizer: torch.optim.Optimizer, total_frames: int) -> None:
        self.optimizer = optimizer
        self.total_frames = total_frames
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.trainer: Trainer | None = None

    def __call__(self) -> None:
        frac = max(0.0, 1.0 - self.trainer.collected_frames / self.total_frames)
        for group, base in zip(self.optimizer.param_groups, self.base_lrs, strict=True):
            group["lr"] = base * frac

    def log(self, batch: TensorDictBase) -> dict[str, Any]:
        return {"train/lr": self.optimizer.param_groups[0]["lr"]}

    def state_dict(self) -> dict[str, Any]:
        return {"base_lrs": self.base_lrs}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.base_lrs = state_dict["base_lrs"]

    def register(self, trainer: Trainer, name: str = "lr_annealing") -> None:
        self.trainer = trainer
        trainer.register_module(name, self)
        trainer.register_op("post_steps", self)
        trainer.register_op("post_steps_log", self.log)
