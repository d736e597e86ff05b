"""One training job, top to bottom: the recipe that turns a composed config into a Trainer.

seed -> env -> policy -> loss -> collector -> optimizer -> loggers -> Trainer -> hooks
-> checkpoints -> train -> summary.json
"""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from tensordict.nn import TensorDictSequential
from torchrl.envs import InitTracker
from torchrl.trainers import Trainer

from rlrun.algorithms import make_algorithm
from rlrun.buffers import make_replay_buffer, make_replay_buffer_hook
from rlrun.checkpoints import trainer_checkpoint_kwargs
from rlrun.collectors import make_collector
from rlrun.envs import make_env
from rlrun.errors import ConfigError
from rlrun.hooks import EpisodeStats, LinearLRAnnealing, LossLog
from rlrun.loggers import make_logger
from rlrun.policies import build_policy


def resolve_device(name: str) -> torch.device:
    """``cpu``, ``cuda``, ``cuda:N`` or ``auto``; CUDA must really be there (no silent fallback)."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device={name} is not valid; use cpu, cuda, cuda:N or auto.") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(
                f"device={name} but no CUDA device is available here; use device=cpu "
                "(or device=auto to take CUDA only where it exists)."
            )
        if device.index is not None and device.index >= torch.cuda.device_count():
            raise ConfigError(
                f"device={name} but only {torch.cuda.device_count()} CUDA device(s) exist."
            )
    elif device.type != "cpu":
        raise ConfigError(f"device={name} is not supported; use cpu, cuda, cuda:N or auto.")
    return device


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (the envs are seeded where they are built)."""
    import random

    import numpy as np

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def write_summary(run_dir: Path, stats: EpisodeStats, frames: int, status: str, **extra) -> None:
    """``summary.json``: what a sweep report and a person read first."""

    def num(x: float | None) -> float | None:
        return None if x is None or not math.isfinite(x) else float(x)

    summary = {
        "frames": int(frames),
        "wall_time_s": round(stats.wall_time_s, 3),
        "fps": num(frames / stats.wall_time_s) if stats.wall_time_s > 0 else None,
        "train_return_last": num(stats.return_last),
        "train_return_best": num(stats.return_best),
        "eval_return_last": num(stats.eval_return_last),
        "status": status,
        **extra,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def quiet_torchrl() -> None:
    """Silence TorchRL's info chatter and deprecation notices meant for its own API users."""
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    for message in (
        "The 'optimizer' hook stage",
        "The 'post_loss' hook stage",  # ReplayBufferTrainer's priority updates
        "Nested TransformedEnvs",
        "total_frames .* is not exactly divisible",
    ):
        warnings.filterwarnings("ignore", message=message)


def build_trainer(cfg: DictConfig, run_dir: Path, stats: EpisodeStats) -> Trainer:
    """The recipe: every piece built from its config group, then hooked into a TorchRL Trainer."""
    device = resolve_device(cfg.device)
    torch.set_num_threads(cfg.trainer.num_threads or 1)
    seed_everything(cfg.seed)

    env = make_env(cfg.env, str(device), seed=cfg.seed)
    ac = build_policy(cfg.policy, env.observation_spec, env.full_action_spec["action"], device)
    if ac.recurrent:
        env.append_transform(InitTracker())
    for primer in ac.primers:
        env.append_transform(primer)
    algo = make_algorithm(cfg.algo, ac, cfg.collector.frames_per_batch)
    rollout_policy = ac.actor
    if algo.exploration is not None:  # e.g. DQN's epsilon-greedy, only while collecting
        rollout_policy = TensorDictSequential(ac.actor, algo.exploration)
    if ac.recurrent and ac.critic is not None:  # store the critic's hidden state too
        rollout_policy = TensorDictSequential(ac.actor, ac.critic)
    collector = make_collector(
        cfg.collector, lambda: env, rollout_policy, cfg.trainer.total_frames, str(device)
    )
    replay_buffer = None
    if algo.off_policy:
        replay_buffer = make_replay_buffer(cfg.replay_buffer, run_dir, device)
    optim_kwargs = OmegaConf.to_container(cfg.optim, resolve=True)
    anneal_lr = optim_kwargs.pop("anneal_lr")
    optim_kwargs.update(optim_kwargs.pop("kwargs"))
    optimizer = instantiate(optim_kwargs, params=list(algo.loss.parameters()))
    logger = make_logger(cfg.logger, run_dir, exp_name=run_dir.name)
    logger.log_hparams(cfg)

    trainer = Trainer(
        collector=collector,
        total_frames=cfg.trainer.total_frames,
        frame_skip=1,
        optim_steps_per_batch=algo.optim_steps_per_batch,
        num_epochs=algo.num_epochs,
        loss_module=algo.loss,
        optimizer=optimizer,
        logger=logger,
        clip_grad_norm=True,
        clip_norm=algo.max_grad_norm,
        progress_bar=cfg.trainer.progress_bar,
        log_interval=cfg.trainer.log_every_frames,
        auto_log_optim_steps=False,
        replay_buffer=replay_buffer,  # registered in the checkpoint by the Trainer
        target_net_updater=algo.target_updater,
        **trainer_checkpoint_kwargs(cfg.checkpoint, run_dir),
    )
    if replay_buffer is not None:
        make_replay_buffer_hook(replay_buffer, device).register(trainer)
    for hook in [*algo.hooks, stats, LossLog()]:
        hook.register(trainer)
    if anneal_lr:
        LinearLRAnnealing(optimizer, cfg.trainer.total_frames).register(trainer)
    return trainer


def run_job(cfg: DictConfig) -> float | None:
    """Train one run in the Hydra run folder; whatever happens, close loggers and write
    ``summary.json``. Returns the final training return (a sweeper's objective)."""
    quiet_torchrl()
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    stats = EpisodeStats()
    trainer: Trainer | None = None
    status, error = "failed", None
    try:
        trainer = build_trainer(cfg, run_dir, stats)
        trainer.train()
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
    except Exception as err:
        error = f"{type(err).__name__}: {err}"
        raise
    finally:
        if trainer is not None:
            trainer.collector.shutdown()
            trainer.logger.close()
        extra = {"error": error} if error else {}
        frames = trainer.collected_frames if trainer is not None else 0
        write_summary(run_dir, stats, frames, status, **extra)
    return stats.return_last
