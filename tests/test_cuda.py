"""``device=cuda`` end to end, through the console script: ``pytest -m cuda`` on a GPU machine.

Skipped (saying so) where there is no CUDA. The same cases, and more, are the GPU matrix
(../shared/gpu/matrix.sh); these assert what the placement promises about each run.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch
from conftest import TINY, built, run_dirs, run_rlrun, summary

pytestmark = pytest.mark.cuda

# Off-policy runs small enough for a test: 2 batches after the random warm-up.
DQN = ["+experiment=dqn", "trainer.total_frames=768", "collector.init_random_frames=256",
       "trainer.progress_bar=false"]  # fmt: skip
SAC = ["+experiment=sac", "trainer.total_frames=800", "collector.init_random_frames=400",
       "trainer.progress_bar=false"]  # fmt: skip
ATARI_PPO = ["+experiment=ppo_atari", "env.num_envs=4", "trainer.total_frames=512",
             "collector.frames_per_batch=256", "algo.minibatch_size=128", "algo.epochs=1",
             "trainer.progress_bar=false"]  # fmt: skip
# envpool is an extra that a GPU image may lack (../shared/gpu carries no envpool: 600 MB of assets)
ENVPOOL = pytest.mark.skipif(importlib.util.find_spec("envpool") is None, reason="no envpool")
PENDULUM = ["env=pendulum", "trainer.total_frames=800", "collector.init_random_frames=400",
            "collector.frames_per_batch=200", "trainer.progress_bar=false"]  # fmt: skip
ATARI_DQN = ["+experiment=dqn_atari", "trainer.total_frames=512", "collector.frames_per_batch=64",
             "collector.init_random_frames=128", "replay_buffer.size=2000",
             "trainer.progress_bar=false"]  # fmt: skip


def trained(workdir: Path, *args: str) -> dict:
    """Run ``rlrun ARGS`` and return its summary; it must have trained every frame."""
    run_rlrun(*args, cwd=workdir)
    result = summary(run_dirs(workdir)[-1])
    assert result["status"] == "completed", result
    return result


@pytest.mark.parametrize(
    "args",
    [
        ["+experiment=ppo", *TINY],
        ["+experiment=ppo_lstm", *TINY],
        ["+experiment=ppo_lstm", "policy=gru", *TINY],
        ["+experiment=ppo", *TINY, "env.backend=gym"],
        ["+experiment=ppo", *TINY, "collector.device=cpu"],
        ["+experiment=ppo", *TINY, "env.parallel=true", "env.num_envs=4"],
        ["+experiment=ppo", *TINY, "eval.every_frames=512", "logger=[csv,tensorboard]"],
        DQN,
        [*DQN, "device=cuda:0", "replay_buffer.storage=memmap",
         "replay_buffer.sampler=prioritized"],
        [*SAC, "replay_buffer.device=cpu", "replay_buffer.pin_memory=true",
         "replay_buffer.prefetch=4"],  # a CPU storage: its samples pinned, then copied
        ATARI_PPO,
        pytest.param([*ATARI_PPO, "env.backend=envpool"], marks=ENVPOOL),
        ATARI_DQN,
        pytest.param([*ATARI_DQN, "env.backend=envpool", "replay_buffer.prefetch=2"],
                     marks=ENVPOOL),
    ],
    ids=["ppo", "ppo_lstm", "ppo_gru", "gym_backend", "collect_on_cpu", "parallel_env",
         "eval", "dqn", "dqn_memmap_prio", "sac_pinned_prefetch", "ppo_atari",
         "ppo_atari_envpool", "dqn_atari", "dqn_atari_envpool_prefetch"],
)  # fmt: skip
def test_preset_trains_on_cuda(workdir: Path, args: list[str]) -> None:
    args = args if any(a.startswith("device=") for a in args) else [*args, "device=cuda"]
    result = trained(workdir, *args)
    assert result["frames"] >= 512


@pytest.mark.parametrize("kind", ["multi_sync", "async"])
@pytest.mark.parametrize("preset", ["ppo", "ppo_lstm"])
def test_multi_process_collectors_on_cuda(workdir: Path, kind: str, preset: str) -> None:
    trained(workdir, f"+experiment={preset}", *TINY, "device=cuda", f"collector={kind}",
            "collector.num_workers=2", "env.normalize_observations=false")  # fmt: skip


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_sweep_jobs_forked_by_their_launcher_train_on_cuda(workdir: Path, launcher: str) -> None:
    """The basic and joblib launchers fork each job from their own process
    (hydra_plugins/rlrun_sweepers/job_process.py): CUDA must still be uninitialised there (rlrun's
    checks count devices through NVML), or every job fails in its fork."""
    run_rlrun("-m", "+experiment=ppo", *TINY, "device=cuda", "seed=0,1",
              f"hydra/launcher={launcher}", cwd=workdir)  # fmt: skip
    assert [summary(run)["status"] for run in run_dirs(workdir)] == ["completed"] * 2


def test_dqn_workers_build_their_policy_on_cuda(workdir: Path) -> None:
    trained(workdir, *DQN, "device=cuda", "collector=multi_sync", "collector.num_workers=2",
            "collector.policy_factory=${policy._target_}")  # fmt: skip


@pytest.mark.parametrize(
    "args",
    [
        ["+experiment=ppo", *TINY, "algo.compile=true"],
        ["+experiment=ppo", *TINY, "algo.cudagraphs=true", "policy.cudagraphs=true"],
        ["+experiment=ppo", *TINY, "algo.compile=true", "algo.cudagraphs=true"],
        [*SAC, "algo.cudagraphs=true"],
        [*DQN, "algo.compile=true", "algo.cudagraphs=true", "replay_buffer.sampler=prioritized"],
        [*DQN, "algo.cudagraphs=true"],
        [*SAC, "algo.compile=true", "algo.cudagraphs=true"],
        [
            "+experiment=td3_mujoco",
            "env=pendulum",
            "trainer.total_frames=800",
            "collector.init_random_frames=400",
            "collector.frames_per_batch=200",
            "algo.cudagraphs=true",
            "trainer.progress_bar=false",
        ],
        # TanhNormal's non-reparameterised draws: CrossQ's next actions, PPO's sampled entropy
        ["+experiment=crossq", *PENDULUM, "algo.cudagraphs=true"],
        ["+experiment=ppo", "env=pendulum", *TINY, "algo.cudagraphs=true"],
    ],
    ids=[
        "ppo_compile",
        "ppo_cudagraphs",
        "ppo_both",
        "sac_cudagraphs",
        "dqn_both_prio",
        "dqn_fused_cudagraphs",
        "sac_both",
        "td3_cudagraphs",
        "crossq_cudagraphs",
        "ppo_continuous_cudagraphs",
    ],
)
def test_compiled_and_captured_update_steps_train(workdir: Path, args: list[str]) -> None:
    trained(workdir, *args, "device=cuda")


def test_a_dataset_and_collected_frames_mix_on_cuda(workdir: Path, random_datasets) -> None:
    """Offline, then offline to online: the dataset sits on the replay storage's device (the
    GPU by default), where the collected frames it is concatenated with live."""
    dataset = f"dataset={random_datasets['Pendulum-v1']}"
    trained(workdir, "+experiment=td3_bc", dataset, "trainer.total_frames=200",
            "collector.frames_per_batch=100", "device=cuda")  # fmt: skip
    trained(workdir, "+experiment=iql", dataset, "collector=sync", "trainer.total_frames=400",
            "collector.frames_per_batch=200", "trainer.progress_bar=false",
            "device=cuda")  # fmt: skip


@pytest.mark.parametrize(("first", "then"), [("cuda", "cpu"), ("cpu", "cuda")])
def test_resume_across_devices(workdir: Path, first: str, then: str) -> None:
    trained(workdir, *DQN, f"device={first}")
    run = run_dirs(workdir)[0]
    run_rlrun(f"resume={run}", f"device={then}", "trainer.total_frames=1024", cwd=workdir)
    result = summary(run)
    assert result["status"] == "completed" and result["frames"] == 1024


def test_the_cnn_reads_floats_on_the_gpu_while_the_buffer_keeps_uint8_frames(tmp_path: Path):
    seen: list[torch.Tensor] = []
    with built(tmp_path, *ATARI_DQN, "device=cuda") as (_, trainer):
        conv = next(m for m in trainer.collector.policy.modules() if isinstance(m, torch.nn.Conv2d))
        conv.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
        trainer.train()
        stored = trainer.replay_buffer.storage[:8]
    assert stored["frame"].dtype == torch.uint8 and stored["frame"].device.type == "cpu"
    assert seen and all(x.device.type == "cuda" and x.dtype == torch.float32 for x in seen)
    assert all(0.0 <= x.min() and x.max() <= 1.0 for x in seen)


CAPTURED = ["device=cuda", "algo.cudagraphs=true", "collector.init_random_frames=0"]
STEPS = 24  # past each phase's warm-up and capture (CUDAGRAPH_WARMUP + 1 calls), then replays


def captured_steps(tmp_path: Path, watch, *overrides: str) -> list:
    """``watch(trainer)`` after each of ``STEPS`` update steps of a run built with ``overrides``
    and ``CAPTURED``, all on one collected batch."""
    seen = []
    with built(tmp_path, *overrides, *CAPTURED) as (_, trainer):
        batch = trainer._process_batch_hook(next(iter(trainer.collector)))
        step = trainer.optimization_stepper
        for _ in range(STEPS):
            step.step(trainer, trainer._process_optim_batch_hook(batch))
            seen.append(watch(trainer))
    return seen


def flat(params) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in params.values(True, True)]).clone()


def changes(snapshots: list[torch.Tensor]) -> list[bool]:
    return [not torch.equal(a, b) for a, b in zip(snapshots, snapshots[1:], strict=False)]


def test_td3_actor_delay_holds_under_a_graph(tmp_path: Path) -> None:
    """Each phase (critic only, critic and actor) is its own captured graph: the actor and its
    targets move every 2nd step, replay after replay, not as the capture did."""
    seen = captured_steps(
        tmp_path,
        lambda t: (flat(t.loss_module.actor_network_params),
                   flat(t.loss_module.target_actor_network_params)),
        "+experiment=td3_mujoco", "env=pendulum", "collector.frames_per_batch=64",
    )  # fmt: skip
    actor = changes([a for a, _ in seen])
    target = changes([t for _, t in seen])
    assert actor == [i % 2 == 0 for i in range(STEPS - 1)] == target, (actor, target)


def test_dqn_hard_target_copies_hold_under_a_graph(tmp_path: Path) -> None:
    """The copy counter runs in Python between replays: the target moves once every 4 steps."""
    seen = captured_steps(
        tmp_path, lambda t: flat(t.loss_module.target_value_network_params),
        "+experiment=dqn", "algo.target_update_period=4",
    )  # fmt: skip
    moved = changes(seen)
    assert moved == [step % 4 == 0 for step in range(2, STEPS + 1)], moved


def test_sac_temperature_and_learning_rate_are_read_at_each_replay(tmp_path: Path) -> None:
    """SAC's entropy temperature changes at every replayed step; once the learning rate
    (a tensor, as annealing sets it) is 0, a replayed step leaves the weights where they are."""

    def watch(trainer) -> tuple:
        lr = trainer.optimizer.param_groups[0]["lr"]
        if len(seen_lr) == STEPS // 2:
            lr.fill_(0.0)  # what LinearLRAnnealing does at the end of a run
        seen_lr.append(float(lr))
        loss = trainer.loss_module
        return float(loss.log_alpha), flat(loss.actor_network_params)

    seen_lr: list[float] = []
    seen = captured_steps(tmp_path, watch, "+experiment=sac", "collector.frames_per_batch=64")
    alphas = [a for a, _ in seen[: STEPS // 2]]
    assert len(set(alphas)) == len(alphas)  # a new temperature at every step
    moved = changes([p for _, p in seen])
    assert all(moved[: STEPS // 2 - 1]) and not any(moved[STEPS // 2 + 1 :]), moved
