"""The Ray runtime a run uses (``collector=ray``), from the ``ray`` config node.

rlrun starts a local Ray only when the run needs one and none is running in this process, and
stops only what it started: a cluster joined with ``ray.address=auto`` or ``ray://host:port`` is
left running (this process only disconnects), and a job that Hydra's Ray launcher runs inside a
Ray worker uses that Ray as it is. TorchRL's own Ray owners (``RayCollector``) then find Ray
initialised and leave its lifetime to rlrun. How large a local Ray must be for a run's learners
and workers is checked here too, before the run starts (``rlrun/validation.py`` calls
:func:`check_ray_cpus` and :func:`check_ray_gpus`).
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from omegaconf import DictConfig, OmegaConf

from rlrun.errors import ConfigError, RunError

if TYPE_CHECKING:
    from rlrun.builders.devices import Placement

LOCAL_ONLY = ("num_cpus", "num_gpus", "object_store_memory", "include_dashboard")


LEARNER_CPUS = 1  # CPUs reserved by each learner actor (trainer.learner_backend=ray)


def uses_ray(cfg: DictConfig) -> bool:
    """Whether the run needs a Ray runtime (Ray collector workers or Ray learners)."""
    return cfg.collector.kind == "ray" or cfg.trainer.learner_backend == "ray"


def cpus_reserved(cfg: DictConfig) -> tuple[int, int]:
    """CPUs the run's Ray actors reserve: (learners', collector workers')."""
    learners = workers = 0
    if cfg.trainer.learner_backend == "ray":
        learners = cfg.trainer.num_learners * LEARNER_CPUS
    if cfg.collector.kind == "ray":
        workers = cfg.collector.num_workers * math.ceil(cfg.ray.worker_cpus)
    return learners, workers


def init_kwargs(cfg: DictConfig, reserved: int = 0) -> dict:
    """``ray.init`` arguments: a local Ray sized by the node, or a cluster's address (which
    takes none of the local sizes: the cluster has its own). With ``ray.num_cpus=null`` a local
    Ray offers this machine's CPUs, or the ``reserved`` CPUs of the run's actors where that is
    more (oversubscribed, as a collector's worker processes would be), rather than leaving
    actors waiting for CPUs that never come."""
    kwargs = {
        "runtime_env": OmegaConf.to_container(cfg.runtime_env) or None,
        "logging_level": logging.WARNING,  # no INFO lines about Ray's own start-up
        "configure_logging": True,
    }
    if cfg.address is None:  # "local": a new Ray even where `ray start` left one running here
        sizes = {key: cfg[key] for key in LOCAL_ONLY}
        if sizes["num_cpus"] is None and reserved > (os.cpu_count() or 1):
            sizes["num_cpus"] = reserved
        return {**kwargs, "address": "local", **{k: v for k, v in sizes.items() if v is not None}}
    return {**kwargs, "address": cfg.address}


def check_reachable(address: str | None) -> None:
    """A ``host:port`` address must answer before Ray is asked to join it: Ray itself retries
    an address where nothing listens for minutes (measured 2026-11-23: 82 s with two retries,
    over 10 minutes with its defaults)."""
    if address is None or address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except ValueError:
        raise ConfigError(
            f"ray.address={address} is not valid; use null, auto, host:port or ray://host:port."
        ) from None
    except OSError as err:
        raise RunError(
            f"ray.address={address}: nothing answers there ({err.strerror or err}). Start a "
            "cluster with `ray start --head`, or set ray.address=null for a local Ray."
        ) from None


