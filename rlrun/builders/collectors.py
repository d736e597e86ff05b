"""TorchRL collectors from the ``collector`` config group, and how each one gets the policy.

``sync`` runs TorchRL's ``Collector`` in this process; ``multi_sync`` and ``async`` run
``MultiSyncCollector`` / ``MultiAsyncCollector`` over ``num_workers`` spawned processes; ``ray``
runs TorchRL's ``RayCollector`` over ``num_workers`` Ray actors (``rlrun/builders/ray_runtime.py``
starts or joins Ray), each a one-process ``Collector`` with its own envs.

``policy_copy`` says whether the collector may copy the policy (``rlrun/builders/copying.py``):
``auto`` copies only where a device move needs it and otherwise (or when the policy cannot be
copied) runs it in place; ``always`` gives the collector its own copy, refreshed after every
batch; ``never`` runs the policy in place. Worker processes need the policy pickled, or built
by ``policy_factory``, which each worker calls; TorchRL's weight-sync scheme then sends them
the trained weights. Everything is checked before a process starts: TorchRL 0.14.1 leaves the
policy's parameters on the ``meta`` device when its own pickling fails.
"""

from __future__ import annotations

import copy
import functools
import logging
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential
from torchrl.collectors import BaseCollector, Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.data import Composite, TensorSpec
from torchrl.envs import EnvBase, Transform
from torchrl.trainers import Trainer, UpdateWeights
from torchrl.weight_update import (
    MultiProcessWeightSyncScheme,
    RayWeightSyncScheme,
    SharedMemWeightSyncScheme,
)

from rlrun.builders.copying import COPYABLE_ATTR, copy_problem, declared_not_copyable
from rlrun.builders.devices import CPU, Placement, ray_worker_gpus
from rlrun.builders.envs import action_spec, make_env
from rlrun.builders.policies import build_policy
from rlrun.compat.torchrl import StridedTrajectoryPool, learner_actors
from rlrun.errors import ConfigError, RunError

KINDS = {"sync": Collector, "multi_sync": MultiSyncCollector, "async": MultiAsyncCollector}
log = logging.getLogger(__name__)


def fresh_batches(cfg: DictConfig) -> bool:
    """Whether every batch is collected with the weights of the latest update: not so for the
    asynchronous collectors, whose workers go on collecting while the trainer updates."""
    return not (cfg.kind == "async" or (cfg.kind == "ray" and not cfg.sync))


def _worker_policy(
    policy_cfg: DictConfig,
    observation_spec: Composite,
    action_spec: TensorSpec,
    device: torch.device,
    exploration: TensorDictModuleBase | None,
) -> TensorDictModuleBase:
    """Run in each worker process: build the policy there (its weights come by weight sync).

    The algorithm's exploration module (DQN's epsilon-greedy) goes behind it, as in the main
    process, so both have the same structure and the synced weights include epsilon.
    """
    policy = build_policy(policy_cfg, observation_spec, action_spec, device)
    policy = policy.rollout_policy("collect")
    if exploration is None:
        return policy
    return TensorDictSequential(policy, copy.deepcopy(exploration).to(device))


def _worker_env(env_cfg: DictConfig, start_method: str, transforms: Sequence[Transform]) -> EnvBase:
    """Run in each worker process: the (CPU) env plus the policy's own transforms (primers)."""
    env = make_env(env_cfg, start_method=start_method)
    for transform in transforms:
        env.append_transform(transform.clone())
    return env


def _param_device(policy: torch.nn.Module) -> torch.device | None:
    return next((p.device for p in policy.parameters()), None)


def _devices(where: Placement, explicit: bool = False) -> dict:
    """Collector device arguments from the placement: CPU envs, the policy on its device, batches
    stored on the learner's. None at all on an all-CPU run unless ``explicit``: the env's outputs
    are CPU tensors already, and ``device="cpu"`` would cast every step's tensordict again (7% of
    a step at 128 envs, measured 2026-11-22)."""
    if where.all_cpu and not explicit:
        return {}
    return {
        "env_device": where.env,
        "policy_device": where.collector_policy,
        "storing_device": where.storing,
    }


