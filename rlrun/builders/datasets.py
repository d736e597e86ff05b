"""Offline data (``dataset=``): where a run's data comes from, and a dataset as TorchRL buffer.

Where the data comes from is decided once, by :func:`data_source`:

- ``collector``: no dataset, the collector fills the replay buffer (every online run);
- ``dataset``: ``collector=none``, an offline run. :class:`DatasetFeed` stands in for the
  collector in TorchRL's Trainer loop: it steps no env, and each of its "batches" is
  ``collector.frames_per_batch`` optimisation steps, so the run's frames are its optimisation
  steps (``trainer.total_frames``, ``eval.every_frames`` and ``checkpoint.every_frames`` count
  them). Samples come from the dataset alone (:class:`DatasetSampler`).
- ``both``: a dataset and a collector (offline to online, as TorchRL's offline-to-online
  recipe): TorchRL's ``OfflineToOnlineReplayBuffer`` draws ``replay_buffer.offline_fraction``
  of each sample from the dataset, the rest from the frames collected since, annealed to 0 over
  ``replay_buffer.offline_anneal_frames`` (TorchRL's own hooks).

A dataset is a Minari dataset on this machine (``MINARI_DATASETS_PATH``, by default
``~/.minari/datasets``; ``rlrun record`` writes them), read with Minari's own API (nothing is
downloaded), or a run folder: the replay buffer of its newest checkpoint. Its transitions are cast
to the env's specs (dtypes, one-hot actions) and keep only the transition keys the losses read,
so offline and online samples can be concatenated. A dataset whose spaces differ from the env's
is refused.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from omegaconf import DictConfig
from tensordict import TensorDict, TensorDictBase, unravel_key
from torchrl.data import (
    LazyTensorStorage,
    OfflineToOnlineReplayBuffer,
    ReplayBuffer,
    TensorDictReplayBuffer,
    TensorSpec,
)
from torchrl.envs import EnvBase
from torchrl.trainers import Trainer, TrainerHookBase
from torchrl.trainers.algorithms.offline_to_online import (
    OfflineToOnlineAnnealHook,
    OfflineToOnlineReplayBufferHook,
)

from rlrun.builders.buffers import (
    UniformSampler,
    fuses_sampling,
    make_replay_buffer,
    make_replay_buffer_hook,
)
from rlrun.builders.checkpoints import VerifiedCheckpoint, find_checkpoint
from rlrun.builders.devices import Placement, placement
from rlrun.builders.envs import policy_keys
from rlrun.builders.learners import make_remote_replay_buffer
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import RUN_CONFIG, is_run_dir, load_saved

Source = Literal["collector", "dataset", "both"]
# what every loss reads of a transition (TorchRL's TED format), beside the policy's observation
# and action and the env's rewards (EnvFormat: a team's are ("agents", ...) keys)
DONE_KEYS = (("next", "done"), ("next", "terminated"), ("next", "truncated"))


def data_source(cfg: DictConfig) -> Source:
    """Collector, dataset or both: the one place a run's source of data is decided."""
    if not cfg.dataset:
        return "collector"
    return "dataset" if cfg.collector.kind == "none" else "both"


def is_run_folder(dataset: str) -> bool:
    return is_run_dir(Path(dataset).expanduser())


class DatasetFeed:
    """What TorchRL's Trainer iterates in an offline run instead of a collector: empty batches of
    ``steps`` "frames" each, until ``total`` (the Trainer counts them as frames and runs
    ``steps`` optimisation steps on each: the run's frames are its optimisation steps)."""

    init_random_frames = 0

    def __init__(self, steps: int, total: int) -> None:
        self.steps = steps
        self.total = total
        self.done = 0  # steps handed out so far (checkpointed as the Trainer's "collector")

    def __iter__(self) -> Iterator[TensorDictBase]:
        while self.done < self.total:
            n = min(self.steps, self.total - self.done)
            self.done += n
            yield TensorDict(batch_size=[n])

    def state_dict(self) -> dict[str, Any]:
        return {"done": self.done}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.done = int(state_dict.get("done", 0))

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        return seed

    def update_policy_weights_(self, *args: Any, **kwargs: Any) -> None:
        """No copy of the policy to update: evaluation runs the trained one."""

    def shutdown(self) -> None:
        """Nothing runs on its own."""


def load_dataset(
    cfg: DictConfig, env: EnvBase, scratch: Path, device: torch.device
) -> ReplayBuffer:
    """``dataset=`` as a replay buffer of ``replay_buffer.batch_size`` samples, its transitions
    put in the env's format once, in memory on ``device`` (the replay storage's, where collected
    frames of the same run live too; a run's memory-mapped buffer is read through ``scratch``)."""
    if is_run_folder(cfg.dataset):
        data = _run_transitions(Path(cfg.dataset).expanduser(), scratch)
    else:
        data = _minari_transitions(cfg.dataset)
    if not len(data):
        raise ConfigError(f"dataset={cfg.dataset} holds no transitions.")
    cast = EnvFormat(env, cfg.dataset)
    cast.check(data[:1])
    data = cast(data)
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(len(data), device=device),
        batch_size=cfg.replay_buffer.batch_size,
    )
    buffer.extend(data)
    return buffer


