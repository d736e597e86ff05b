"""Recurrent policies: sequence mode equals stepping, scopes, log-prob guard, CLI runs, learning."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest
import torch
from conftest import TINY, compose, run_dirs, run_rlrun, series, summary
from omegaconf import OmegaConf
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.modules import recurrent_mode, set_recurrent_mode

from rlrun.algorithms import declared, shipped
from rlrun.builders.envs import make_env
from rlrun.builders.onpolicy import log_prob_error
from rlrun.builders.policies import ActorCritic, RecurrentScope, make_actor_critic, recurrent_modes
from rlrun.builders.training import Context
from rlrun.checks.policies import check_policy
from rlrun.errors import ConfigError

CPU = torch.device("cpu")

OBS = Composite(observation=Unbounded(shape=(3,)))
ACTION = Categorical(2)


def algo_cfg(**over) -> OmegaConf:
    """The shipped ``algo=ppo`` config, with overrides."""
    return OmegaConf.merge(compose("algo=ppo").algo, over)


def build_ppo(cfg, *args):
    """The algorithm ``cfg`` declares (``algo=ppo``), built."""
    return declared(cfg)(cfg, Context(*args))


def masked_cartpole(num_envs: int = 4):
    return make_env(compose("env=cartpole_masked").env, num_envs=num_envs, seed=0)


def random_sequences(ac, batch: int, steps: int, resets: list[tuple[int, int]]) -> TensorDict:
    """A ``[batch, steps]`` tensordict of observations, zero primed state, ``is_init`` at t=0
    and at ``resets``, as a collector would store it."""
    td = TensorDict({"observation": torch.randn(batch, steps, 3)}, [batch, steps])
    is_init = torch.zeros(batch, steps, 1, dtype=torch.bool)
    is_init[:, 0] = True
    for b, t in resets:
        is_init[b, t] = True
    td["is_init"] = is_init
    for primer in ac.primers:
        for key, spec in primer.primers.items(True, True):
            td[key] = torch.zeros(batch, steps, *spec.shape)
    return td


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("layers", [1, 2])
def test_sequence_mode_equals_stepping_with_resets(kind: str, layers: int) -> None:
    torch.manual_seed(0)
    ac = make_actor_critic(
        observation_spec=OBS, action_spec=ACTION, kind=kind, hidden_size=16, num_layers=layers
    )
    net = ac.critic  # deterministic: state_value
    batch, steps, resets = 3, 12, [(0, 5), (2, 9)]
    seq = random_sequences(ac, batch, steps, resets)
    with set_recurrent_mode(True), torch.no_grad():
        whole = net(seq.clone())["state_value"]

    hidden_keys = [k for k in seq.keys() if k.startswith("critic_")]
    stepped, carry = [], {k: seq[k][:, 0] for k in hidden_keys}
    with set_recurrent_mode(False), torch.no_grad():
        for t in range(steps):
            step = seq[:, t].clone()
            step.update(carry)  # the previous step's hidden state, as a collector carries it
            out = net(step)
            stepped.append(out["state_value"])
            carry = {k: out["next", k] for k in hidden_keys}
    stepped = torch.stack(stepped, 1)
    torch.testing.assert_close(whole, stepped, atol=1e-5, rtol=0)

    # A reset means a fresh start: from an is_init step on, the outputs are those of the
    # same observations run alone from a zero state.
    b, t = resets[0]
    with set_recurrent_mode(True), torch.no_grad():
        alone = net(seq[b : b + 1, t:].clone())["state_value"]
    torch.testing.assert_close(whole[b : b + 1, t:], alone, atol=1e-5, rtol=0)
    no_reset = seq.clone()
    no_reset["is_init"][b, t] = False
    with set_recurrent_mode(True), torch.no_grad():
        carried = net(no_reset)["state_value"]
    assert not torch.allclose(whole[b, t], carried[b, t], atol=1e-4)


class Boom(nn.Module):
    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        self.seen = recurrent_mode()
        raise ValueError("boom")


def test_scope_restores_mode_after_exception() -> None:
    module = RecurrentScope(TensorDictModule(Boom(), ["observation"], ["x"]), mode=False)
    td = TensorDict({"observation": torch.zeros(2, 3)}, [2])
    for outer in (None, True):
        with set_recurrent_mode(outer):
            with pytest.raises(ValueError, match="boom"):
                module(td)
            assert module.module.module.seen is False  # the scope reached the user's module
            assert recurrent_mode() == outer  # and was undone by the exception
    assert recurrent_mode() is None


def test_recurrent_mode_flags_are_checked() -> None:
    assert recurrent_modes({"loss": True}) == {"collect": False, "loss": True, "eval": False}
    with pytest.raises(ConfigError, match="policy.recurrent_mode.collect=true"):
        check_policy(compose("policy=lstm", "policy.recurrent_mode.collect=true").policy)
    with pytest.raises(ConfigError, match="choose one of: collect, loss, eval"):
        check_policy(compose("policy=lstm", "+policy.recurrent_mode.colect=false").policy)


def collected_batch(kind: str, num_envs: int = 4, frames: int = 256):
    """A real batch from masked CartPole, collected the way ``rlrun`` does, and the PPO algo."""
    torch.manual_seed(0)
    env = masked_cartpole(num_envs)
    ac = make_actor_critic(
        observation_spec=env.observation_spec,
        action_spec=env.full_action_spec["action"],
        kind=kind,
        hidden_sizes=[32],
    )
    for transform in ac.env_transforms():
        env.append_transform(transform)
    collector = Collector(
        env,
        ac.rollout_policy("collect"),
        frames_per_batch=frames,
        total_frames=frames,
        auto_register_policy_transforms=False,
    )
    batch = next(iter(collector))
    collector.shutdown()
    return ac, batch


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_collected_and_recomputed_log_probs_agree(kind: str) -> None:
    ac, batch = collected_batch(kind)
    is_init = batch["is_init"].squeeze(-1)
    assert is_init[:, 1:].any(), "the batch should hold episode starts mid-row"
    for key in ("actor_h", "critic_h"):  # hidden state: zero at episode starts, else carried
        assert (batch[key][is_init] == 0).all()
        later = ~is_init[:, 1:]
        assert torch.equal(batch[key][:, 1:][later], batch["next", key][:, :-1][later])
    algo = build_ppo(algo_cfg(minibatch_size=64, sequence_length=16), ac, batch.numel(), CPU)
    hook = algo.hooks[0]
    hook.process_batch(batch)  # GAE in sequence mode, slicing, then the guard
    assert hook.check["logprob_error_max"] < 1e-5
    assert abs(hook.check["logprob_check_kl"]) < 1e-8
    minibatch = hook.sample(batch)
    assert minibatch.shape == (4, 16)  # whole sequences, 64 frames
    loss = algo.loss(minibatch)
    assert torch.isfinite(loss["loss_objective"])

    # What the guard protects against: the same batch flattened and shuffled step by step.
    keys = algo.loss.tensor_keys
    flat = batch.reshape(-1)[torch.randperm(batch.numel())]
    with set_recurrent_mode(True):
        shuffled = log_prob_error(algo.loss.actor_network, flat, keys)["logprob_error_mean"]
    assert shuffled > max(1e-4, 1000 * hook.check["logprob_error_mean"])


def test_log_prob_guard_stops_the_run() -> None:
    ac, batch = collected_batch("lstm")
    algo = build_ppo(algo_cfg(minibatch_size=64), ac, batch.numel(), CPU)
    batch["action_log_prob"] = batch["action_log_prob"] + 0.1  # a policy that does not replay
    with pytest.raises(ConfigError, match="algo.logprob_check_tol"):
        algo.hooks[0].process_batch(batch)


@pytest.mark.parametrize(
    ("length", "message"),
    [(100, "algo.sequence_length=100 must divide"), (24, "valid: 1, 2, 4, 8, 16, 32, 64")],
)
def test_bad_sequence_length_is_a_config_error(length: int, message: str) -> None:
    ac, batch = collected_batch("lstm")
    algo = build_ppo(algo_cfg(minibatch_size=64, sequence_length=length), ac, batch.numel(), CPU)
    with pytest.raises(ConfigError, match=message):
        algo.hooks[0].process_batch(batch)


def test_loss_mode_off_is_rejected_by_ppo() -> None:
    ac = make_actor_critic(observation_spec=OBS, action_spec=ACTION, kind="lstm")
    ac.recurrent_mode = recurrent_modes({"loss": False})
    with pytest.raises(ConfigError, match="policy.recurrent_mode.loss=false"):
        build_ppo(algo_cfg(), ac, 1024, CPU)


# one agent's (a team's algorithm on a team's env: tests/test_multiagent.py)
SINGLE = [n for n, a in shipped().items() if not a.sequences and not a.multi_agent]


@pytest.mark.parametrize("algo", SINGLE or [None])
def test_recurrent_policy_with_a_non_sequence_algorithm(algo: str | None, workdir: Path) -> None:
    if algo is None:
        pytest.skip("every algorithm here trains on sequences")
    proc = run_rlrun("policy=lstm", f"algo={algo}", "env=cartpole_masked", cwd=workdir, check=False)
    assert proc.returncode == 2
    assert f"algo={algo} cannot train a recurrent policy" in proc.stderr


def test_ppo_lstm_and_gru_tiny_runs(workdir: Path) -> None:
    """LSTM and GRU, one and two layers, minibatches of 16-step sequences (the preset's default,
    whole rows, runs in test_user_factory_gets_primers_and_scopes): one sweep, its jobs forked
    from one process."""
    sweep = workdir / "sweep"
    run_rlrun("-m", "+experiment=ppo_lstm", *TINY, "policy=lstm,gru", "policy.num_layers=1,2",
              "algo.sequence_length=16", f"hydra.sweep.dir={sweep}", cwd=workdir)  # fmt: skip
    built = []
    for job in sorted(p.parent for p in sweep.glob("*/summary.json")):
        result = summary(job)
        assert result["status"] == "completed"
        assert result["frames"] == 1024
        # CartPole pays 1 a step, whatever the agent sees: returns are episode lengths
        assert series(job, "episode_return") == series(job, "episode_length")
        config = OmegaConf.load(job / ".hydra" / "config.yaml")
        assert config.env.obs_mask == [0, 2]
        built.append((config.policy.kind, config.policy.num_layers))
    assert sorted(built) == [("gru", 1), ("gru", 2), ("lstm", 1), ("lstm", 2)]


def test_bad_sequence_length_from_the_command_line(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo_lstm", *TINY, "algo.sequence_length=48", cwd=workdir, check=False
    )
    assert proc.returncode == 2
    assert "algo.sequence_length=48 must divide" in proc.stderr
    assert "Traceback" not in proc.stderr


def factory_without_primers(**kwargs) -> ActorCritic:
    """A user's policy factory that returns no primers: rlrun finds them in its modules."""
    return dataclasses.replace(make_actor_critic(**kwargs), primers=[])


def test_user_factory_gets_primers_and_scopes(workdir: Path) -> None:
    here = str(Path(__file__).parent)
    path = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    target = "policy._target_=test_recurrent.factory_without_primers"
    run_rlrun("+experiment=ppo_lstm", target, *TINY, cwd=workdir, env={"PYTHONPATH": path})
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "completed"
    checked = (run / "csv" / "scalars" / "train" / "logprob_error_max.csv").read_text().split()
    assert len(checked) == 2  # one guard per batch, both passed
    assert all(float(line.split(",")[1]) < 1e-5 for line in checked)