def _ray_devices(where: Placement) -> dict:
    """Ray workers' device arguments: the policy on its device, batches stored on the CPU as
    they cross Ray's object store. None on an all-CPU run, where they are there already:
    ``policy_device``/``storing_device="cpu"`` cost a Ray worker 8 ms of 49 per 512-frame
    CartPole batch (measured 2026-11-24)."""
    if where.all_cpu:
        return {}
    return {"policy_device": where.collector_policy, "storing_device": CPU}


def _sync_policy(cfg: DictConfig, policy: TensorDictModule, where: Placement) -> dict:
    """Policy and device arguments of a one-process ``Collector`` for ``policy_copy``."""
    target = where.collector_policy
    here = _param_device(policy)
    move = here is not None and here != target
    devices = _devices(where, explicit=move)  # e.g. a factory that put parameters elsewhere
    if cfg.policy_copy == "never":
        if move:
            asked = f"collector.device={cfg.device}" if cfg.device else f"device={target}"
            raise ConfigError(
                f"collector.policy_copy=never runs the policy in place, but its parameters are "
                f"on {here} while {asked} asks for {target}. Set collector.device={here}, or "
                "collector.policy_copy=auto."
            )
        return {"policy": policy, **devices}
    problem = copy_problem(policy, "deepcopy")
    if cfg.policy_copy == "always":
        if problem is not None:
            raise ConfigError(
                f"collector.policy_copy=always, but the policy cannot be copied: {problem}. "
                "Use collector.policy_copy=auto or never to run it in place."
            )
        return {"policy": copy.deepcopy(policy).to(target), **devices}
    if problem is not None and declared_not_copyable(policy) is None:
        log.warning(
            "collector.policy_copy=auto: the policy cannot be copied (%s); rlrun runs it in "
            "place%s. To silence this, set `%s = False` on its class or "
            "collector.policy_copy=never.",
            problem,
            f" on {here}" if move else "",
            COPYABLE_ATTR,
        )
    if move and problem is not None:  # in place on its own device: the data moves instead
        return {"policy": policy, **devices, "policy_device": here}
    return {"policy": policy, **devices}  # TorchRL copies only for a device move


def _multi_policy(
    cfg: DictConfig,
    policy: TensorDictModule,
    worker_factory: Callable[[], TensorDictModule] | None,
) -> dict:
    """Policy arguments of a multi-process collector: pickled, or built by each worker."""
    if worker_factory is not None:
        return {
            "policy": policy,  # only read for the weights it sends; never pickled
            "policy_factory": worker_factory,
            "weight_sync_schemes": {"policy": MultiProcessWeightSyncScheme()},
        }
    hint = (
        "Set collector.policy_factory to a function each worker calls to build its own policy "
        "(same contract as policy._target_, e.g. collector.policy_factory='${policy._target_}'); "
        "TorchRL then sends the workers the trained weights."
    )
    if cfg.policy_copy == "never":
        raise ConfigError(
            f"collector.policy_copy=never runs the policy in place, but collector={cfg.kind} "
            f"runs it in {cfg.num_workers} worker processes. {hint}"
        )
    problem = copy_problem(policy, "pickle")
    if problem is not None:
        raise ConfigError(
            f"collector={cfg.kind} pickles the policy into its {cfg.num_workers} worker "
            f"processes, but it cannot be pickled: {problem}. {hint}"
        )
    return {"policy": policy, "weight_sync_schemes": {"policy": SharedMemWeightSyncScheme()}}