def _minari_transitions(dataset_id: str) -> TensorDictBase:
    """A Minari dataset's episodes as transitions (TorchRL's TED format).

    Not TorchRL 0.14.1's ``MinariExperienceReplay``: its conversion fills a TensorDict, then
    memory-maps an empty copy of it (``memmap_like``), so every sample it gives is zeros.
    """
    import minari

    try:
        dataset = minari.load_dataset(dataset_id)
        episodes = list(dataset.iterate_episodes())
    except (OSError, KeyError, ValueError, RuntimeError) as err:  # h5py's, Minari's own
        why = (str(err).strip().splitlines() or [type(err).__name__])[0]
        root = os.environ.get("MINARI_DATASETS_PATH", "~/.minari/datasets")
        raise ConfigError(
            f"dataset={dataset_id}: its files in {root} cannot be read ({type(err).__name__}: "
            f"{why}); the dataset is damaged or incomplete: record it again (rlrun record RUN "
            f"episodes=N id={dataset_id}) or fetch it again (minari download {dataset_id})."
        ) from None
    transitions = []
    for episode in episodes:
        if isinstance(episode.observations, dict):
            raise ConfigError(
                f"dataset={dataset_id} has dict observations; rlrun reads vector ones."
            )
        obs = torch.as_tensor(episode.observations)
        terminated = torch.as_tensor(episode.terminations).unsqueeze(-1)
        truncated = torch.as_tensor(episode.truncations).unsqueeze(-1)
        step = {
            "observation": obs[:-1],
            "action": torch.as_tensor(episode.actions),
            ("next", "observation"): obs[1:],
            ("next", "reward"): torch.as_tensor(episode.rewards).unsqueeze(-1),
            ("next", "terminated"): terminated,
            ("next", "truncated"): truncated,
            ("next", "done"): terminated | truncated,
        }
        transitions.append(TensorDict(step, batch_size=[len(episode.actions)]))
    return torch.cat(transitions)


def _run_transitions(run_dir: Path, scratch: Path) -> TensorDictBase:
    """The transitions of a run's replay buffer as its newest checkpoint saved it (the buffer
    rebuilt from the run's config on the CPU, its storage in ``scratch``). That the run kept
    one was checked before the run started (``rlrun/checks/offline.py``)."""
    saved = load_saved(run_dir / RUN_CONFIG)
    checkpoint = find_checkpoint(run_dir, "torch", key="dataset")
    if checkpoint is None:
        raise ConfigError(f"dataset={run_dir}: the run has no checkpoint holding its buffer.")
    saved.device = saved.replay_buffer.device = "cpu"
    saved.replay_buffer.prefetch = None
    buffer = make_replay_buffer(saved.replay_buffer, scratch, placement(saved))
    VerifiedCheckpoint(replay_buffer=buffer).load(checkpoint, components=["replay_buffer"])
    return buffer.storage[: len(buffer)]


class EnvFormat:
    """A dataset's transitions as the env gives them (dtypes, one-hot actions), only the keys
    the losses read: the observation before and after, the action, every reward and the done
    flags (a team's observation and action are ``("agents", ...)`` keys, its rewards each
    agent's and the team's: ``rlrun/builders/envs.py``, ``policy_keys``)."""

    def __init__(self, env: EnvBase, dataset: str) -> None:
        self.dataset = dataset
        self.observation, self.action = policy_keys(env)
        self.rewards = [unravel_key(("next", key)) for key in env.reward_keys]
        self.specs: dict[Any, TensorSpec] = {
            self.observation: env.observation_spec[self.observation],
            unravel_key(("next", self.observation)): env.observation_spec[self.observation],
            self.action: env.full_action_spec[self.action],
        }
        for key in env.reward_keys:
            self.specs[unravel_key(("next", key))] = env.full_reward_spec[key]
        self.batch_ndim = len(env.batch_size)

    def check(self, sample: TensorDictBase) -> None:
        """Refuse a dataset whose observations or actions are not the env's."""
        for key in (self.observation, self.action):
            spec, value = self.specs[key], sample.get(key, None)
            want = spec.shape[self.batch_ndim :]
            got = value.shape[1:] if value is not None else None
            if spec.domain == "discrete" and key == self.action:
                n = spec.space.n
                ok = got in (want, torch.Size([]), torch.Size([1]), torch.Size([n]))
            else:
                ok = got == want and value.is_floating_point()
            if not ok:
                has = f"have shape {tuple(got)}" if got is not None else "are missing"
                name = "/".join(unravel_key(("", key))[1:])
                raise ConfigError(
                    f"dataset={self.dataset}: its {name}s {has}, the env's "
                    f"{tuple(want)} ({spec.domain}); record a dataset of this env, or choose "
                    "the env it was recorded in (env.id=...)."
                )

    def __call__(self, data: TensorDictBase) -> TensorDictBase:
        out = data.select(*self.specs, *DONE_KEYS, strict=False)
        for key, spec in self.specs.items():
            value = out.get(key)
            one_hot = spec.domain == "discrete" and value.shape[-1:] != spec.shape[-1:]
            if key == self.action and one_hot:
                value = torch.nn.functional.one_hot(value.long().reshape(-1), spec.space.n)
            elif key in self.rewards and value.ndim == 1:
                value = value.unsqueeze(-1)
            out.set(key, value.to(spec.dtype))
        return out


