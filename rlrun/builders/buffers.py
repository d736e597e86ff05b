"""Replay buffers from the ``replay_buffer`` config group, and the Trainer hook that feeds them.

Pinned memory is done here rather than by TorchRL's ``pin_memory=True``, which pins inside
``_sample`` only when the transform's output declares ``device="cpu"`` (a transform that
returns ``device=None`` silently turns it off), before the info keys (``index``, ``_weight``)
are written, and which raises on a CPU-only build. :class:`PinnedReplayBuffer` pins the whole
sample after the transform chain and the info keys; :class:`ReplayBufferHook` then moves it to
the train device with ``non_blocking=True``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.data.replay_buffers import (
    RandomSampler,
    Sampler,
    SamplerWithoutReplacement,
    SliceSampler,
)
from torchrl.envs import CatFrames, Compose, Transform
from torchrl.trainers import ReplayBufferTrainer, Trainer

from rlrun.builders.devices import Placement
from rlrun.builders.disk import allocate, payload_bytes, reserve, size_text
from rlrun.compat.torchrl import HookedMemmapStorage, PrioritizedSamplerTorch, storage_contents

TRAJ_KEY = ("collector", "traj_ids")  # written by TorchRL collectors; the slice sampler's key


class PinnedReplayBuffer(TensorDictReplayBuffer):
    """A TensorDictReplayBuffer whose samples are pinned as a last step, whatever device the
    transforms' output declares, info keys included."""

    def __init__(self, *, pin: bool, **kwargs: Any) -> None:
        super().__init__(pin_memory=False, **kwargs)
        self.pin = pin

    def sample(
        self, batch_size: int | None = None, return_info: bool = False, include_info=None
    ) -> TensorDictBase | tuple[TensorDictBase, dict]:
        data, info = super().sample(batch_size, return_info=True, include_info=include_info)
        data = self.pin_sample(data)
        return (data, info) if return_info else data

    def pin_sample(self, data: TensorDictBase) -> TensorDictBase:
        """The last step of sampling: pin every tensor of the finished sample."""
        return data.pin_memory() if self.pin else data


OBSERVATIONS = ("observation", ("next", "observation"))
FRAMES = ("frame", ("next", "frame"))


class NewestFrame(Transform):
    """Written to the buffer: the newest frame of each observation stack (``frame``), not the
    stacks; ``FrameStackReplayBuffer`` rebuilds them from consecutive frames when sampling."""

    def __init__(self) -> None:
        super().__init__(in_keys_inv=list(OBSERVATIONS), out_keys_inv=list(FRAMES))

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for stack, frame in zip(OBSERVATIONS, FRAMES, strict=True):
            tensordict.set(frame, tensordict.get(stack)[..., -1:, :, :])
        return tensordict.exclude(*OBSERVATIONS)


class StackedSlices(Transform):
    """Read from the buffer: slices of ``frames`` consecutive steps of one trajectory become the
    last step's observation and next observation stacks, the frames concatenated oldest first
    as the env's ``CatFrames`` did.

    TorchRL's ``CatFrames`` used as a buffer transform (``make_rb_transform_and_sampler``) masks
    episode starts over the whole slice with boolean image-sized tensors: 70% of a CPU
    ``dqn_atari`` run (py-spy, 2026-11-27, 21 frames/s). Its strict slices never cross an episode
    start, so the stack is the slice itself and a reshape rebuilds it.
    """

    def __init__(self, frames: int) -> None:
        super().__init__()
        self.frames = frames

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        slices = tensordict.reshape(-1, self.frames)
        last = slices[:, -1]
        for stack, frame in zip(OBSERVATIONS, FRAMES, strict=True):
            last.set(stack, slices.get(frame).flatten(1, 2))  # [B, N, 1, H, W] -> [B, N, H, W]
        return last.exclude(*FRAMES)


