"""Progress where no terminal reads it: a plain line every ``trainer.progress_every_s`` seconds.

TorchRL's Trainer draws a tqdm bar, which redraws itself with carriage returns: in a file that
SLURM, joblib or ``nohup`` keeps, each redraw is kept too (a 100k-frame PPO run wrote 296 of
them, 59 KB, 2026-11-26). When stderr is not a terminal, rlrun turns the bar off and prints
these lines instead, after a batch, at most one per interval.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta

from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.hooks import EpisodeStats


def wants_lines(progress_bar: bool) -> bool:
    """Whether progress comes as plain lines: asked for, and no terminal on stderr (where tqdm
    draws its bar)."""
    return progress_bar and not sys.stderr.isatty()


class ProgressLines(TrainerHookBase):
    """``rlrun: progress: 51200/100000 frames (51%), 1234 frames/s, return 123.4, ETA 0:00:40``
    on stdout, flushed: frames/s over the interval since the previous line, the mean return of
    the last batch that ended episodes, the time left at that pace."""

    def __init__(self, stats: EpisodeStats, every_s: float) -> None:
        self.stats = stats
        self.every_s = every_s
        self.trainer: Trainer | None = None
        self._t_last: float | None = None
        self._frames_last = 0

    def start(self) -> None:
        self._t_last = time.perf_counter()
        self._frames_last = self.trainer.collected_frames

    def __call__(self) -> None:
        now = time.perf_counter()
        if now - self._t_last < self.every_s:
            return
        frames, total = self.trainer.collected_frames, self.trainer.total_frames
        fps = (frames - self._frames_last) / max(now - self._t_last, 1e-9)
        self._t_last, self._frames_last = now, frames
        returns = self.stats.return_last
        eta = timedelta(seconds=round(max(total - frames, 0) / fps)) if fps > 0 else "-"
        print(
            f"rlrun: progress: {frames}/{total} frames ({100 * frames // total}%), "
            f"{fps:.0f} frames/s, return {'-' if returns is None else f'{returns:.4g}'}, "
            f"ETA {eta}",
            flush=True,
        )

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        pass

    def register(self, trainer: Trainer, name: str = "progress_lines") -> None:
        self.trainer = trainer
        trainer.register_op("setup", self.start)
        trainer.register_op("post_steps", self)