class DatasetSampler(TrainerHookBase):
    """An offline run's replay: each optimisation step's sample from the dataset, on the
    learner's device. The dataset is never written, so checkpoints do not hold it."""

    def __init__(self, dataset: ReplayBuffer, device: torch.device) -> None:
        self.dataset = dataset
        self.device = device

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        return self.dataset.sample().to(self.device, non_blocking=True)

    def register(self, trainer: Trainer, name: str = "dataset") -> None:
        trainer.register_op("process_optim_batch", self.sample)


@dataclass
class Replay:
    """What the loss samples from: ``buffer`` for the Trainer to checkpoint (none for a
    dataset, which is never written), ``sampler`` when the update step samples the storage
    itself, and the ``hooks`` that fill the buffer and draw each optimisation step's sample."""

    buffer: Any = None
    sampler: UniformSampler | None = None
    hooks: list[TrainerHookBase] = field(default_factory=list)


def make_replay(
    cfg: DictConfig,
    source: Source,
    off_policy: bool,
    env: EnvBase,
    run_dir: Path,
    where: Placement,
    remote: bool,
    reads: bool,
    started: ExitStack,
) -> Replay:
    """The replay of ``source``: collected frames (off-policy algorithms; a Ray actor's buffer
    with ``remote`` learners), the dataset alone, or both mixed (TorchRL's offline-to-online
    buffer and hooks). ``reads``: a configured hook reads the samples, so the update step may
    not sample the storage itself."""
    if remote:
        return Replay(make_remote_replay_buffer(cfg.replay_buffer, cfg.trainer.num_learners))
    if source == "collector":
        if not off_policy:
            return Replay()
        buffer = make_replay_buffer(cfg.replay_buffer, run_dir, where, cfg.env.atari)
        fused = fuses_sampling(cfg.replay_buffer, where) and not reads
        sampler = UniformSampler(buffer) if fused else None  # sampled inside the update step
        return Replay(buffer, sampler, [make_replay_buffer_hook(buffer, where, sampler)])
    # on the collected frames' device: the two samples are concatenated (device=cuda)
    dataset = load_dataset(cfg, env, scratch_folder(started), where.replay)
    if source == "dataset":
        return Replay(hooks=[DatasetSampler(dataset, where.learner)])
    rb = cfg.replay_buffer
    online = make_replay_buffer(rb, run_dir, where, cfg.env.atari)
    mixed = OfflineToOnlineReplayBuffer(
        Transitions(dataset), online_storage=online.storage, offline_fraction=rb.offline_fraction
    )
    hooks = [OfflineToOnlineReplayBufferHook(mixed, batch_size=rb.batch_size, device=where.learner)]
    if rb.offline_anneal_frames:
        hooks.append(_Anneal(mixed, rb.offline_anneal_frames))
    return Replay(hooks=hooks)


class Transitions:
    """The dataset as the offline-to-online buffer samples it: without the sampler's ``index``,
    which collected frames do not have (the two samples are concatenated)."""

    def __init__(self, dataset: ReplayBuffer) -> None:
        self.dataset = dataset

    def sample(self, batch_size: int | None = None) -> TensorDictBase:
        return self.dataset.sample(batch_size).exclude("index")

    def __len__(self) -> int:
        return len(self.dataset)


class _Anneal(OfflineToOnlineAnnealHook):
    """TorchRL's annealing hook, given its trainer when registered."""

    def __init__(self, mixed: OfflineToOnlineReplayBuffer, frames: int) -> None:
        super().__init__(None, mixed, frames)

    def register(self, trainer: Trainer, name: str = "offline_to_online_anneal") -> None:
        self.trainer = trainer
        super().register(trainer, name)


def scratch_folder(started: ExitStack) -> Path:
    """A temporary folder for the converted dataset, removed when the run ends."""
    folder = Path(tempfile.mkdtemp(prefix="rlrun-dataset-"))
    started.callback(shutil.rmtree, folder, ignore_errors=True)
    return folder