@contextmanager
def ray_session(cfg: DictConfig, reserved: int = 0) -> Iterator[None]:
    """Ray for the length of the ``with`` block: started or joined as ``cfg`` (the ``ray``
    node) says, unless this process already runs inside one; shut down after only if started
    or joined here. Shutting down a local Ray stops its raylet, GCS and workers. ``reserved``:
    the CPUs the run's actors reserve (see :func:`init_kwargs`)."""
    import ray

    set_connect_timeout(cfg.connect_timeout_s)
    if ray.is_initialized():  # e.g. a job of hydra/launcher=ray: its Ray is not ours to stop
        yield
        return
    check_reachable(cfg.address)
    try:
        ray.init(**init_kwargs(cfg, reserved))
    except ConnectionError as err:  # no cluster at ray.address, or one that refused us
        auth = ""
        if cfg.address != "auto" and "RAY_AUTH_MODE" not in os.environ:
            # Ray turns token authentication on by itself only for ray.address=auto
            auth = (
                " A cluster with token authentication (Ray's default) also needs "
                "RAY_AUTH_MODE=token and its token (RAY_AUTH_TOKEN or ~/.ray/auth_token)."
            )
        raise RunError(
            f"ray.address={cfg.address}: {str(err).split('. ')[0]}. Start one with "
            f"`ray start --head`, or set ray.address=null for a local Ray.{auth}"
        ) from None
    try:
        yield
    finally:
        ray.shutdown()


def set_connect_timeout(seconds: float) -> None:
    """How long TorchRL's Ray weight sync waits for the workers to join its gloo group. They
    join through a helper actor, a new Ray worker process that imports torchrl first: with both
    cores of a 2-core machine busy, that took over TorchRL's 60 s and every ``collector=ray``
    run ended in a ``DistStoreError`` traceback (seen 2026-11-24). TorchRL 0.14.1 keeps the
    limit in a private module constant, read when the group is made
    (``rlrun/compat/torchrl.py``)."""
    from rlrun.compat.torchrl import set_ray_weight_sync_timeout

    set_ray_weight_sync_timeout(seconds)


def check_ray_cpus(cfg: DictConfig) -> None:
    """A local Ray given ``ray.num_cpus`` must offer a CPU to each learner and collector worker
    (with ``null`` rlrun sizes it so); otherwise the actors wait for their resources until a
    timeout, or for ever."""
    ray_cfg = cfg.ray
    if not uses_ray(cfg) or ray_cfg.address is not None:
        return  # no Ray, or a cluster: its own size
    learner_cpus, worker_cpus = cpus_reserved(cfg)
    need = learner_cpus + worker_cpus
    if ray_cfg.num_cpus is not None and ray_cfg.num_cpus < need:
        who = []
        if learner_cpus:
            who.append(f"{cfg.trainer.num_learners} learners ({LEARNER_CPUS} each)")
        if worker_cpus:
            who.append(
                f"{cfg.collector.num_workers} collector workers ({ray_cfg.worker_cpus:g} each)"
            )
        raise ConfigError(
            f"ray.num_cpus={ray_cfg.num_cpus} is too few: {' and '.join(who)} need {need}; set "
            f"ray.num_cpus={need} (logical CPUs may exceed the machine's) or null (rlrun then "
            "sizes the local Ray)."
        )


def check_ray_gpus(cfg: DictConfig, where: Placement) -> None:
    """Learners on CUDA in a local Ray need a whole GPU each (NCCL), as many as it offers."""
    import torch  # (and rlrun's devices): only once the light checks have passed

    from rlrun.builders.devices import ray_gpus, ray_worker_gpus

    ray_cfg = cfg.ray
    learner_cpus, worker_cpus = cpus_reserved(cfg)
    if not learner_cpus or ray_cfg.address is not None:
        return  # no Ray learners, or a cluster: its own size
    n = cfg.trainer.num_learners
    if not ray_gpus(where.learner):
        return
    workers = cfg.collector.num_workers if worker_cpus else 0
    worker_gpus = ray_worker_gpus(ray_cfg.worker_gpus, where, workers)  # untested here (no GPU)
    need_gpus = n + math.ceil(worker_gpus * workers)
    have_gpus = ray_cfg.num_gpus if ray_cfg.num_gpus is not None else torch.cuda.device_count()
    if have_gpus < need_gpus:
        raise ConfigError(
            f"trainer.num_learners={n} on CUDA need a whole GPU each (NCCL), {need_gpus} with "
            f"the collector workers', but the local Ray offers {have_gpus}; use fewer "
            "trainer.num_learners or device=cpu."
        )
