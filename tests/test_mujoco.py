"""Continuous control as researchers run it: the MuJoCo presets through the console script, TD3's
delayed actor updates and clipped target smoothing, observation statistics kept across a resume
and used by evaluation, and the one-line error without the mujoco extra."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from conftest import built, run_dirs, run_rlrun, run_without, series, summary
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs.transforms import VecNormV2
from torchrl.objectives import CrossQLoss, TD3BCLoss, TD3Loss, ValueEstimators

from rlrun.algorithms.crossq import networks as make_crossq_networks
from rlrun.builders.envs import SharedObservationNorm
from rlrun.builders.offpolicy import DelayedActor, DelayedSoftUpdate, with_delayed_actor
from rlrun.builders.policies import make_deterministic_actor_q as make_td3_networks
from rlrun.builders.updates import UpdateStep

QUIET = ["trainer.progress_bar=false", "checkpoint.every_frames=0"]
TINY = [  # 3 batches of 100 frames, the first random; a few small updates per batch
    *QUIET,
    "trainer.total_frames=300",
    "collector.frames_per_batch=100",
    "collector.init_random_frames=100",
    "algo.utd_ratio=0.1",
    "replay_buffer.batch_size=64",
]


def test_off_policy_mujoco_presets_tiny_runs(workdir: Path) -> None:
    """SAC and TD3 on HalfCheetah-v5, the presets' env: one sweep, jobs forked from one process.
    Its ``algo.utd_ratio`` is a key of the swept presets' algorithms only (not of the default
    algo=ppo, on which Hydra composes the sweep's own config)."""
    run_rlrun("-m", "+experiment=sac_mujoco,td3_mujoco", *TINY, cwd=workdir)
    runs = run_dirs(workdir)
    assert len(runs) == 2
    for run_dir in runs:
        assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 300
        assert series(run_dir, "optim_steps")[-1][1] == 30  # 10 steps per batch, from the first


