"""Bad input is refused before anything is built: one line, exit 2, no traceback, nothing on disk.

Each case runs the real console script in an empty folder, as a new user would.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from importlib.resources import files
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from conftest import compose, run_rlrun, run_without
from omegaconf import MISSING, OmegaConf

from rlrun import config
from rlrun.checks.envs import check_env
from rlrun.errors import ConfigError
from rlrun.validation import validate

CASES = {
    "negative frames": (["trainer.total_frames=-5"], "trainer.total_frames=-5 is out of range"),
    "no envs": (["env.num_envs=0"], "env.num_envs=0 is out of range: it must be >= 1"),
    "no epochs": (["algo.epochs=0"], "algo.epochs=0 is out of range"),
    "gamma": (["algo.gamma=1.5"], "algo.gamma=1.5 is out of range: it must be in [0, 1]"),
    "learning rate": (["optim.lr=0"], "optim.lr=0.0 is out of range: it must be > 0"),
    "batch size": (["+experiment=dqn", "replay_buffer.batch_size=0"], "batch_size=0 is out"),
    "buffer size": (["+experiment=sac", "replay_buffer.size=-1"], "replay_buffer.size=-1 is"),
    "probability": (["+experiment=dqn", "algo.eps_end=2"], "algo.eps_end=2.0 is out of range"),
    "minibatch": (["algo.minibatch_size=4096"], "must divide a collected batch"),
    "preset vs algo": (
        ["+experiment=ppo", "algo=dqn"],
        "+experiment=ppo sets algo.gae_lambda, which algo=dqn does not have",
    ),
    "choice": (["checkpoint.backend=tourch"], "choose one of: torch, torchsnapshot, none."),
    "choice hint": (["collector.kind=asyn"], "Did you mean async?"),
    "discrete algo, continuous env": (
        ["+experiment=dqn", "env=pendulum"],
        "algo=dqn needs a Discrete action space, but env.id=Pendulum-v1 has a Box one",
    ),
    "continuous algo, discrete env": (["+experiment=sac", "env=cartpole"], "needs a Box action"),
    "recurrent policy": (["+experiment=dqn", "policy=lstm"], "cannot train a recurrent policy"),
    "offline algo without a dataset": (["+experiment=iql"], "algo=iql learns from a dataset: set"),
    "missing dataset": (
        ["+experiment=iql", "dataset=nobody/nothing-v0"],
        "dataset=nobody/nothing-v0 is neither a run folder nor a Minari dataset in",
    ),
    "bc with a collector": (
        ["+experiment=bc", "dataset=x/y-v0", "collector=sync"],
        "algo=bc learns from its dataset alone and has no use for collector=sync's frames",
    ),
    "random frames offline": (
        ["+experiment=iql", "dataset=x/y-v0", "collector.init_random_frames=100"],
        "collector=none collects nothing, so there are no random frames to wait for",
    ),
    "on-policy from a dataset": (["dataset=x/y-v0"], "algo=ppo learns from fresh batches"),
    "random frames with a dataset": (["+experiment=sac", "dataset=x/y-v0"], "gives learning its"),
    "no collector, no dataset": (["+experiment=sac", "collector=none"], "collector=none learns"),
    "recurrent mode": (["policy=gru", "policy.recurrent_mode.collect=true"], "set it to false"),
    "factory without workers": (
        ["collector.policy_factory=rlrun.builders.policies.make_actor_critic"],
        "collector.policy_factory is for worker processes",
    ),
    "never copy into workers": (
        ["collector=multi_sync", "collector.policy_copy=never"],
        "Set collector.policy_factory",
    ),
    "target": (["optim._target_=torch.optim.Adamm"], "torch.optim has no attribute Adamm"),
    "hook target": (
        ["+hooks.x._target_=nope.Hook", "+hooks.x.at=post_steps"],
        "hooks.x._target_=nope.Hook cannot be imported: no module named nope",
    ),
    "hook point": (
        ["+hooks.x._target_=collections.Counter", "+hooks.x.at=post_stepz"],
        "post_steps",
    ),
    "env package": (["env.id=LunarLander-v3"], "needs a package that is not installed: Box2D"),
    "pixels for an mlp": (["env=pong"], "gives image observations, which policy=mlp cannot read"),
    "cnn on vectors": (["policy=cnn"], "policy=cnn needs image observations"),
    "atari id, no preprocessing": (["env.id=ALE/Pong-v5"], "needs the Atari preprocessing"),
    "envpool and gymnasium kwargs": (
        ["+experiment=ppo_atari", "env.backend=envpool", "+env.kwargs.full_action_space=true"],
        "which env.backend=envpool does not take",
    ),
    "envpool id": (
        ["+experiment=ppo", "env.backend=envpool", "env.id=Taxi-v4"],
        "env.id=Taxi-v4 is not an envpool task",
    ),
    "single frames without stacks": (
        ["+experiment=dqn", "replay_buffer.single_frames=true"],
        "which env.id=CartPole-v1 does not have",
    ),
    "single frames, other sampler": (
        ["+experiment=dqn_atari", "replay_buffer.sampler=prioritized"],
        "it needs replay_buffer.sampler=random",
    ),
    "envpool in processes": (
        ["+experiment=ppo_atari", "env.backend=envpool", "env.parallel=true"],
        "set env.parallel=false",
    ),
    "device": (["device=gpu"], "device=gpu is not valid; use cpu, cuda, cuda:N or auto"),
    "sweep job": (["-m", "seed=0,1", "optim.lr=1e-3,-1"], "in the sweep's job seed=0 optim.lr=-1"),
    "launcher without -m": (["hydra/launcher=joblib"], "add -m to sweep (rlrun -m ... hydra/"),
    "search without -m": (["hparams_search=ppo_optuna"], "takes effect in a sweep only"),
    "sequences longer than a row": (
        ["+experiment=ppo_lstm", "algo.sequence_length=1000"],
        "algo.sequence_length=1000 must divide the batch's time dimension",
    ),
    "random frames on-policy": (
        ["collector.init_random_frames=64"],
        "algo=ppo learns on-policy, from each fresh batch of its own policy",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_before_anything_is_built(case: str, tmp_path: Path) -> None:
    overrides, expected = CASES[case]
    proc = run_rlrun(*overrides, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr  # one line
    assert proc.stderr.startswith("rlrun: error: ") and expected in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []  # no run or sweep folder


def test_unwritable_run_folder_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    proc = run_rlrun(f"hydra.run.dir={blocker}/run", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert f"cannot create the run folder {blocker}/run: {blocker} is a file" in proc.stderr
    assert sorted(tmp_path.iterdir()) == [blocker]


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    """The console script's entry point where ``mlflow`` is not importable, as without the
    extra (``sys.modules[name] = None`` is Python's "not installed")."""
    proc = run_without("mlflow", "logger=mlflow", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "rlrun: error: logger=mlflow needs the mlflow package: pip install 'rlrun[mlflow]'."
    )
    assert list(tmp_path.iterdir()) == []


class Blind(gymnasium.Env):
    """An env that cannot render (a user's own, registered with gymnasium)."""

    metadata = {"render_modes": []}
    observation_space = gymnasium.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)


