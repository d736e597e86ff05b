"""Replay buffers from config: pinning after the transforms, prioritized sampling, samplers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import compose, cpu_placement
from omegaconf import OmegaConf
from tensordict import TensorDict, TensorDictBase

from rlrun.builders.buffers import PinnedReplayBuffer, make_replay_buffer, make_replay_buffer_hook
from rlrun.builders.devices import placement
from rlrun.commandline import describe_config_error
from rlrun.errors import ConfigError
from rlrun.validation import validate

N = 64


class DropDevice:
    """A user transform that rebuilds the sample with ``device=None`` and adds a key."""

    def __call__(self, td: TensorDictBase) -> TensorDict:
        out = TensorDict(dict(td.items()), batch_size=td.batch_size, device=None)
        out["obs_scaled"] = td["observation"] * 2
        return out


def rb_cfg(**overrides) -> OmegaConf:
    """The shipped replay_buffer config with ``overrides``."""
    base = {"size": N, "batch_size": 16}
    return OmegaConf.merge(compose().replay_buffer, {**base, **overrides})


def transitions(n: int = N) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.arange(n, dtype=torch.float32).unsqueeze(-1),
            "next": {"reward": torch.zeros(n, 1)},
        },
        batch_size=[n],
    )


def leaves(td: TensorDictBase) -> list[torch.Tensor]:
    return list(td.values(include_nested=True, leaves_only=True))


@pytest.mark.cuda
def test_samples_pinned_after_device_none_transform(tmp_path: Path) -> None:
    cfg = rb_cfg(
        pin_memory="true",
        sampler="prioritized",
        transforms=[{"_target_": f"{__name__}.DropDevice"}],
    )
    # pinning is for a CPU storage (by default the storage is on the learner's device)
    where = placement(
        compose("device=cuda", "replay_buffer.device=cpu", "replay_buffer.pin_memory=true")
    )
    assert where.pin_memory
    rb = make_replay_buffer(cfg, tmp_path, where)
    rb.extend(transitions())
    sample = rb.sample()
    assert "obs_scaled" in sample.keys()
    assert all(t.is_pinned() for t in leaves(sample)), "every tensor, info keys included"
    moved = make_replay_buffer_hook(rb, where).sample(None)
    assert all(t.device.type == "cuda" for t in leaves(moved))
    torch.testing.assert_close(moved["obs_scaled"], moved["observation"] * 2)


class RecordPinInput(PinnedReplayBuffer):
    """Keeps what the pinning step received (a probe, not a replacement: it calls through)."""

    def pin_sample(self, data: TensorDictBase) -> TensorDictBase:
        self.pin_input = data
        return super().pin_sample(data)


def test_pinning_step_sees_the_transformed_sample() -> None:
    from torchrl.data import LazyTensorStorage

    rb = RecordPinInput(
        pin=False, storage=LazyTensorStorage(N), batch_size=16, transform=DropDevice()
    )
    rb.extend(transitions())
    sample = rb.sample()
    seen = rb.pin_input
    assert seen is sample
    assert seen.device is None  # the transform's own output, not the storage's cpu sample
    assert "obs_scaled" in seen.keys() and "index" in seen.keys()  # after transforms and info


def test_prioritized_updates_priorities_and_favours_high_error(tmp_path) -> None:
    rb = make_replay_buffer(
        rb_cfg(sampler="prioritized", batch_size=512), tmp_path, cpu_placement()
    )
    rb.extend(transitions())
    hook = make_replay_buffer_hook(rb, cpu_placement())
    before = rb.sampler._sum_tree[torch.arange(N)].clone()
    sample = hook.sample(None)
    counts_before = torch.bincount(sample["index"], minlength=N)
    sample["td_error"] = torch.where(sample["index"] == 7, 100.0, 0.01)  # what a loss writes
    hook.update_priority(sample)
    after = rb.sampler._sum_tree[torch.arange(N)]
    assert after[7] > before[7] and after[8] < before[8]
    counts = torch.bincount(hook.sample(None)["index"], minlength=N)
    assert counts[7] > 0.5 * counts.sum() > counts_before[7]
    assert "priority_weight" in sample.keys()  # importance weights for the loss


def test_slice_sampler_keeps_each_slice_in_one_trajectory(tmp_path) -> None:
    rb = make_replay_buffer(rb_cfg(sampler="slice", slice_len=4), tmp_path, cpu_placement())
    data = transitions()
    data["collector", "traj_ids"] = torch.arange(N) // 8  # 8 trajectories of 8 steps
    rb.extend(data)
    slices = rb.sample().reshape(4, 4)
    ids = slices["collector", "traj_ids"]
    assert (ids == ids[:, :1]).all()


def test_memmap_storage_lives_under_run_folder(tmp_path) -> None:
    rb = make_replay_buffer(rb_cfg(storage="memmap"), tmp_path, cpu_placement())
    rb.extend(transitions())
    assert list((tmp_path / "replay_buffer").rglob("*.memmap"))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["replay_buffer.sampler=prio"], "replay_buffer.sampler=prio is not valid"),
        (["replay_buffer.storage=disk"], "replay_buffer.storage=disk is not valid"),
        (["replay_buffer.sampler=slice", "replay_buffer.slice_len=5"], "slice_len=5 must divide"),
    ],
)
def test_bad_config_names_the_key(overrides, message) -> None:
    try:  # refused at compose time (a choice), or by validation (a rule)
        validate(compose("+experiment=dqn", *overrides))
    except ConfigError as err:
        said = str(err)
    except Exception as err:
        said = describe_config_error(err)
    else:
        pytest.fail("accepted")
    assert message in said