def make_collector(
    cfg: DictConfig,
    env: EnvBase,
    policy: TensorDictModule,
    total_frames: int,
    where: Placement,
    *,
    env_cfg: DictConfig,
    policy_cfg: DictConfig,
    policy_transforms: Sequence[Transform] = (),
    seed: int = 0,
    traj_ids_read: bool = False,
    exploration: TensorDictModuleBase | None = None,
    ray_cfg: DictConfig | None = None,
    remote_learners: bool = False,
) -> BaseCollector:
    """Build the collector that feeds the Trainer ``frames_per_batch`` frames at a time.

    ``env`` serves the one-process collector; worker processes build theirs from ``env_cfg``
    (plus ``policy_transforms``) and, with ``policy_factory``, their policy from ``policy_cfg``.
    Devices come from ``where``. ``traj_ids_read`` says whether the run reads trajectory ids
    (``collector.traj_ids=null``). ``exploration`` is the module ``policy`` ends with, if any;
    workers that build their own policy append a copy of it. ``ray_cfg`` (the ``ray`` node)
    sizes ``collector=ray``'s workers. With ``remote_learners`` (``trainer.learner_backend=ray``)
    Ray workers get their weights from learner rank 0 only, which sets up the weight sync.
    """
    kind = cfg.kind
    common = {
        "frames_per_batch": cfg.frames_per_batch,
        "total_frames": total_frames,
        "init_random_frames": cfg.init_random_frames,
        "auto_register_policy_transforms": False,  # rlrun appends the policy's primers itself
        "compile_policy": bool(policy_cfg.get("compile", False)) or None,  # torch.compile
        "cudagraph_policy": bool(policy_cfg.get("cudagraphs", False)) or None,
    }
    if kind == "sync":
        track = traj_ids_read if cfg.traj_ids is None else cfg.traj_ids
        placement = _sync_policy(cfg, policy, where)
        return Collector(env, **placement, track_traj_ids=track, **common)
    worker_factory = _checked_worker_factory(cfg, env, policy_cfg, where, exploration)
    make_worker_env = functools.partial(
        _worker_env, env_cfg, where.env_start_method, list(policy_transforms)
    )
    if kind == "ray":
        collector = make_ray_collector(
            cfg,
            ray_cfg,
            make_worker_env,
            policy,
            worker_factory,
            where,
            {**common, "seed": seed},
            remote_learners,
        )
    else:
        collector = KINDS[kind](
            [make_worker_env] * cfg.num_workers,
            **_multi_policy(cfg, policy, worker_factory),
            **_devices(where),
            **common,
        )
    collector.set_seed(seed)
    if not (remote_learners and kind == "ray"):  # workers start from the policy's weights
        collector.update_policy_weights_(TensorDict.from_module(policy).data)
    return collector


def _checked_worker_factory(
    cfg: DictConfig,
    env: EnvBase,
    policy_cfg: DictConfig,
    where: Placement,
    exploration: TensorDictModuleBase | None,
) -> Callable[[], TensorDictModuleBase] | None:
    """The function each worker calls to build its policy (``collector.policy_factory``; for
    worker processes that run it on CUDA, ``policy._target_`` by default), called once here so
    that a broken factory fails now rather than in a worker, or None: the policy is pickled.

    Not pickled onto CUDA: measured on an H200 (2026-11-26), the workers of a pickled LSTM or GRU
    policy went on acting with weights other than the trained ones (``ppo_lstm`` with
    ``collector=multi_sync``: mean |log ratio| 7e-7 on the first batch, then 1e-3 to 6e-3; the
    same at a learning rate of 1e-12 stayed at 7e-7, and so did workers that built their own).
    """
    target = cfg.policy_factory
    if not target and cfg.kind in ("multi_sync", "async") and where.workers_build_policy:
        target = policy_cfg._target_
    if not target:
        return None
    factory_cfg = policy_cfg.copy()
    factory_cfg._target_ = target
    specs = (env.observation_spec, action_spec(env))
    worker_factory = functools.partial(
        _worker_policy, factory_cfg, *specs, where.collector_policy, exploration
    )
    try:
        worker_factory()
    except ImportError as err:
        raise ConfigError(f"collector.policy_factory={target}: {err}") from None
    return worker_factory


