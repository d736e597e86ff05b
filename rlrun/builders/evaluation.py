"""Periodic evaluation from the ``eval`` config group: the deterministic policy on its own env.

Every ``eval.every_frames`` collected frames, ``eval.episodes`` episodes run side by side on a
separate batched env (one sub-env per episode, its own seed) with the policy's deterministic
action (``ExplorationType.DETERMINISTIC``): one batched step per time step instead of one
episode after another.
``eval/episode_return`` and ``eval/episode_length`` go to every logger at the collected-frames
step; the best return so far is kept as ``checkpoints/best``; with ``eval.video=true`` the first
episode is rendered to ``videos/eval-<frames>.mp4`` and sent to the loggers (``log_video``:
TensorBoard, W&B and MLflow show it; ``rlrun/builders/loggers.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig
from tensordict import TensorDictBase
from torchrl.envs import EnvBase
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.trainers import Trainer, TrainerHookBase

from rlrun.builders.checkpoints import save_best
from rlrun.builders.videos import FPS, quiet_sdl, write_mp4

log = logging.getLogger(__name__)


@torch.no_grad()
def run_episodes(
    env: EnvBase, policy: Any, max_steps: int, stopping: Callable[[], bool] = lambda: False
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Run one episode per sub-env, all at once, until each has finished (or ``max_steps``):
    the returns and lengths (``rlrun eval`` reports them one by one). Sub-envs that finish early
    are reset and their steps ignored. None when ``stopping()`` turns true on the way (a stop
    signal: the run leaves without this evaluation)."""
    returns = torch.zeros(env.batch_size.numel(), device=env.device)  # env outputs' device
    lengths = torch.zeros_like(returns)
    running = torch.ones_like(returns, dtype=torch.bool)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        td = env.reset()
        for _ in range(max_steps):
            if stopping():
                return None
            td, next_td = env.step_and_maybe_reset(policy(td))
            returns += td.get(("next", "reward")).reshape(-1) * running
            lengths += running
            running &= ~td.get(("next", "done")).reshape(-1)
            if not running.any():
                break
            td = next_td
    return returns, lengths


class Evaluator(TrainerHookBase):
    """A ``post_steps_log`` hook: evaluate after the batch that reaches or passes each multiple
    of ``every_frames`` collected frames."""

    def __init__(
        self,
        cfg: DictConfig,
        make_env: Callable[..., EnvBase],
        policy: Any,
        run_dir: Path,
        on_result: Callable[[float], None],
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.cfg = cfg
        self.make_env = make_env
        self.policy = policy
        self.run_dir = run_dir
        self.on_result = on_result
        self.stopping = stopping  # a stop that waited long enough: drop the evaluation
        self.env: EnvBase | None = None
        self.trainer: Trainer | None = None
        self.last_eval = 0
        self.best: float | None = None
        self.can_render = True

    @torch.no_grad()
    def episode(self, env: EnvBase) -> TensorDictBase:
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            return env.rollout(self.cfg.max_steps, self.policy, break_when_any_done=True)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float] | None:
        """Mean return and length of one episode per sub-env (:func:`run_episodes`); None when
        the run is asked to stop meanwhile."""
        if self.env is None:
            self.env = self.make_env(num_envs=self.cfg.episodes)
        done = run_episodes(self.env, self.policy, self.cfg.max_steps, self.stopping)
        if done is None:
            return None
        returns, lengths = done
        return {
            "eval/episode_return": returns.mean().item(),
            "eval/episode_length": lengths.mean().item(),
        }

    def render_episode(self) -> torch.Tensor:
        """One episode on a rendering env: its frames, ``[time, height, width, channels]``."""
        quiet_sdl()
        env = self.make_env(pixels=True)
        try:
            pixels = self.episode(env).get("pixels")
        finally:
            env.close()
        return pixels.reshape(-1, *pixels.shape[-3:])

    def record_video(self, frames: int) -> None:
        """One rendered episode: an mp4 in the run folder and ``eval/video`` for the loggers.
        Where the env cannot render (e.g. MuJoCo without an OpenGL backend), say so once and
        go on without videos."""
        try:
            pixels = self.render_episode()
        except Exception as err:  # mujoco.FatalError, OpenGL's errors, a gymnasium error...
            why = (str(err).strip().splitlines() or [""])[0]
            log.warning(
                "eval.video: this env cannot render here (%s: %s); the run goes on without "
                "videos (MuJoCo: MUJOCO_GL=egl or osmesa needs that library installed).",
                type(err).__name__,
                why,
            )
            self.can_render = False
            return
        write_mp4(pixels.numpy(), self.run_dir / "videos" / f"eval-{frames:012d}.mp4", FPS)
        # loggers take [batch, time, channels, height, width] uint8
        video = pixels.permute(0, 3, 1, 2).unsqueeze(0)
        self.trainer.logger.log_video("eval/video", video, step=frames, fps=FPS)

    def __call__(self, batch: TensorDictBase | None = None) -> None:
        frames = self.trainer.collected_frames
        # at the first batch past each multiple of every_frames: counting every_frames from the
        # last evaluation's frames (250016 with 32-frame batches) skipped the one at the end
        # of a 500000-frame run
        if frames // self.cfg.every_frames <= self.last_eval // self.cfg.every_frames:
            return
        result = self.evaluate()
        if result is None:  # dropped: the run is stopping, and waited long enough
            return
        self.last_eval = frames
        for key, value in result.items():  # straight to the loggers: no log_interval filter
            self.trainer.logger.log_scalar(key, value, step=frames)
        self.on_result(result["eval/episode_return"])
        if self.best is None or result["eval/episode_return"] > self.best:
            self.best = result["eval/episode_return"]
            save_best(self.trainer, self.run_dir, self.best)
        if self.cfg.video and self.can_render:
            self.record_video(frames)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()

    def state_dict(self) -> dict[str, Any]:
        return {"last_eval": self.last_eval, "best": self.best}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.last_eval, self.best = state_dict["last_eval"], state_dict["best"]

    def register(self, trainer: Trainer, name: str = "evaluator") -> None:
        self.trainer = trainer
        trainer.register_module(name, self)
        trainer.register_op("post_steps_log", self)
        trainer.register_op("shutdown", self.close)
