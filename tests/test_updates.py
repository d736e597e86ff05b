"""The learner's update step (rlrun/builders/updates.py): the same step as TorchRL's default, with
the loss's priorities handed to ``post_loss`` hooks; compiled through the console script."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conftest import built, compose, run_dirs, run_rlrun, series, summary
from torchrl.collectors import Collector
from torchrl.objectives import DQNLoss, ValueEstimators
from torchrl.trainers import DefaultOptimizationStepper

from rlrun.builders.envs import make_env
from rlrun.builders.hooks import LinearLRAnnealing
from rlrun.builders.policies import make_qvalue_actor
from rlrun.builders.updates import UpdateStep


def dqn_loss_and_batch() -> tuple[DQNLoss, object]:
    torch.manual_seed(0)
    env = make_env(compose("env.num_envs=2").env, seed=0)
    ac = make_qvalue_actor(
        observation_spec=env.observation_spec, action_spec=env.full_action_spec["action"]
    )
    loss = DQNLoss(ac.qvalue, delay_value=True)
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    collector = Collector(env, ac.actor, frames_per_batch=64, total_frames=64)
    batch = next(iter(collector)).reshape(-1)
    collector.shutdown()
    return loss, batch


def test_update_step_is_torchrls_default_step_and_passes_on_priorities() -> None:
    loss, batch = dqn_loss_and_batch()
    theirs_loss = copy.deepcopy(loss)
    ours_opt = torch.optim.Adam(loss.parameters(), lr=1e-2)
    theirs_opt = torch.optim.Adam(theirs_loss.parameters(), lr=1e-2)
    seen = []
    ours = UpdateStep(loss, ours_opt, 0.5, torch.device("cpu"))
    trainer = SimpleNamespace(_post_loss_hook=seen.append)
    theirs = DefaultOptimizationStepper()
    reference = SimpleNamespace(
        compute_loss=theirs_loss, optimizer=theirs_opt, clip_grad_norm=True, clip_norm=0.5
    )
    for _ in range(3):
        out = ours.step(trainer, batch)
        expected = theirs.step(reference, batch.exclude("td_error"))
    for ours_p, theirs_p in zip(loss.parameters(), theirs_loss.parameters(), strict=True):
        torch.testing.assert_close(ours_p, theirs_p)
    torch.testing.assert_close(out["loss"], expected["loss"])
    torch.testing.assert_close(out["grad_norm"], expected["grad_norm"])
    assert out["grad_norm"].dim() == 0 and "td_error" not in out.keys()  # no per-step sync
    assert len(seen) == 3 and seen[-1] is batch
    assert batch["td_error"].shape[0] == batch.shape[0]  # what a prioritized sampler reads


def first_minibatch(preset: str, tmp_path: Path) -> tuple[object, object]:
    """The loss of ``rlrun +experiment=PRESET`` and the first minibatch it would train on."""
    overrides = [f"+experiment={preset}", "collector.init_random_frames=0"]
    if preset in ("dqn", "sac"):  # sampled by the Trainer's hook, not inside the step
        overrides.append("replay_buffer.sampler=prioritized")
    with built(tmp_path, *overrides) as (_, trainer):
        batch = trainer._process_batch_hook(next(iter(trainer.collector)))
        return trainer.loss_module, trainer._process_optim_batch_hook(batch)


@pytest.mark.filterwarnings("ignore:This module is instantiated on a machine without CUDA")
@pytest.mark.parametrize("preset", ["ppo", "ppo_lstm", "dqn", "sac"])
def test_captured_step_path_trains_as_the_eager_step(preset: str, tmp_path: Path) -> None:
    """``algo.cudagraphs``' path without a fused sampler (PPO's minibatches, prioritized
    replay), where tensordict's CudaGraphModule runs the function as it is (no CUDA here): it
    must get the whole minibatch (PPO's advantages, recurrent states), train exactly as the
    eager step, and hand the TD errors back."""
    loss, batch = first_minibatch(preset, tmp_path)
    eager_loss = copy.deepcopy(loss)
    cpu = torch.device("cpu")
    captured = UpdateStep(loss, torch.optim.Adam(loss.parameters()), 1.0, cpu, cudagraphs=True)
    eager = UpdateStep(eager_loss, torch.optim.Adam(eager_loss.parameters()), 1.0, cpu)
    trainer = SimpleNamespace(_post_loss_hook=lambda batch: None)
    for step in range(2):  # each step gets a fresh minibatch, as from a sampler
        ours, reference = batch.clone(), batch.clone()
        torch.manual_seed(step)  # SAC samples actions in its loss
        out = captured.step(trainer, ours)
        torch.manual_seed(step)
        expected = eager.step(trainer, reference)
        for key, value in expected.items():
            torch.testing.assert_close(out[key], value, msg=key)
        if "td_error" in reference.keys():  # DQN, SAC: what a prioritized sampler reads
            torch.testing.assert_close(ours.get("td_error"), reference.get("td_error"))
    for ours, reference in zip(loss.parameters(), eager_loss.parameters(), strict=True):
        torch.testing.assert_close(ours, reference)


def test_lr_annealing_updates_a_tensor_learning_rate_in_place() -> None:
    """A captured optimiser step reads its lr from a tensor: annealing must keep that tensor."""
    param = torch.nn.Parameter(torch.zeros(2))
    lr = torch.tensor(0.1)
    optimizer = torch.optim.Adam([param], lr=lr, foreach=False)
    hook = LinearLRAnnealing(optimizer, total_frames=100)
    hook.trainer = SimpleNamespace(collected_frames=75)
    hook()
    assert optimizer.param_groups[0]["lr"] is lr
    assert math.isclose(lr.item(), 0.025, rel_tol=1e-6)
    assert math.isclose(hook.log(None)["train/lr"], 0.025, rel_tol=1e-6)


def test_auto_picks_what_the_algorithm_declares_for_the_device_and_the_runs_length() -> None:
    """``algo.compile=auto``/``algo.cudagraphs=auto`` (the defaults): the algorithm's measured
    ``Auto`` for the learner's device, in runs long enough to pay the compilation back; true or
    false as set win; no declaration for a device: eager there."""
    from omegaconf import OmegaConf

    from rlrun.algorithms import shipped

    algos = shipped()
    auto = OmegaConf.create({"compile": "auto", "cudagraphs": "auto"})
    dqn_cpu = algos["dqn"].auto["cpu"]
    assert algos["dqn"].fast_path(auto, "cpu", dqn_cpu.min_steps) == (True, False)
    assert algos["dqn"].fast_path(auto, "cpu", dqn_cpu.min_steps - 1) == (False, False)
    assert algos["dqn"].fast_path(auto, "cuda", 10**9) == (False, False)  # not measured there
    assert algos["ppo"].fast_path(auto, "cpu", 10**9) == (False, False)
    assert algos["sac"].fast_path(auto, "cuda", 10**9) == (True, True)
    assert algos["sac"].fast_path(auto, "cpu", 10**9) == (False, False)
    forced = OmegaConf.create({"compile": True, "cudagraphs": False})
    assert algos["ppo"].fast_path(forced, "cpu", 1) == (True, False)
    off = OmegaConf.create({"compile": False, "cudagraphs": "auto"})
    assert algos["dqn"].fast_path(off, "cpu", 10**9) == (False, False)
    for name, algorithm in algos.items():  # auto captures only what is known to capture
        assert algorithm.cudagraphs or not any(a.cudagraphs for a in algorithm.auto.values()), name


def test_auto_compiles_the_fused_step_of_a_long_enough_run_once_and_says_so(
    workdir: Path,
) -> None:
    """``algo.compile=auto`` (the default) on the CPU with a user's TD3 that declares a compiled
    CPU step from 100 optimisation steps on (tests/auto_compiled.py), as a sweep: the 64-step
    job stays eager; the 192-step job says in its first lines that it compiles TD3's fused step
    (sampling, loss, backward, optimiser step, soft target update) with its actor delay, two
    phases each compiled once, and an annealed learning rate (a float one compiled the step
    again for each new value): no graph is compiled after the first batch that trains, and the
    warm-up time is logged apart. ``algo.compile=maybe`` is refused in one line naming the
    choices, and a compile the user set is not said to be picked. (A prioritized sample's path
    through compile: the CUDA tests.)"""
    common = [
        "+experiment=td3_mujoco", "env=pendulum", "algo._target_=auto_compiled.ALGORITHM",
        "policy.hidden_sizes=[32,32]", "collector.frames_per_batch=64",
        "replay_buffer.batch_size=64", "collector.init_random_frames=64", "optim.anneal_lr=true",
        "trainer.progress_bar=false",
    ]  # fmt: skip
    env = {"PYTHONPATH": str(Path(__file__).parent)}
    proc = run_rlrun("-m", *common, "trainer.total_frames=64,192", cwd=workdir, env=env,
                     timeout=600)  # fmt: skip
    said = [line for line in proc.stdout.splitlines() if line.startswith("rlrun: update step")]
    assert said == [
        "rlrun: update step compiled (auto: algo=td3 on cpu, 192 optimisation steps; "
        "algo.compile=false keeps it eager)"
    ], proc.stdout
    eager, compiled = sorted(run_dirs(workdir), key=lambda run: summary(run)["frames"])
    assert summary(eager)["frames"] == 64 and summary(compiled)["status"] == "completed"
    assert not (eager / "csv/scalars/train/compiled_graphs.csv").exists()
    losses = series(compiled, "loss_qvalue")
    assert len(losses) == 3 and all(math.isfinite(v) for _, v in losses)
    assert all(v > 0 for _, v in series(compiled, "grad_norm"))
    graphs = [v for _, v in series(compiled, "compiled_graphs")]
    assert len(graphs) == 3 and graphs[0] > 0 and len(set(graphs)) == 1, graphs
    warmup = [v for _, v in series(compiled, "update_warmup_s")]
    assert warmup[0] > 0 and len(set(warmup)) == 1  # compiled in the first batch only
    # set by the user, not picked: nothing said (64 frames, all random: nothing compiled)
    forced = run_rlrun(*common, "algo.compile=true", "collector.init_random_frames=128",
                       "trainer.total_frames=64", cwd=workdir, env=env)  # fmt: skip
    assert "rlrun: update step" not in forced.stdout, forced.stdout
    wrong = run_rlrun(*common, "algo.compile=maybe", cwd=workdir, env=env, check=False)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert wrong.stderr.strip().splitlines()[-1] == (
        "rlrun: error: algo.compile=maybe is not a choice; use algo.compile=true, false or auto "
        "(on where algo=td3 measured a gain)."
    )


def test_a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(workdir: Path) -> None:
    """A user hook poisons the 4th batch (2 minibatches per batch): the run stops there in one
    line, ``failed``, and the newest checkpoint is the 3rd batch's, with finite weights."""
    tests = Path(__file__).parent
    proc = run_rlrun(
        "+experiment=ppo", "trainer.total_frames=2048", "collector.frames_per_batch=256",
        "env.num_envs=4", "algo.minibatch_size=128", "algo.epochs=1",
        "trainer.progress_bar=false", "checkpoint.every_frames=256", "checkpoint.keep=10",
        "+hooks.poison._target_=faulty_hooks.ZeroStdAdvantages",
        "+hooks.poison.at=process_optim_batch", "+hooks.poison.after=6",
        cwd=workdir, check=False, env={"PYTHONPATH": str(tests)},
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("rlrun: error:")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert "became NaN or inf in the batch ending at frame 1024" in errors[0]
    assert "loss_objective" in errors[0] and "Traceback" not in proc.stderr
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "failed" and summary(run_dir)["frames"] == 1024
    where = run_dir.relative_to(workdir)
    assert proc.stdout.splitlines()[-2:][1] == f"rlrun: continue: rlrun resume={where}"
    saved = sorted(p.name for p in (run_dir / "checkpoints").glob("checkpoint-*"))
    assert saved[-1] == f"checkpoint-{768:012d}"
    from tensordict import TensorDict

    for folder in (run_dir / "checkpoints" / saved[-1] / "components").glob("*-loss_module"):
        state = TensorDict.load_memmap(folder / "state")
        assert all(torch.isfinite(t).all() for t in state.values(True, True))


def test_fused_off_policy_step_samples_and_updates_targets_as_the_hook_path(
    tmp_path: Path,
) -> None:
    """``+experiment=sac``: the update step samples the storage itself (uniform), the entries
    its loss reads, and its one foreach lerp moves the target networks exactly as TorchRL's
    SoftUpdate after the same step on the same sample (every entry)."""
    from torchrl.objectives import SoftUpdate

    with built(tmp_path, "+experiment=sac", "collector.init_random_frames=0") as (cfg, trainer):
        step = trainer.optimization_stepper
        assert step.sampler is not None and step.inner_target is not None
        # only the stop hook (a stop signal ends the batch's steps): nothing samples outside
        assert len(trainer._process_optim_batch_ops) == 1
        batch = trainer._process_batch_hook(next(iter(trainer.collector)))
        assert int(step.sampler.stored) == len(trainer.replay_buffer)
        # it gathers only what the loss reads (the storage holds more entries), all of it
        assert set(step.sampler.sample().keys(True, True)) == set(trainer.loss_module.in_keys)
        loss = copy.deepcopy(trainer.loss_module)
        optimizer = torch.optim.Adam(loss.parameters(), lr=cfg.optim.lr, eps=1e-5)
        reference = UpdateStep(loss, optimizer, cfg.algo.max_grad_norm, torch.device("cpu"))
        theirs = SoftUpdate(loss, tau=cfg.algo.tau)
        storage = trainer.replay_buffer.storage
        for seed in range(3):
            torch.manual_seed(seed)
            out = step.step(trainer, batch)
            torch.manual_seed(seed)  # the same index draw, then the same actions in the loss
            index = (torch.rand(cfg.replay_buffer.batch_size) * len(storage)).long()
            expected = reference.step(trainer, storage[index])
            theirs.step()
            torch.testing.assert_close(out["loss_qvalue"], expected["loss_qvalue"])
        ours = trainer.loss_module.state_dict()
        for key, value in loss.state_dict().items():  # online and target networks, alpha
            torch.testing.assert_close(ours[key], value, msg=key)
        assert any("target_qvalue" in key for key in ours)


@pytest.mark.parametrize(
    ("overrides", "fused"),
    [
        ([], True),
        (["replay_buffer.sampler=prioritized"], False),
        (["replay_buffer.prefetch=2"], False),
        (["replay_buffer.storage=memmap"], True),
        (["replay_buffer.transforms=[{_target_: torchrl.envs.DoubleToFloat}]"], False),
    ],
)
def test_fused_sampling_only_where_a_uniform_sample_can_be_read_straight(
    overrides: list[str], fused: bool
) -> None:
    from rlrun.builders.buffers import fuses_sampling
    from rlrun.builders.devices import placement

    cfg = compose("+experiment=sac", *overrides)
    assert fuses_sampling(cfg.replay_buffer, placement(cfg, cuda_devices=0)) is fused


def test_entropy_without_sync_is_analytic_where_finite() -> None:
    """What PPO's loss computes while a CUDA graph is captured (rlrun/algorithms/ppo.py)."""
    from rlrun.compat.torchrl import entropy_without_sync

    logits = torch.tensor([[0.0, 1.0, 2.0], [0.5, 0.5, 0.5]])
    dist = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(entropy_without_sync(dist, 1), dist.entropy())

    class NoEntropy(torch.distributions.Normal):  # an analytic entropy gone bad
        def entropy(self) -> torch.Tensor:
            return torch.full(self.loc.shape, float("nan"))

    bad = NoEntropy(torch.zeros(4), torch.ones(4))
    assert torch.isfinite(entropy_without_sync(bad, 8)).all()  # the sampled estimate instead


def test_a_hook_on_each_sample_keeps_sampling_in_the_trainer(tmp_path: Path) -> None:
    """A user's hook at ``post_loss`` sees every sample the step trains on: with it, the
    off-policy step is not fused, and the Trainer's replay hook samples."""
    seen: list[int] = []
    hook = "+hooks.seen._target_=faulty_hooks.FailsToBuild", "+hooks.seen.fail=false"
    with built(
        tmp_path, "+experiment=sac", "collector.init_random_frames=0", *hook,
        "+hooks.seen.at=post_loss",
    ) as (cfg, trainer):  # fmt: skip
        assert trainer.optimization_stepper.sampler is None
        trainer.register_op("post_loss", lambda batch: seen.append(batch.numel()))
        batch = trainer._process_batch_hook(next(iter(trainer.collector)))
        step = trainer.optimization_stepper
        step.step(trainer, trainer._process_optim_batch_hook(batch))
    assert seen == [cfg.replay_buffer.batch_size]


def test_dqn_copies_its_target_every_target_update_period_steps(tmp_path: Path) -> None:
    """``algo.target_update_period=4`` copies on steps 4, 8, 12, ... (TorchRL's ``HardUpdate``,
    asked for 4, copies every 5th: rlrun asks it for one less)."""
    # eager: with the preset's 500k frames, algo.compile=auto would compile the step
    overrides = ["+experiment=dqn", "algo.target_update_period=4", "collector.init_random_frames=0",
                 "algo.compile=false"]  # fmt: skip
    with built(tmp_path, *overrides) as (_, trainer):
        batch = trainer._process_batch_hook(next(iter(trainer.collector)))
        target = trainer.loss_module.target_value_network_params
        before = target.clone()
        moved = []
        for _ in range(13):
            trainer.optimization_stepper.step(trainer, trainer._process_optim_batch_hook(batch))
            moved.append(bool((target != before).any()))
            before = target.clone()
    assert moved == [step % 4 == 0 for step in range(1, 14)], moved