class FrameStackReplayBuffer(PinnedReplayBuffer):
    """``replay_buffer.single_frames``: each frame is stored once, not in ``frames`` stacks
    (4x less memory: 1M Atari transitions take 14 GB, not 56 GB).

    The sampler of TorchRL's ``CatFrames.make_rb_transform_and_sampler`` samples slices of
    ``frames`` consecutive steps of one trajectory (collector trajectory ids);
    :class:`StackedSlices` rebuilds the stacks of the last step. The slices never reach before
    a trajectory's start, so the first ``frames - 1`` steps of each trajectory are not sampled.
    """

    def __init__(self, *, frames: int, transform: Transform | None, **kwargs: Any) -> None:
        catframes = CatFrames(
            N=frames, dim=-3, in_keys=["frame"], out_keys=["observation"], reset_key="_reset"
        )
        _, sampler = catframes.make_rb_transform_and_sampler(
            kwargs["batch_size"], traj_key=TRAJ_KEY, strict_length=True
        )
        chain = [StackedSlices(frames), NewestFrame()] + ([transform] if transform else [])
        super().__init__(sampler=sampler, transform=Compose(*chain), **kwargs)
        self.frames = frames

    def sample(
        self, batch_size: int | None = None, return_info: bool = False, include_info=None
    ) -> TensorDictBase | tuple[TensorDictBase, dict]:
        # TorchRL's TensorDictReplayBuffer would write the indices of all ``frames`` steps of
        # each slice into a sample of one step per slice: keep the last step's.
        data, info = ReplayBuffer.sample(self, batch_size, return_info=True)
        info["index"] = info["index"][0].reshape(-1, self.frames)[:, -1]
        data.set("index", info["index"])
        data = self.pin_sample(data)
        return (data, info) if return_info else data


class UniformSampler:
    """Uniform replay samples read straight from a tensor storage, as tensor ops only: a fused
    update step calls it, so that sampling compiles and, with the storage on the learner's
    device, is captured in the step's CUDA graph (LeanRL's and TorchRL's recipes sample on the
    GPU too).

    What TorchRL's ``ReplayBuffer.sample`` adds around the same gather (locks, sampler and writer
    calls, the info keys) costs more than the gather itself for batches of a few hundred. The
    number of stored transitions is a tensor on the storage's device, refreshed after each
    extend: a captured step reads it from memory instead of replaying the count it was
    captured with, and no step waits for the host.
    """

    def __init__(self, replay_buffer: ReplayBuffer) -> None:
        self.storage = replay_buffer.storage
        self.batch_size = replay_buffer.batch_size
        self.device = self.storage.device
        self.stored = torch.zeros((), device=self.device)
        self.keys: list[NestedKey] | None = None  # None: every stored entry
        self.view: tuple[TensorDictBase, TensorDictBase] | None = None  # (contents, selected)

    def read_only(self, keys: list[NestedKey] | None) -> None:
        """Gather only ``keys`` (the loss's, ``batch_keys``): a sample's cost grows with the
        entries gathered, and a collected batch stores more than a loss reads (DQN: 16 entries
        for its loss's 6, 80 against 37 µs a sample of 64 on one CPU thread, 2026-12-06)."""
        self.keys = keys
        self.view = None

    def refresh(self) -> None:
        """Called after each extend (in Python, outside any captured step)."""
        self.stored.fill_(len(self.storage))

    def sample(self) -> TensorDictBase:
        index = (torch.rand(self.batch_size, device=self.device) * self.stored).long()
        return self.contents()[index]

    def contents(self) -> TensorDictBase:
        """The storage's tensors, the :meth:`read_only` ones (the same tensors, selected anew
        when the storage holds another tensordict: one loaded from a checkpoint)."""
        contents = storage_contents(self.storage)
        if self.keys is None:
            return contents
        if self.view is None or self.view[0] is not contents:
            self.view = (contents, contents.select(*self.keys, strict=False))
        return self.view[1]


def fuses_sampling(cfg: DictConfig, where: Placement) -> bool:
    """Whether the update step samples the replay buffer itself (:class:`UniformSampler`): a
    uniform sampler over a storage on the learner's device, with no transforms or prefetch
    threads. Prioritized, slice and frame-stack sampling keep TorchRL's buffer, sampled by the
    hook on ``process_optim_batch`` with priorities updated on ``post_loss``."""
    return (
        cfg.sampler == "random"
        and not cfg.single_frames
        and not cfg.transforms
        and not cfg.prefetch
        and where.replay == where.learner
    )


