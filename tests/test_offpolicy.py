"""DQN and SAC through the real ``rlrun`` console script: tiny runs, run-folder contents, errors,
and short learning checks with fixed seeds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from conftest import run_dirs, run_rlrun, series, summary

import rlrun

QUIET = ["trainer.progress_bar=false", "checkpoint.every_frames=0"]
# 3 batches of 128 frames, the first one random; a few optimisation steps per batch.
DQN_TINY = [
    *QUIET,
    "trainer.total_frames=384",
    "collector.frames_per_batch=128",
    "collector.init_random_frames=128",
    "algo.utd_ratio=0.05",
]
SAC_TINY = [
    *QUIET,
    "trainer.total_frames=300",
    "collector.frames_per_batch=100",
    "collector.init_random_frames=100",
    "algo.utd_ratio=0.05",
    "policy.hidden_sizes=[32,32]",
]
TESTS_DIR = str(Path(__file__).parent)


def checkpoint_components(run_dir: Path) -> set[str]:
    (ckpt,) = (run_dir / "checkpoints").iterdir()
    return {p.name.split("-", 1)[1] for p in (ckpt / "components").iterdir()}


def test_dqn_prioritized_tiny_run(workdir: Path) -> None:
    run_rlrun(
        "+experiment=dqn",
        "replay_buffer.size=200000",
        "replay_buffer.sampler=prioritized",
        *DQN_TINY,
        cwd=workdir,
    )
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    assert summary(run_dir)["frames"] == 384
    eps = [v for _, v in series(run_dir, "epsilon")]
    assert eps[0] > eps[-1] and eps[0] <= 1.0  # annealed over frames
    assert series(run_dir, "optim_steps")[-1][1] > 0  # learning started after the random frames
    assert {"replay_buffer", "target_updater", "trainer_module.exploration"} <= (
        checkpoint_components(run_dir)
    )


def test_sac_memmap_pinned_transforms_tiny_run(workdir: Path) -> None:
    tmp = workdir / "tmpdir"
    tmp.mkdir()
    env = {
        "TMPDIR": str(tmp),
        "PYTHONPATH": os.pathsep.join([TESTS_DIR, os.environ.get("PYTHONPATH", "")]),
    }
    proc = run_rlrun(
        "+experiment=sac",
        "replay_buffer.storage=memmap",
        "replay_buffer.prefetch=2",
        "replay_buffer.pin_memory=true",
        "replay_buffer.transforms=[{_target_: test_buffers.DropDevice}]",
        "policy.state_dependent_std=false",  # one learned log-std per action dim (IQL's paper)
        *SAC_TINY,
        cwd=workdir,
        env=env,
    )
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    assert list((run_dir / "replay_buffer").rglob("*.memmap")), "memmap storage in the run folder"
    assert not [p for p in tmp.rglob("*") if p.is_file()], "nothing written to TMPDIR"
    assert sorted(p.name for p in workdir.iterdir()) == ["outputs", "tmpdir"]
    assert "replay_buffer" in checkpoint_components(run_dir)
    warned = proc.stderr.count("replay_buffer.pin_memory=true but CUDA is not available")
    assert warned == (0 if torch.cuda.is_available() else 1)
    names = [name for name, _ in rlrun.load(run_dir).named_parameters()]
    assert [n for n in names if "scale" in n] == [
        "td_policy.module.0.module.1.state_independent_scale"
    ]


def test_dqn_needs_a_q_network(tmp_path: Path) -> None:
    """Its own networks by default (policy._target_ null); a factory without a Q network is
    refused in one line that names the fix. Only the built policy shows it, after Hydra made
    the run folder: the refusal takes the folder away again (no failed run to resume)."""
    factory = "policy._target_=rlrun.builders.policies.make_actor_critic"
    proc = run_rlrun("algo=dqn", factory, *DQN_TINY, cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr  # one line
    assert "algo=dqn needs a Q-network" in proc.stderr
    assert "policy._target_=null" in proc.stderr
    assert proc.stdout == "" and list(tmp_path.iterdir()) == []  # no folder, no summary


def bounds(actor: torch.nn.Module) -> list[torch.Tensor]:
    """TanhNormal's ``low`` and ``high`` as the actor's distribution will read them."""
    (kwargs,) = [
        m.distribution_kwargs for m in actor.modules() if hasattr(m, "distribution_kwargs")
    ]
    return [kwargs["low"], kwargs["high"]]


@pytest.mark.parametrize("to", [torch.float64, pytest.param("cuda", marks=pytest.mark.cuda)])
def test_the_actors_action_bounds_move_with_it(to) -> None:
    """TorchRL keeps them in a plain dict that ``.to()`` skips: on a GPU each call copied them
    from the CPU, which a CUDA graph cannot capture. A copy moved elsewhere (the collector's)
    leaves the original's where they were."""
    import copy

    from torchrl.envs import GymEnv

    from rlrun.builders.policies import make_stochastic_actor_q

    env = GymEnv("Pendulum-v1")
    ac = make_stochastic_actor_q(
        observation_spec=env.observation_spec, action_spec=env.full_action_spec["action"]
    )
    moved = copy.deepcopy(ac.actor).to(to)
    weight = next(moved.parameters())
    assert all(b.dtype == weight.dtype and b.device == weight.device for b in bounds(moved))
    assert all(b.dtype == torch.float32 and b.device.type == "cpu" for b in bounds(ac.actor))
    torch.testing.assert_close(bounds(moved)[1].cpu().float(), torch.tensor([2.0]))


def test_tanh_normal_draws_without_a_host_sync_from_the_same_distribution() -> None:
    """``CapturableTanhNormal`` draws ``loc + eps * scale`` (``torch.normal`` checks its std on
    the host, which CUDA graph capture refuses): the same law as TorchRL's ``TanhNormal``, no
    pathwise gradient in ``sample()``, and the log-prob of the very draw."""
    from torchrl.modules import TanhNormal

    from rlrun.builders.policies import CapturableTanhNormal

    loc = torch.full((20000, 2), 0.3, requires_grad=True)
    scale = torch.full((20000, 2), 0.5, requires_grad=True)
    bounds = {"low": -2 * torch.ones(2), "high": 2 * torch.ones(2)}
    ours, theirs = CapturableTanhNormal(loc, scale, **bounds), TanhNormal(loc, scale, **bounds)
    torch.manual_seed(0)
    drawn, reference = ours.sample(), theirs.sample()
    assert not drawn.requires_grad and drawn.abs().max() <= 2
    torch.testing.assert_close(drawn.mean(0), reference.mean(0), atol=0.03, rtol=0)
    torch.testing.assert_close(drawn.std(0), reference.std(0), atol=0.03, rtol=0)
    action, log_prob = ours.sample_and_log_prob((3,))
    assert action.shape == (3, 20000, 2) and log_prob.requires_grad
    torch.testing.assert_close(log_prob, ours.log_prob(action), atol=1e-4, rtol=1e-4)
