"""One training job, top to bottom: the recipe that turns a composed config into a Trainer.

placement -> seed -> env -> policy -> loss -> collector (or a dataset's feed) -> replay (collected
frames, a dataset, or both) -> optimizer and update step -> loggers -> Trainer -> hooks ->
evaluation -> checkpoints (resume, init_from) -> train -> summary.json

What happens to each collected batch (TorchRL's Trainer calls the stages in this order; within a
stage, hooks act in the order ``build_trainer`` registers them, the ``hooks`` config last):

1. ``batch_process``: off-policy, the batch goes into the replay buffer; PPO computes advantages
   and fills its minibatch storage; DQN anneals epsilon. An offline run (``collector=none``)
   collects nothing: its "batch" is ``collector.frames_per_batch`` optimisation steps, each
   sampling the dataset (``rlrun/builders/datasets.py``); with a dataset and a collector, collected
   frames join the online half of TorchRL's offline-to-online buffer (``pre_epoch``).
2. ``pre_steps_log``: episode returns and lengths, frames/s, PPO's log-prob check, epsilon.
3. unless still in ``collector.init_random_frames``, for each epoch and optimisation step:
   ``process_optim_batch`` (a stop signal that waited ends the steps here; PPO's minibatch, or a
   prioritized/slice replay sample, on the learner's device), the update step
   (``rlrun/builders/updates.py``: off-policy with uniform replay, one fused function that
   samples the storage itself, then loss, backward, clip, optimiser step and soft target update;
   a hard target copy after it), ``post_loss`` (replay priorities), ``post_optim``; then
   ``post_optim_complete_log`` (losses).
4. ``post_steps``: a NaN/inf loss stops the run (nothing of this batch is saved); trained
   weights to the collector's copy or workers, learning-rate annealing,
   torchsnapshot checkpoints, an Optuna trial's pruning check.
5. ``post_steps_log``: evaluation (and the best checkpoint), the learning rate.
6. the Trainer's own periodic checkpoint (``checkpoint.every_frames``), then the next batch.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import signal
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import torch
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf
from tensordict.nn import TensorDictSequential
from torchrl.envs import EnvBase
from torchrl.envs.transforms import VecNormV2
from torchrl.trainers import Trainer

from rlrun.algorithms import AUTO, Data, declared, policy_config
from rlrun.builders.atari import END_OF_LIFE
from rlrun.builders.checkpoints import (
    CHECKPOINT_DIR,
    SnapshotSaver,
    checkpoint_dirs,
    disk_full,
    find_checkpoint,
    load_checkpoint,
    load_networks,
    save_now,
    trainer_checkpoint_kwargs,
)
from rlrun.builders.collectors import (
    fresh_batches,
    make_collector,
    runs_in_place,
    weight_sync_hook,
    worker_failures,
)
from rlrun.builders.copying import check_loss_trains_in_place
from rlrun.builders.datasets import DatasetFeed, data_source, make_replay
from rlrun.builders.determinism import make_deterministic
from rlrun.builders.devices import on_device, placement
from rlrun.builders.disk import out_of_space
from rlrun.builders.envs import action_spec, make_env
from rlrun.builders.evaluation import Evaluator
from rlrun.builders.hook_entries import parse_hooks, reads_samples
from rlrun.builders.hooks import (
    EpisodeStats,
    HookContext,
    LinearLRAnnealing,
    StopWithinBatch,
    continue_progress_bar,
    register_config_hooks,
)
from rlrun.builders.learners import make_learner, remote_learners
from rlrun.builders.loggers import make_logger
from rlrun.builders.policies import build_policy
from rlrun.builders.progress import ProgressLines, wants_lines
from rlrun.builders.pruning import is_pruned, register_pruning
from rlrun.builders.ray_runtime import cpus_reserved, ray_session, uses_ray
from rlrun.builders.training import Context
from rlrun.builders.updates import make_optimizer
from rlrun.compat.torchrl import set_num_threads_kept
from rlrun.errors import ConfigError
from rlrun.folders.folder_lock import hold, release
from rlrun.folders.provenance import record_environment
from rlrun.folders.resume import (
    preemption_signals,
    requeue_if_preempted,
    requeued_checkpoint,
    submitit_job,
)
from rlrun.folders.run_dirs import remove_refused_run, shown
from rlrun.validation import validate

log = logging.getLogger(__name__)
REQUEUE_WAIT_S = 120.0  # about an NFSv4 lease (90 s) and then some


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
        "first_batch_s": num(stats.first_batch_s),
        "status": status,
        **extra,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")


def print_summary(
    run_dir: Path, stats: EpisodeStats, frames: int, status: str, unit: str = "frames"
) -> None:
    """The run's last lines: what happened, and the command that continues or reports it (for
    a sweep's job: the sweep, which ``resume=`` continues job by job). ``unit``: what a frame
    is (an offline run's are optimisation steps)."""

    def num(x: float | None) -> str:
        return "-" if x is None or not math.isfinite(x) else f"{x:.4g}"

    fps = f" ({frames / stats.wall_time_s:.0f} {unit}/s)" if stats.wall_time_s > 0 else ""
    where = shown(run_dir.parent if runs_in_sweep() else run_dir)
    print(
        f"rlrun: {status}: {frames} {unit} in {stats.wall_time_s:.1f} s{fps}; train return "
        f"last {num(stats.return_last)}, best {num(stats.return_best)}; "
        f"eval return {num(stats.eval_return_last)}",
        flush=True,
    )
    if status == "completed":
        print(
            f"rlrun: report: rlrun report {where}  (train on: rlrun resume={where} "
            "trainer.total_frames=<more>)",
            flush=True,
        )
    elif runs_in_sweep() or checkpoint_dirs(run_dir / CHECKPOINT_DIR):
        print(f"rlrun: continue: rlrun resume={where}", flush=True)


def quiet_torchrl() -> None:
    """Silence TorchRL's info chatter and deprecation notices meant for its own API users."""
    logging.getLogger("torchrl").setLevel(logging.WARNING)
    # algo.compile: "Profiler record function ... will be ignored" for TorchRL's loss timers
    logging.getLogger("torch._dynamo.variables.ctx_manager").setLevel(logging.ERROR)
    for message in (
        "The 'post_loss' hook stage",  # ReplayBufferTrainer's priority updates
        "Nested TransformedEnvs",
        "total_frames .* is not exactly divisible",
        "torch._dynamo.config.inline_inbuilt_nn_modules is deprecated",  # tensordict, compiled
        "The name target_actor_network_params wasn't part",  # TorchRL's BCLoss, no target net
        "Got conflicting batch_sizes in constructor",  # a dataset probed with sample(1)
    ):
        warnings.filterwarnings("ignore", message=message)


def build_trainer(
    cfg: DictConfig, run_dir: Path, stats: EpisodeStats, started: ExitStack | None = None
) -> Trainer:
    """The recipe: every piece built from its config group, then hooked into a TorchRL Trainer.
    What runs on its own once built (collector workers, loggers: a W&B or MLflow run) goes on
    ``started``, for the caller to stop if a later step fails."""
    started = started if started is not None else ExitStack()
    where = placement(cfg)  # every device of the run, decided once (rlrun/builders/devices.py)
    hooks = parse_hooks(cfg.hooks)  # checked before anything heavy is built
    set_num_threads_kept(cfg.trainer.num_threads or 1)  # also once TorchRL closes a batched env
    torch.set_flush_denormal(cfg.trainer.flush_denormal)  # before torch starts its threads
    seed_everything(cfg.seed)
    if cfg.deterministic:  # rlrun/builders/determinism.py
        make_deterministic(cfg)
    if uses_ray(cfg):  # started (or joined) here, stopped after everything else (ray_runtime.py)
        started.enter_context(ray_session(cfg.ray, sum(cpus_reserved(cfg))))

    algorithm = declared(cfg.algo)  # what it can do, as data (rlrun/algorithms/<name>.py)
    env = make_env(cfg.env, seed=cfg.seed, start_method=where.env_start_method)  # on the CPU
    policy_cfg = policy_config(cfg)  # policy._target_, or the algorithm's own networks
    ac = build_policy(policy_cfg, env.observation_spec, action_spec(env), where.learner)
    for transform in ac.env_transforms():  # InitTracker and recurrent-state primers
        env.append_transform(transform)
    fresh = fresh_batches(cfg.collector)
    training = algorithm(
        cfg.algo,
        Context(ac, cfg.collector.frames_per_batch, where.learner, fresh, env.observation_spec),
    )
    if cfg.env.atari is not None and cfg.env.atari.episodic_life:  # rlrun/builders/atari.py
        training.episodes_end_at(END_OF_LIFE)
    policy = ac.rollout_policy("collect")  # actor (+ recurrent critic) in step mode
    if training.exploration is not None:  # e.g. DQN's epsilon-greedy, only while collecting
        policy = TensorDictSequential(policy, training.exploration)
    source = data_source(cfg)  # collector, dataset or both: decided once (builders/datasets.py)
    remote = remote_learners(cfg)  # optimised here or on Ray learners: decided once
    if source == "dataset":  # offline: no env stepped, the run's frames are optimisation steps
        collector = DatasetFeed(cfg.collector.frames_per_batch, cfg.trainer.total_frames)
    else:
        collector = make_collector(
            cfg.collector,
            env,
            policy,
            cfg.trainer.total_frames,
            where,
            env_cfg=cfg.env,
            policy_cfg=policy_cfg,
            policy_transforms=ac.env_transforms(),  # fresh ones, for envs built in workers
            seed=cfg.seed,
            # the slice samplers (algo's buffer or hooks=[replay_buffer]) read trajectory ids
            traj_ids_read=cfg.replay_buffer.sampler == "slice" or cfg.replay_buffer.single_frames,
            exploration=training.exploration,
            ray_cfg=cfg.ray,
            remote_learners=remote,
        )
    started.callback(collector.shutdown)
    # what the loss samples from: collected frames, the dataset, or both
    # (rlrun/builders/datasets.py)
    replays = algorithm.data != Data.ON_POLICY  # on-policy: each fresh batch, no replay
    replay = make_replay(
        cfg, source, replays, env, run_dir, where, remote, reads_samples(hooks), started
    )
    # algo.compile, algo.cudagraphs: as set, or (auto) where the algorithm measured a gain
    steps = training.steps_in(
        cfg.trainer.total_frames,
        cfg.collector.frames_per_batch,
        cfg.collector.get("init_random_frames") or 0,
    )
    compiled, cudagraphs = (
        (False, False) if remote else algorithm.fast_path(cfg.algo, where.learner.type, steps)
    )
    picked = {"compile": compiled, "cudagraphs": cudagraphs}
    if any(on and cfg.algo.get(key) == AUTO for key, on in picked.items()):  # not when set
        how = "compiled" + " and captured in a CUDA graph" * cudagraphs
        print(
            f"rlrun: update step {how} (auto: algo={cfg.algo.name} on {where.learner.type}, "
            f"{steps} optimisation steps; algo.compile=false"
            f"{' algo.cudagraphs=false' * cudagraphs} keeps it eager)",
            flush=True,
        )
    optimizer = make_optimizer(
        cfg.optim, training.loss, where, cudagraphs=cudagraphs, compile=compiled
    )
    # this process (the update step: loss, backward, clip, step) or Ray learners
    learner = make_learner(
        cfg, remote, training, optimizer, replay.sampler, where, compile=compiled,
        cudagraphs=cudagraphs,
    )  # fmt: skip
    logger = make_logger(cfg.logger, run_dir, exp_name=run_dir.name)
    started.callback(logger.close)
    logger.log_hparams(cfg)

    learner.prepare(collector)
    progress_lines = wants_lines(cfg.trainer.progress_bar)
    trainer = Trainer(
        collector=collector,
        total_frames=cfg.trainer.total_frames,
        frame_skip=1,
        optim_steps_per_batch=training.optim_steps_per_batch,
        num_epochs=training.num_epochs,
        loss_module=training.loss,
        optimizer=optimizer,
        logger=logger,
        progress_bar=cfg.trainer.progress_bar and not progress_lines,  # tqdm on a terminal
        log_interval=cfg.trainer.log_every_frames,
        auto_log_optim_steps=False,
        replay_buffer=replay.buffer,  # registered in the checkpoint by the Trainer
        target_net_updater=training.target_updater,
        **learner.trainer_kwargs,
        **trainer_checkpoint_kwargs(cfg, run_dir),
    )
    # the stop check, replay, exploration, the algorithm's hooks (PPO's advantages and
    # minibatches), episode statistics, losses: in this order on each batch (builders/learners.py)
    stop = StopWithinBatch(trainer)  # a stop signal ends the batch within seconds
    for hook in learner.hooks(trainer, ac.actor, training, replay.hooks, stats, stop):
        hook.register(trainer)
    in_place = runs_in_place(collector, policy)
    if in_place and not learner.remote:
        check_loss_trains_in_place(training.loss, policy)
    if not in_place and not learner.sends_weights(cfg.collector.kind):
        weight_sync_hook(collector, policy).register(trainer)
    if cfg.optim.anneal_lr:
        LinearLRAnnealing(optimizer, cfg.trainer.total_frames).register(trainer)
    if progress_lines:  # no terminal: a plain line every trainer.progress_every_s instead
        ProgressLines(stats, cfg.trainer.progress_every_s).register(trainer)
    obs_stats = next((t for t in env.transform if isinstance(t, VecNormV2)), None)
    eval_env = eval_env_factory(cfg, ac, obs_stats)
    # the actor in the eval phase's recurrent mode, on the learner, stepping a CPU env
    eval_policy = on_device(ac.rollout_policy("eval"), where.eval_policy)
    register_config_hooks(
        hooks, HookContext(trainer, cfg, optimizer, eval_policy, eval_env, run_dir, where)
    )
    if cfg.eval.every_frames:
        on_result = functools.partial(setattr, stats, "eval_return_last")
        Evaluator(cfg.eval, eval_env, eval_policy, run_dir, on_result, stop.overdue).register(
            trainer
        )
    register_pruning(trainer, stats)  # only in a trial of a pruned Optuna search
    return trainer


def eval_env_factory(
    cfg: DictConfig, ac, observation_stats: VecNormV2 | None = None
) -> Callable[..., EnvBase]:
    """A fresh CPU env of ``num_envs`` sub-envs in this process for evaluation (its own seed),
    rendering ``pixels`` on request, normalising observations with the training env's
    ``observation_stats`` (``env.normalize_observations``)."""

    def make(pixels: bool = False, num_envs: int = 1) -> EnvBase:
        env_cfg = OmegaConf.merge(cfg.env, {"parallel": False})
        if pixels:  # a plain GymEnv renders: from_pixels adds a "pixels" entry
            pixel_kwargs = {"from_pixels": True, "pixels_only": False}
            env_cfg = OmegaConf.merge(env_cfg, {"backend": "gym"})
            env_cfg.kwargs = {**env_cfg.kwargs, **pixel_kwargs}
        env = make_env(
            env_cfg, num_envs, cfg.seed + 1, observation_stats=observation_stats, training=False
        )
        for transform in ac.env_transforms():  # InitTracker and recurrent-state primers
            env.append_transform(transform)
        return env

    return make


@contextmanager
def stop_on_signals(trainer: Trainer) -> Iterator[list[str]]:
    """Ctrl-C or SIGTERM asks the Trainer to stop: a batch still running after a few seconds
    has its optimisation ended at the next step and an evaluation in progress dropped
    (:class:`StopWithinBatch`), then TorchRL saves a checkpoint and leaves its loop; a second
    signal interrupts at once. Yields the signals seen."""
    seen: list[str] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen  # signal handlers can only be set from the main thread
        return

    def handler(signum: int, frame) -> None:
        seen.append(signal.Signals(signum).name)
        if len(seen) > 1:
            raise KeyboardInterrupt
        trainer.request_stop(f"{seen[0]} received")

    stops = (signal.SIGINT, signal.SIGTERM, *preemption_signals())  # + submitit's, in its jobs
    previous = {sig: signal.signal(sig, handler) for sig in stops}
    try:
        yield seen
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def resume_checkpoint(cfg: DictConfig) -> Path | None:
    """``resume=<run folder or checkpoint>``: the checkpoint to restore (checked before anything
    is built, so a wrong path leaves the run folder as it was). Without ``resume``, a submitit job
    requeued after a preemption or its time limit continues from the newest checkpoint in its
    own folder (``rlrun/folders/resume.py``); any other run starts from scratch."""
    if not cfg.resume:
        return requeued_checkpoint(cfg)
    found = find_checkpoint(Path(cfg.resume), cfg.checkpoint.backend)
    if found is None:
        raise ConfigError(
            f"resume={cfg.resume}: no {cfg.checkpoint.backend} checkpoint found there; "
            "give a run folder with checkpoints/ or a checkpoint folder."
        )
    return found


def init_checkpoint(cfg: DictConfig) -> Path | None:
    """``init_from=<run folder or checkpoint>``: the checkpoint whose trained networks a new
    run starts from (checked before anything is built); none when resuming this run itself."""
    if not cfg.init_from or cfg.resume:
        return None
    found = find_checkpoint(Path(cfg.init_from), "torch", key="init_from")
    if found is None:
        raise ConfigError(
            f"init_from={cfg.init_from}: no checkpoint found there; give a run folder with "
            "checkpoints/ (checkpoint=torch) or a checkpoint folder."
        )
    return found


def run_job(cfg: DictConfig) -> float | None:
    """Train one run in the Hydra run folder; whatever happens, close loggers and write
    ``summary.json``. Ctrl-C/SIGTERM stop within the batch with a checkpoint (status
    ``interrupted``). Returns the final training return (a sweeper's objective)."""
    quiet_torchrl()
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    # one writer per folder (rlrun/folders/folder_lock.py); a requeued submitit job waits for its
    # preempted predecessor's lock to go with it
    hold(run_dir, "run", wait_s=REQUEUE_WAIT_S if submitit_job() else 0)
    # a fresh run's folder: Hydra made it for this job (the console script checked it unused)
    fresh = not cfg.resume and not submitit_job() and not runs_in_sweep()
    refused = False
    try:
        return train_in(run_dir, cfg, refusable=fresh)
    except ConfigError:
        refused = fresh  # a fresh run refused before training: nothing to keep
        raise
    finally:
        release(run_dir)
        if refused and fresh:
            remove_refused_run(run_dir, f"{HydraConfig.get().job.name}.log")


def train_in(run_dir: Path, cfg: DictConfig, refusable: bool = False) -> float | None:
    """:func:`run_job` in the folder it holds. ``refusable``: a ConfigError before training is
    a refusal (a fresh single run's), not a failed run (a sweep's job, a resumed run)."""
    checkpoint = resume_checkpoint(cfg)
    init = init_checkpoint(cfg)
    stats = EpisodeStats()
    trainer: Trainer | None = None
    saver: SnapshotSaver | None = None
    status, error = "failed", None
    signals: list[str] = []  # the stop signals seen; after submitit's preemption one, requeued
    started = ExitStack()  # collector and loggers, stopped however the job ends
    training = refused = False  # a ConfigError before training is a refusal, not a failed run
    try:
        validate(cfg)  # again, for the jobs an Optuna search composes (the CLI checked the rest)
        record_environment(run_dir, cfg)  # versions, host, command: rlrun/folders/provenance.py
        trainer = build_trainer(cfg, run_dir, stats, started)
        if cfg.checkpoint.backend == "torchsnapshot":
            saver = SnapshotSaver(cfg, run_dir)
            saver.register(trainer)
        if init is not None:  # offline to online: another run's networks, fresh counters
            load_networks(trainer, init, cfg)
            print(f"rlrun: networks from {shown(init)}", flush=True)
        if checkpoint is not None:
            load_checkpoint(trainer, checkpoint, saver)
            continue_progress_bar(trainer)
            log.info("resumed from %s at %d frames", checkpoint, trainer.collected_frames)
        # a worker's death: saved as of the last batch, unless the learners (and the state a
        # checkpoint reads from them) are already gone with the Trainer's loop
        save = None
        if uses_ray(cfg) and not remote_learners(cfg):
            save = functools.partial(save_now, trainer, saver)
        print(f"rlrun: run folder {shown(run_dir)}", flush=True)  # built: it trains
        training = True
        with stop_on_signals(trainer) as signals, worker_failures(trainer, save):
            trainer.train()
            if saver is not None:
                saver.save_final()
        status = "interrupted" if signals else "completed"
    except KeyboardInterrupt:
        status = "interrupted"
    except Exception as err:
        if isinstance(err, ConfigError) and refusable and not training:
            refused = True  # a refusal: no summary; run_job removes what this run wrote
            raise
        if not raised_by_a_second_signal(err):
            error = f"{type(err).__name__}: {err}"
            if is_pruned(err):  # stopped early by an Optuna search (rlrun/builders/pruning.py)
                status = "pruned"
            if out_of_space(err):  # one line, no traceback; resume= once there is space
                logging.raiseExceptions = False  # log files that cannot grow: no "Logging error"
                where = run_dir.parent if runs_in_sweep() else run_dir
                full = disk_full(err, run_dir, cfg.checkpoint.backend, where)
                error = str(full)
                raise full from None
            raise
        status = "interrupted"
    finally:
        started.close()  # loggers closed (a W&B or MLflow run ended), collector shut down
        if not refused:
            extra = {"error": error} if error else {}
            frames = trainer.collected_frames if trainer is not None else 0
            try:
                write_summary(run_dir, stats, frames, status, **extra)
            except OSError as err:  # it did not fit: the line above says why
                if not out_of_space(err):
                    raise
            unit = "steps" if data_source(cfg) == "dataset" else "frames"  # offline: steps
            print_summary(run_dir, stats, frames, status, unit)
    requeue_if_preempted(signals)  # preempted submitit job: submitit requeues it (resume.py)
    return stats.return_last


def raised_by_a_second_signal(err: BaseException) -> bool:
    """A second Ctrl-C or SIGTERM raises KeyboardInterrupt wherever the run is; library code in
    between may turn it into an error of its own (TorchRL's vmapped losses raised a
    RuntimeError about a TensorDict's truth value, 2026-11-26), chained to it."""
    seen: set[int] = set()
    cause: BaseException | None = err
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def runs_in_sweep() -> bool:
    """A job of a multirun (``resume=`` continues its sweep, not the job alone)."""
    return HydraConfig.get().mode == RunMode.MULTIRUN