class RayWorkerCollector(Collector):
    """The ``Collector`` each Ray worker runs, its trajectory ids made distinct from the other
    workers' (worker ``i`` of ``n`` numbers its trajectories ``i, i + n, i + 2n, ...``) so that
    batches merged from several workers keep trajectories apart, as ``MultiSyncCollector``
    does for its processes (the slice samplers split trajectories by these ids)."""

    def __init__(self, *args, traj_id_stride: int = 1, seed: int = 0, **kwargs) -> None:
        worker = kwargs.get("worker_idx") or 0
        torch.manual_seed(seed + 1000 * (worker + 1))  # its actions sampled reproducibly
        pool = StridedTrajectoryPool(traj_id_stride, worker)
        super().__init__(*args, traj_pool=pool, **kwargs)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the envs, then reset them: Ray builds (and resets) a worker's envs before
        ``RayCollector.set_seed`` reaches it, and without this their first episodes started
        from unseeded states (the first batch differed from run to run)."""
        out = super().set_seed(seed, static_seed)
        self.reset()
        return out

    def next(self) -> TensorDictBase | None:
        """The next batch, consolidated into one storage, which crosses Ray in one piece: a
        256-frame CartPole batch took 3.2 ms to pickle and unpickle key by key, 0.4 ms plus
        0.7 ms to consolidate (measured 2026-11-24, under load)."""
        batch = super().next()
        return None if batch is None else batch.consolidate()

    def __repr__(self) -> str:  # Ray prefixes each line a worker prints with it
        return f"collector worker {self.worker_idx}"


class UnackedRayWeightSync(RayWeightSyncScheme):
    """TorchRL's Ray weight sync, returning once the weights are on their way rather than once
    every worker has applied them; the acknowledgements are awaited at the next send. A Ray actor
    runs one caller's calls in order, so each worker still applies the weights before the batch
    the driver asks for next. Saves the driver a round trip per batch in sync mode; in async mode
    it no longer waits for the workers still collecting to finish their batch first. For a driver
    that sends: Ray learners (another caller) keep TorchRL's own scheme."""

    _unacked: tuple = ()

    def send(self, weights=None, worker_ids: int | list[int] | None = None) -> None:
        self.await_acks()  # at most one send in flight per worker: gloo matches them in order
        prepared = self.prepare_weights(weights, self.model_id, self.strategy, self.context)
        prepared = prepared.clone()  # gloo reads them after this returns; training changes them
        self._unacked = tuple(self.transports(worker_ids))
        for transport in self._unacked:
            transport.send_weights_async(prepared)

    def transports(self, worker_ids: int | list[int] | None) -> list:
        """The transports to ``worker_ids`` (all workers: None), as TorchRL's ``send`` picks
        them, from the scheme's public ``sender_transports`` and ``receiver_transport``."""
        senders = self.sender_transports
        if worker_ids is None:
            if not senders:
                receiver = self.receiver_transport
                return [] if receiver is None else [receiver]
            return [senders[k] for k in sorted(senders)]
        ids = [worker_ids] if isinstance(worker_ids, int) else worker_ids
        missing = [i for i in ids if i not in senders]
        if missing:
            raise ValueError(f"Worker {missing[0]} not registered")
        return [senders[i] for i in ids]

    def await_acks(self) -> None:
        """Wait until the workers applied the last weights sent."""
        unacked, self._unacked = self._unacked, ()
        for transport in unacked:
            transport.wait_ack()


def _worker_options(common: dict) -> dict:
    keys = ("auto_register_policy_transforms", "compile_policy", "cudagraph_policy")
    return {key: common[key] for key in keys}


def make_ray_collector(
    cfg: DictConfig,
    ray_cfg: DictConfig,
    make_worker_env: Callable[[], EnvBase],
    policy: TensorDictModule,
    worker_factory: Callable[[], TensorDictModule] | None,
    where: Placement,
    common: dict,
    remote_learners: bool,
) -> BaseCollector:
    """TorchRL's ``RayCollector`` over ``cfg.num_workers`` actors, each running a
    :class:`RayWorkerCollector` on envs it builds itself. Its policy is pickled (from the CPU)
    or built by ``worker_factory``; TorchRL's Ray weight-sync scheme then sends the trained
    weights. Batches cross Ray's object store on the CPU and are stored on the learner's side."""
    from torchrl.collectors.distributed import RayCollector

    num_gpus = ray_worker_gpus(ray_cfg.worker_gpus, where, cfg.num_workers)
    sync = cfg.sync

    def merge_workers(batch: TensorDictBase) -> TensorDictBase:
        # sync: [worker, env, time] -> [worker * env, time], the layout of the other collectors.
        # Otherwise a shallow copy: a worker's batch arrives consolidated, and a consolidated
        # TensorDict pickles its storage only, losing any key the run adds to it later
        batch = batch.flatten(0, 1) if sync and batch.ndim > 2 else batch.copy()
        return batch.to(where.storing, non_blocking=True)

    if worker_factory is not None:
        policies = {"policy_factory": worker_factory}
    else:
        _multi_policy(cfg, policy, None)  # refused here when it cannot be pickled
        cpu_policy = policy if _param_device(policy) in (None, CPU) else copy.deepcopy(policy).cpu()
        policies = {"policy": cpu_policy}
    return RayCollector(
        [make_worker_env] * cfg.num_workers,
        **policies,
        frames_per_batch=common["frames_per_batch"],
        total_frames=common["total_frames"],
        init_random_frames=common["init_random_frames"],
        sync=sync,
        collector_class=RayWorkerCollector,
        collector_kwargs={
            "traj_id_stride": cfg.num_workers,
            "seed": common["seed"],
            **_worker_options(common),
        },
        weight_sync_schemes=None if remote_learners else {"policy": UnackedRayWeightSync()},
        **_ray_devices(where),
        remote_configs={
            "num_cpus": ray_cfg.worker_cpus,
            "num_gpus": num_gpus,
        },
        postproc=merge_workers,
    )


