"""The online algorithms of issue #32 (a2c, ddpg, c51, discrete_sac, redq, tqc, crossq) through
the real ``rlrun`` console script: every preset trains a few batches, evaluates and resumes from
its checkpoints in one sweep, two of them train with worker processes, and the cross-group checks
refuse what they cannot run. Subprocesses are few on purpose: each costs about 8 s of imports.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import built, compose, csv_series, run_rlrun, summary
from omegaconf import OmegaConf

from rlrun.errors import ConfigError
from rlrun.validation import validate

ALGORITHMS = ["a2c", "ddpg", "c51", "discrete_sac", "redq", "tqc", "crossq"]
# tests/algorithm_presets: the redq and crossq presets at a CPU test's size (UTD 1, narrow
# critics); every other preset as it ships
PRESETS = {"redq": "redq_small", "crossq": "crossq_small"}
CONFIG_DIR = ["--config-dir", str(Path(__file__).parent / "algorithm_presets")]
BATCH = 16
TINY = [
    f"collector.frames_per_batch={BATCH}",
    "collector.init_random_frames=0",  # off-policy: learning from the first batch on
    "replay_buffer.size=1000",
    "replay_buffer.batch_size=32",
    "policy.hidden_sizes=[32,32]",
    "trainer.progress_bar=false",
    f"checkpoint.every_frames={BATCH}",
    "eval.every_frames=0",
]
EVAL_AT_THE_END = ["eval.every_frames=48", "eval.episodes=2", "eval.max_steps=50"]


def losses(job: Path) -> dict[str, list[float]]:
    """Every ``train/loss*`` series the job logged."""
    folder = job / "csv" / "scalars" / "train"
    return {
        p.stem: [v for _, v in csv_series(job, f"train/{p.stem}")] for p in folder.glob("loss*")
    }


def test_every_algorithm_trains_and_resumes_from_its_checkpoints(tmp_path: Path) -> None:
    presets = ",".join(PRESETS.get(a, a) for a in ALGORITHMS)
    sweep = tmp_path / "sweep"
    run_rlrun(
        "-m", *CONFIG_DIR, f"+experiment={presets}", "trainer.total_frames=48", *TINY,
        *EVAL_AT_THE_END, f"hydra.sweep.dir={sweep}", cwd=tmp_path, timeout=600,
    )  # fmt: skip
    jobs = [sweep / str(n) for n in range(len(ALGORITHMS))]
    for algo, job in zip(ALGORITHMS, jobs, strict=True):
        assert OmegaConf.load(job / ".hydra" / "config.yaml").algo.name == algo
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == 48, algo
        assert math.isfinite(summary(job)["eval_return_last"]), algo  # the greedy policy ran
        logged = losses(job)
        assert logged and all(math.isfinite(v) for s in logged.values() for v in s), algo
        # A job stopped by a signal after its third batch looks like this: its newest
        # checkpoint at 48 frames, its summary "interrupted". resume= continues each one there.
        stopped = summary(job) | {"status": "interrupted"}
        (job / "summary.json").write_text(json.dumps(stopped))
        assert (job / "checkpoints" / "checkpoint-000000000048").is_dir(), algo

    proc = run_rlrun(
        f"resume={sweep}", "trainer.total_frames=80", *CONFIG_DIR, cwd=tmp_path, timeout=600
    )
    out = proc.stdout + proc.stderr
    assert (
        f"{len(ALGORITHMS)} jobs, 0 completed (left as they are), {len(ALGORITHMS)} to run" in out
    )
    for algo, job in zip(ALGORITHMS, jobs, strict=True):
        assert f"resumed from {job}/checkpoints/checkpoint-000000000048 at 48 frames" in out, algo
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == 80, algo
        steps = [s for s, _ in csv_series(job, "train/optim_steps")]
        assert steps == sorted(set(steps)) and steps[-1] == 80, algo  # went on, no repeat


def parameters(job: Path, frames: int) -> list[torch.Tensor]:
    import rlrun

    policy = rlrun.load(job, checkpoint=f"step_{frames}")
    return [p.detach().clone() for p in policy.td_policy.parameters()]


def test_a2c_and_ddpg_learn_with_worker_processes(tmp_path: Path) -> None:
    """collector=multi_sync: two spawned workers fill each batch; the weights the learner
    trains reach the checkpoints (and rlrun.load rebuilds each algorithm's policy)."""
    sweep = tmp_path / "sweep"
    run_rlrun(
        "-m", "+experiment=a2c,ddpg", "collector=multi_sync", "trainer.total_frames=64", *TINY,
        f"hydra.sweep.dir={sweep}", cwd=tmp_path, timeout=600,
    )  # fmt: skip
    for job in (sweep / "0", sweep / "1"):
        assert summary(job)["status"] == "completed" and summary(job)["frames"] == 64
        first, last = parameters(job, 32), parameters(job, 64)
        assert any(not torch.equal(a, b) for a, b in zip(first, last, strict=True)), job


REFUSED = {
    "c51 on continuous actions": (
        ["+experiment=c51", "env=pendulum"],
        "algo=c51 needs a Discrete action space, but env.id=Pendulum-v1 has a Box one",
    ),
    "ddpg on discrete actions": (
        ["+experiment=ddpg", "env=cartpole"],
        "algo=ddpg needs a Box action space, but env.id=CartPole-v1 has a Discrete one",
    ),
    "discrete_sac on continuous actions": (
        ["+experiment=discrete_sac", "env=pendulum"],
        "algo=discrete_sac needs a Discrete action space",
    ),
    "tqc on discrete actions": (["+experiment=tqc", "env=cartpole"], "algo=tqc needs a Box"),
    "recurrent a2c": (["+experiment=a2c", "policy=lstm"], "algo=a2c cannot train a recurrent"),
    "recurrent redq": (["+experiment=redq", "policy=gru"], "algo=redq cannot train a recurrent"),
    "ray learners on-policy": (
        ["+experiment=a2c", "trainer.learner_backend=ray"],
        "algo=a2c cannot train with trainer.learner_backend=ray: the Ray learners sample a "
        "replay buffer (algo=dqn, sac, td3), algo=a2c trains on each fresh batch",
    ),
    "ray learners, not wired": (
        ["+experiment=tqc", "trainer.learner_backend=ray"],
        "algo=tqc is not wired to them yet; use trainer.learner_backend=local",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_cross_group_checks_know_the_new_algorithms(case: str) -> None:
    overrides, expected = REFUSED[case]
    with pytest.raises(ConfigError) as err:
        validate(compose(*overrides))
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_refusal_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    proc = run_rlrun("+experiment=c51", "env=pendulum", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "rlrun: error: algo=c51 needs a Discrete action space, but env.id=Pendulum-v1 has a Box "
        "one; use algo=a2c or algo=crossq or algo=ddpg or algo=ppo or algo=redq or algo=sac or "
        "algo=td3 or algo=tqc (with its preset, e.g. +experiment=a2c)."
    )
    assert list(tmp_path.iterdir()) == []


ACTOR_CRITIC = "policy._target_=rlrun.builders.policies.make_actor_critic"  # no Q network
WRONG_NETWORK = {  # a factory of the user's that does not return what the algorithm trains
    "c51": (
        ["algo=c51", "policy._target_=rlrun.builders.policies.make_qvalue_actor"],
        "algo=c51 needs a distributional Q-network",
    ),
    "discrete_sac": (["algo=discrete_sac", ACTOR_CRITIC], "algo=discrete_sac needs a Q-network"),
    "crossq": (["algo=crossq", "env=pendulum", ACTOR_CRITIC], "algo=crossq needs a Q-network"),
}


@pytest.mark.parametrize("algo", sorted(WRONG_NETWORK))
def test_an_algorithm_names_the_network_it_needs(algo: str, tmp_path: Path) -> None:
    overrides, expected = WRONG_NETWORK[algo]
    with pytest.raises(ConfigError, match=expected), built(tmp_path, *overrides):
        pass


def test_c51_acts_on_one_action_when_expected_returns_tie() -> None:
    """TorchRL's greedy one-hot marks every tied action; C51's loss then failed on such a sample
    (86k frames into +experiment=c51). Equal distributions for both actions: one action."""
    from torchrl.envs import GymEnv

    from rlrun.algorithms.c51 import networks as make_c51_actor

    env = GymEnv("CartPole-v1")
    ac = make_c51_actor(observation_spec=env.observation_spec, action_spec=env.action_spec)
    for p in ac.actor.parameters():
        torch.nn.init.zeros_(p)  # every action's distribution uniform: their means tie
    action = ac.actor(env.reset())["action"]
    assert action.tolist() == [1, 0]