class ReplayBufferHook(ReplayBufferTrainer):
    """TorchRL's replay-buffer hook (extend on ``batch_process``, sample on
    ``process_optim_batch``, priorities on ``post_loss``) with a non-blocking move of the
    (pinned) sample to the train device. With a ``fused`` sampler the update step samples
    itself: the hook only extends the buffer and refreshes the sampler's count."""

    def __init__(self, *args: Any, fused: UniformSampler | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fused = fused

    def extend(self, batch: TensorDictBase) -> TensorDictBase:
        # TorchRL's flattening also sets ``truncated`` on every step of a [env, time] batch.
        self.replay_buffer.extend(batch.reshape(-1))
        if self.fused is not None:
            self.fused.refresh()
        return batch

    def register(self, trainer: Trainer, name: str = "replay_buffer") -> None:
        if self.fused is None:
            return super().register(trainer, name)
        trainer.register_op("batch_process", self.extend)
        trainer.register_module(name, self)

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        sample = self.replay_buffer.sample(batch_size=self.batch_size)
        return sample.to(self.device, non_blocking=True) if self.device is not None else sample


def _sampler(cfg: DictConfig) -> Sampler:
    name = cfg.sampler
    if name == "prioritized":
        return PrioritizedSamplerTorch(max_capacity=cfg.size, alpha=cfg.alpha, beta=cfg.beta)
    if name == "without_replacement":
        return SamplerWithoutReplacement(drop_last=False)
    if name == "slice":
        return SliceSampler(slice_len=cfg.slice_len, traj_key=TRAJ_KEY, strict_length=False)
    return RandomSampler()


class ReservedMemmapStorage(HookedMemmapStorage):
    """TorchRL's memmapped storage, its files' blocks allocated when they are created: a full
    disk is then one clean error at the first batch, not a SIGBUS later
    (``rlrun/builders/disk.py``)."""

    def before_files(self, data: TensorDictBase | torch.Tensor) -> None:
        need = payload_bytes(data, rows=self.max_size)
        reserve(Path(self.scratch_dir), need, f"the memmapped replay buffer ({size_text(need)})")

    def after_files(self) -> None:
        allocate(p for p in Path(self.scratch_dir).rglob("*") if p.is_file())


def _storage(cfg: DictConfig, run_dir: Path, device: torch.device):
    if cfg.storage == "memmap":  # on disk: the placement keeps it on the CPU
        scratch = run_dir / "replay_buffer"
        # An earlier process's live files (this run resumed): the checkpoint being resumed holds
        # its own copy, and TorchRL refuses to load it over existing files.
        shutil.rmtree(scratch, ignore_errors=True)
        return ReservedMemmapStorage(cfg.size, scratch_dir=scratch, device=device)
    return LazyTensorStorage(cfg.size, device=device)


def make_replay_buffer(
    cfg: DictConfig, run_dir: Path, where: Placement, atari: DictConfig | None = None
) -> PinnedReplayBuffer:
    """Storage (on ``where.replay``), sampler, transforms (``_target_``, user classes allowed),
    prefetch and pinning (``where.pin_memory``); with ``cfg.single_frames``, the frames of
    ``atari.frame_stack``-frame observations stored one by one (``env.atari``)."""
    transforms = [instantiate(t) for t in cfg.transforms]
    common = {
        "pin": where.pin_memory,
        "storage": _storage(cfg, run_dir, where.replay),
        "batch_size": cfg.batch_size,
        "prefetch": cfg.prefetch or None,
        "transform": Compose(*transforms) if transforms else None,
    }
    if cfg.single_frames:
        return FrameStackReplayBuffer(frames=atari.frame_stack, **common)
    return PinnedReplayBuffer(sampler=_sampler(cfg), **common)


def make_replay_buffer_hook(
    rb: PinnedReplayBuffer, where: Placement, fused: UniformSampler | None = None
) -> ReplayBufferHook:
    """The Trainer hook: flat transitions in, samples on the learner's device out (or, with
    ``fused``, sampled by the update step itself)."""
    return ReplayBufferHook(rb, device=where.learner, fused=fused)