# what TorchRL 0.14.1 raises when a Ray actor died without Ray's own error reaching rlrun: gloo
# during a weight sync, the Ray learners' liveness probe before a step
RAY_ACTOR_GONE = ("Connection closed by peer", "Ray learner generation is")


@contextmanager
def worker_failures(trainer: Trainer, save: Callable[[], bool] | None = None) -> Iterator[None]:
    """A worker process that dies ends the run with one line (TorchRL raises a bare
    RuntimeError, Ray an ``ActorDiedError``, or TorchRL one of ``RAY_ACTOR_GONE`` for a Ray
    collector worker or learner; the worker printed its own traceback). ``save``
    (``collector=ray``, whose checkpoints do not read the workers) checkpoints the run as it
    was after its last complete batch and says whether it did. The collector is shut down after."""
    try:
        yield
    except Exception as err:
        ray = sys.modules.get("ray")
        if ray is not None and any(gone in str(err) for gone in RAY_ACTOR_GONE):
            err = _dead_ray_actor(trainer) or err
        which = None
        if ray is not None and isinstance(err, ray.exceptions.RayActorError):
            pid = re.search(r"pid: (\d+)", str(err))
            which = "Ray learner" if "_RayLearnerWorker" in str(err) else "collector worker"
            which = f"{which} (pid {pid[1]})" if pid else f"a {which}"
        elif ray is not None and "Ray learner generation is" in str(err):
            which = "a Ray learner"  # no longer in TorchRL's list once it shut the others down
        if which is not None:
            kept = "checkpoints saved before are kept (resume= continues from them)"
            if save is not None and save():
                kept = "it saved a checkpoint of its last complete batch (resume= goes on from it)"
            raise RunError(
                f"{which} died; Ray's report is above. The run stopped; {kept}."
            ) from None
        found = re.search(r"worker (\d+) \(exit code (-?\d+)\)", str(err))
        if not isinstance(err, RuntimeError) or "process failed" not in str(err) or not found:
            raise
        raise RunError(
            f"collector worker {found[1]} died (exit code {found[2]}); its traceback is above. "
            "The run stopped; checkpoints saved before are kept (resume= continues from them)."
        ) from None


def _dead_ray_actor(trainer: Trainer) -> Exception | None:
    """Ray's error for the first Ray collector worker or learner that no longer answers."""
    import ray

    workers = getattr(trainer.collector, "remote_collectors", None) or []
    learners = learner_actors(trainer)
    for actor in [*workers, *learners]:
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=30)
        except ray.exceptions.RayActorError as dead:
            return dead
        except ray.exceptions.GetTimeoutError:
            continue
    return None


def runs_in_place(collector: BaseCollector, policy: torch.nn.Module) -> bool:
    """Whether the collector runs ``policy`` itself rather than a copy or worker replicas."""
    return isinstance(collector, Collector) and collector.policy is policy


def weight_sync_hook(collector: BaseCollector, policy: torch.nn.Module) -> UpdateWeights:
    """A Trainer hook (``post_steps``) pushing ``policy``'s trained weights to the collector's
    copy or workers after every batch."""
    return UpdateWeights(
        collector, policy_weights_getter=lambda: TensorDict.from_module(policy).data
    )