def test_eval_video_needs_an_env_that_renders() -> None:
    gymnasium.register("rlrun-tests/Blind-v0", entry_point=Blind)
    cfg = compose("env.id=rlrun-tests/Blind-v0", "eval=default", "eval.video=true")
    with pytest.raises(ConfigError, match="cannot render frames .* set eval.video=false"):
        check_env(cfg)
    check_env(compose("env.id=rlrun-tests/Blind-v0", "eval=default"))  # without video: fine


PRESETS = sorted(  # _name.yaml: a part that presets share, not one itself
    p.name[:-5] for p in files("rlrun.conf").joinpath("experiment").iterdir() if p.name[0] != "_"
)


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_passes_validation(preset: str, request) -> None:
    cfg = compose(f"+experiment={preset}")
    if cfg.collector.kind == "none":  # an offline preset: a dataset of its env
        cfg.dataset = request.getfixturevalue("random_datasets")[cfg.env.id]
    validate(cfg)


def _schemas() -> list[type]:
    return [
        obj
        for obj in vars(config).values()
        if dataclasses.is_dataclass(obj) and obj is not config.Range
    ]


def test_the_schema_holds_types_and_the_yaml_holds_every_default() -> None:
    """One source of truth: no schema field has a default of its own (``conf/**.yaml`` has
    them all), and every option of every group composes with no key left unset."""
    for schema in _schemas():
        for f in dataclasses.fields(schema):
            nested = dataclasses.is_dataclass(typing.get_type_hints(schema)[f.name])
            assert nested or f.name == "hooks" or f.default is MISSING, (
                f"{schema.__name__}.{f.name}"
            )
    root = files("rlrun.conf")
    for group in ("env", "policy", "algo", "collector", "logger", "checkpoint", "eval"):
        for option in root.joinpath(group).iterdir():
            if option.name.endswith(".yaml") and not option.name.startswith("_"):
                cfg = compose(f"{group}={option.name[:-5]}")
                OmegaConf.set_struct(cfg, False)
                del cfg["hydra"]
                assert OmegaConf.missing_keys(cfg) == set(), f"{group}={option.name}"


def test_ranges_read_as_written() -> None:
    assert str(config.Range(1)) == ">= 1"
    assert str(config.Range(0, low_open=True)) == "> 0"
    assert str(config.Range(0, 1, low_open=True)) == "in (0, 1]"
    assert config.Range(0, 1).admits(1) and not config.Range(0, 1, high_open=True).admits(1)
    assert not config.Range(0, low_open=True).admits(0) and config.Range().admits(-math.inf)