def test_ppo_mujoco_preset_tiny_run(workdir: Path) -> None:
    run_rlrun(
        "+experiment=ppo_mujoco", "env=hopper", *QUIET, "trainer.total_frames=256",
        "collector.frames_per_batch=128", "algo.epochs=1", cwd=workdir,
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed" and summary(run_dir)["frames"] == 256


def test_without_the_mujoco_extra_one_line_names_it(workdir: Path) -> None:
    """The console script's entry point in a process where ``mujoco`` cannot be imported, as on
    a machine without the extra (``sys.modules[name] = None`` is Python's "not installed")."""
    proc = run_without("mujoco", "+experiment=sac_mujoco", cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "rlrun: error: env.id=HalfCheetah-v5 needs a package that is not installed: "
        "MuJoCo is not installed: pip install 'rlrun[mujoco]'"
    )
    assert not (workdir / "outputs").exists()


def test_video_without_an_opengl_backend_says_so_once_and_trains_on(workdir: Path) -> None:
    """GLFW needs a display, which this machine has not: rendering fails, the run does not."""
    proc = run_rlrun(
        "+experiment=td3_mujoco", "env=inverted_pendulum", *TINY, "eval=default",
        "eval.every_frames=100", "eval.episodes=1", "eval.max_steps=20", "eval.video=true",
        cwd=workdir, env={"MUJOCO_GL": "glfw", "DISPLAY": ""},
    )  # fmt: skip
    (run_dir,) = run_dirs(workdir)
    assert summary(run_dir)["status"] == "completed"
    warned = [line for line in proc.stdout.splitlines() if "eval.video: this env cannot" in line]
    assert len(warned) == 1 and "the run goes on without videos" in warned[0]
    assert not (run_dir / "videos").exists()


OBS = Composite(observation=Unbounded(shape=(3,)))
ACTION = Bounded(-2.0, 2.0, shape=(1,))


def td3_batch(n: int = 32) -> TensorDict:
    return TensorDict(
        {
            "observation": torch.randn(n, 3),
            "action": ACTION.rand((n,)),
            ("next", "observation"): torch.randn(n, 3),
            ("next", "reward"): torch.randn(n, 1),
            ("next", "done"): torch.zeros(n, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(n, 1, dtype=torch.bool),
        },
        [n],
    )


def delayed_loss(algo: str) -> tuple[Callable[[], DelayedActor], Callable[[DelayedActor], dict]]:
    """A way to build ``algo``'s delayed loss (twice over the same networks: a run and its
    resume), and the parameters that must move only with the actor: TD3's targets, CrossQ's
    temperature (it has no targets)."""
    torch.manual_seed(0)
    if algo == "crossq":
        ac = make_crossq_networks(
            observation_spec=OBS, action_spec=ACTION, hidden_sizes=[16], critic_hidden_sizes=[16]
        )
        return (
            lambda: with_delayed_actor(CrossQLoss, ("loss_actor", "loss_alpha"))(
                ac.actor, ac.qvalue, policy_delay=3
            ),
            lambda loss: {"log_alpha": loss.log_alpha},
        )
    ac = make_td3_networks(observation_spec=OBS, action_spec=ACTION, hidden_sizes=[16])
    # as twin_delayed builds them: the actor's term not computed in between
    cls = with_delayed_actor({"td3": TD3Loss, "td3_bc": TD3BCLoss}[algo], skips_actor=True)
    return (
        lambda: cls(ac.actor, ac.qvalue, action_spec=ACTION, policy_delay=3),
        lambda loss: loss.target_actor_network_params.flatten_keys(),
    )


@pytest.mark.parametrize("algo", ["td3", "td3_bc", "crossq"])
def test_the_actor_learns_every_policy_delay_critic_steps(algo: str) -> None:
    make, with_actor = delayed_loss(algo)
    loss = make()
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    # the update step counts the steps and steps the targets, as in a run
    updater = DelayedSoftUpdate(loss, tau=0.5) if algo != "crossq" else None
    step = UpdateStep(loss, optimizer, 10.0, torch.device("cpu"), target_updater=updater)
    trainer = type("T", (), {"_post_loss_hook": lambda self, batch: None})()
    actor = loss.actor_network_params.flatten_keys().values()
    critic = [
        p for p in loss.qvalue_network_params.flatten_keys().values() if p.is_floating_point()
    ]
    follows = with_actor(loss).values()
    moved = []
    for _ in range(9):
        before = [[p.clone() for p in group] for group in (actor, critic, follows)]
        step.step(trainer, td3_batch())
        now = (actor, critic, follows)
        changed = [
            [not torch.equal(a, b) for a, b in zip(group, old, strict=True)]
            for group, old in zip(now, before, strict=True)
        ]
        moved.append((any(changed[0]), all(changed[1]), any(changed[2])))
    assert [a for a, _, _ in moved] == [False, False, True] * 3  # no Adam drift in between
    assert all(c for _, c, _ in moved)  # the critics learn at every step
    assert [t for _, _, t in moved] == [False, False, True] * 3  # targets, temperature
    state = loss.state_dict()
    resumed = make()
    resumed.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    resumed.load_state_dict(state)
    assert resumed._steps == 9  # the rhythm survives a checkpoint
    del state["critic_steps"]  # a checkpoint from before the actor was delayed
    resumed.load_state_dict(state)
    assert resumed._steps == 0


@pytest.mark.parametrize("loss_class", [TD3Loss, TD3BCLoss])
def test_skipping_the_actor_term_between_updates_trains_the_same(loss_class: type) -> None:
    """TD3's critic-only steps without the actor's term (``skips_actor``, as rlrun builds TD3
    and TD3+BC) give the same weights as TorchRL's loss computing it every step; in between,
    the loss reports the actor's last update."""
    torch.manual_seed(0)
    ac = make_td3_networks(observation_spec=OBS, action_spec=ACTION, hidden_sizes=[16])
    batches = [td3_batch() for _ in range(7)]
    weights, logged = [], []
    for skips in (False, True):
        nets = copy.deepcopy(ac)
        torch.manual_seed(1)  # TorchRL draws the second critic's initial weights
        loss = with_delayed_actor(loss_class, skips_actor=skips)(
            nets.actor, nets.qvalue, action_spec=ACTION, policy_delay=3
        )
        loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
        optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
        step = UpdateStep(
            loss,
            optimizer,
            10.0,
            torch.device("cpu"),
            target_updater=DelayedSoftUpdate(loss, tau=0.5),
        )
        trainer = type("T", (), {"_post_loss_hook": lambda self, batch: None})()
        torch.manual_seed(2)  # the same target smoothing noise
        logged.append([step.step(trainer, b.clone())["loss_actor"] for b in batches])
        weights.append(loss.state_dict())
    for key, value in weights[0].items():
        assert torch.equal(value, weights[1][key]), key
    computed, skipped = logged
    assert torch.equal(skipped[2], computed[2]) and torch.equal(skipped[5], computed[5])
    # steps 4 and 5 report step 3's update, step 7 step 6's; the first computes it once
    assert [torch.equal(skipped[i], computed[2]) for i in (3, 4)] == [True, True]
    assert torch.equal(skipped[6], computed[5]) and not torch.equal(computed[6], computed[5])
    assert torch.equal(skipped[0], computed[0]) and torch.equal(skipped[1], computed[0])


class RecordingQ(nn.Module):
    """Q(s, a) that keeps the (state, action) pairs it was asked about."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 1)
        self.seen: list[tuple[torch.Tensor, torch.Tensor]] = []

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        self.seen.append((obs.detach().clone(), action.detach().clone()))
        return self.linear(torch.cat([obs, action], -1))


def test_td3_target_smoothing_noise_is_clipped() -> None:
    torch.manual_seed(0)
    ac = make_td3_networks(observation_spec=OBS, action_spec=ACTION, hidden_sizes=[16])
    recorder = RecordingQ()
    qvalue = TensorDictModule(recorder, ["observation", "action"], ["state_action_value"])
    loss = with_delayed_actor(TD3Loss)(
        ac.actor, qvalue, action_spec=ACTION, policy_delay=2, policy_noise=100.0,
        noise_clip=0.05, deactivate_vmap=True,
    )  # fmt: skip
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    batch = td3_batch(256)
    next_obs = batch.get(("next", "observation"))
    with torch.no_grad():
        target_action = ac.actor(batch.get("next").clone()).get("action")
    loss(batch)
    # the target's Q(s', a' + noise) calls, one per twin
    offsets = [(a - target_action).abs() for o, a in recorder.seen if torch.equal(o, next_obs)]
    assert len(offsets) == 2
    assert all(o.max() <= 0.05 + 1e-6 for o in offsets)  # noise of std 100, clipped to 0.05
    assert all(o.max() > 0.04 for o in offsets)  # and really added


def vecnorm(trainer) -> VecNormV2:
    return next(t for t in trainer.collector.env.transform if isinstance(t, VecNormV2))


def test_observation_statistics_resume_and_are_what_evaluation_uses(tmp_path: Path) -> None:
    ppo = ["+experiment=ppo_mujoco", "env=inverted_pendulum", "collector.frames_per_batch=128",
           "algo.epochs=1", "trainer.total_frames=256", "eval=default"]  # fmt: skip
    with built(tmp_path / "a", *ppo) as (_, trainer):
        norm = vecnorm(trainer)
        trainer.train()
        saved = {k: v.clone() for k, v in norm.loc.items(True, True)}
        assert saved["observation"].abs().sum() > 0  # statistics were learnt
        (checkpoint,) = (tmp_path / "a" / "checkpoints").glob("checkpoint-*")  # at the end
    with built(tmp_path / "b", *ppo) as (_, trainer):
        from rlrun.builders.checkpoints import load_checkpoint

        load_checkpoint(trainer, checkpoint, None)
        norm = vecnorm(trainer)
        assert torch.equal(norm.loc["observation"], saved["observation"])
        eval_env = trainer._modules["evaluator"].make_env(num_envs=2)  # what evaluation steps
        (shared,) = [t for t in eval_env.transform if isinstance(t, SharedObservationNorm)]
        raw = TensorDict(observation=torch.randn(2, 4) * 3, batch_size=[2])
        seen = shared._call(raw.clone()).get("observation")
        expected = (raw["observation"] - norm.loc["observation"]) / norm.scale["observation"]
        torch.testing.assert_close(seen, expected)
        eval_env.close()


@pytest.mark.xdist_group("hooks")
def test_observation_statistics_survive_sigterm_and_resume(workdir: Path) -> None:
    """Stopped by SIGTERM, resumed: the statistics go on from the stopped run's (their update
    count keeps growing from its value), and ``rlrun.load`` reads them from the checkpoint."""
    from test_checkpoints import stop_with_sigterm

    from rlrun.commands.loading import load_trained

    total = 2048
    ppo = ["+experiment=ppo_mujoco", "env=inverted_pendulum", "collector.frames_per_batch=256",
           "algo.epochs=1", f"trainer.total_frames={total}", "checkpoint.every_frames=256",
           "checkpoint.keep=20", "trainer.progress_bar=false"]  # fmt: skip
    run_dir = stop_with_sigterm(workdir, *ppo)
    stopped = summary(run_dir)["frames"]
    assert summary(run_dir)["status"] == "interrupted" and stopped < total

    def updates(checkpoint: str | None) -> int:
        trained = load_trained(run_dir, checkpoint=checkpoint)
        return int(trained.observation_stats._count["observation"])

    at_stop = updates(f"step_{stopped}")
    assert at_stop >= stopped  # one update per step (and per reset)
    run_rlrun(f"resume={run_dir}", cwd=workdir)
    assert summary(run_dir)["status"] == "completed"
    # one batch later: restarted statistics would hold about 256 + 44 resets < at_stop + 256
    assert updates(f"step_{stopped + 256}") >= at_stop + 256
