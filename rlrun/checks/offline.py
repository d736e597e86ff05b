"""``dataset=``, ``collector=none`` and offline algorithms, against each other, the policy and
the env; the dataset is on this machine (rlrun downloads nothing)."""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data, declared, shipped
from rlrun.checks.packages import need
from rlrun.config import RECURRENT_KINDS
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import RUN_CONFIG, is_run_dir, load_saved


def check_offline(cfg: DictConfig, algorithm: Algorithm) -> None:
    """``dataset=``, ``collector=none`` and the algorithm, against each other, the policy and
    the env; the dataset is on this machine (rlrun downloads nothing)."""
    name, kind = cfg.algo.name, cfg.collector.kind
    if not cfg.dataset:
        if algorithm.data == Data.OFFLINE:
            raise ConfigError(
                f"algo={name} learns from a dataset: set dataset=<Minari dataset id or run "
                "folder> (rlrun record RUN episodes=N makes one)."
            )
        if kind == "none":
            raise ConfigError(
                "collector=none learns from a dataset alone: set dataset=<Minari dataset id or "
                "run folder>, or choose a collector: sync, multi_sync, async or ray."
            )
        return
    offline = {n: a for n, a in shipped().items() if a.data == Data.OFFLINE}
    if algorithm.data == Data.ON_POLICY:
        raise ConfigError(
            f"algo={name} learns from fresh batches, not from a dataset: use one of "
            f"{', '.join(offline)} (or an off-policy algorithm), or drop dataset=."
        )
    if not algorithm.collects and kind != "none":
        online = [n for n, a in offline.items() if a.collects]
        raise ConfigError(
            f"algo={name} learns from its dataset alone and has no use for collector={kind}'s "
            f"frames: use collector=none (to fine-tune online, continue with {', '.join(online)})."
        )
    if kind == "none" and cfg.algo.get("utd_ratio", 1) != 1:
        raise ConfigError(
            "collector=none counts an offline run's optimisation steps as its frames: set "
            f"algo.utd_ratio=1 (not {cfg.algo.utd_ratio}) and size trainer.total_frames instead."
        )
    if kind == "none" and cfg.collector.init_random_frames:
        raise ConfigError(
            "collector=none collects nothing, so there are no random frames to wait for: set "
            "collector.init_random_frames=0."
        )
    if cfg.collector.init_random_frames:  # TorchRL's offline-to-online hook would skip them
        raise ConfigError(
            f"dataset={cfg.dataset} gives learning its start, so there are no random frames to "
            "wait for: set collector.init_random_frames=0."
        )
    why = None
    if cfg.env.atari is not None or cfg.policy.get("kind") in RECURRENT_KINDS:
        why = "image observations and recurrent policies are not supported offline"
    elif cfg.env.normalize_observations:
        why = "a dataset holds raw observations; set env.normalize_observations=false"
    elif cfg.trainer.learner_backend == "ray":
        why = "the Ray learners sample their own buffer; set trainer.learner_backend=local"
    if why:
        raise ConfigError(f"dataset={cfg.dataset}: {why}.")
    check_dataset(cfg.dataset)


def check_dataset(dataset: str) -> None:
    """``dataset=`` names a run folder that kept a replay buffer, or a Minari dataset on this
    machine."""
    run_dir = Path(dataset).expanduser()
    if is_run_dir(run_dir):
        saved = load_saved(run_dir / RUN_CONFIG)
        if declared(saved.algo).data == Data.ON_POLICY or saved.collector.kind == "none":
            raise ConfigError(
                f"dataset={run_dir}: that run (algo={saved.algo.name}, collector="
                f"{saved.collector.kind}) keeps no replay buffer; give an off-policy online run, "
                "or record its policy: rlrun record RUN episodes=N."
            )
        return
    need("minari", f"dataset={dataset}")
    import minari

    if dataset in minari.list_local_datasets():
        return
    root = os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
    raise ConfigError(
        f"dataset={dataset} is neither a run folder nor a Minari dataset in {root}; rlrun "
        f"downloads nothing: fetch it where there is network (minari download {dataset}), or "
        "record one: rlrun record RUN episodes=N id=NAME."
    )
