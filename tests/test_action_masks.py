"""Action masks (issue #47): an env whose observation carries ``action_mask`` is honoured by PPO
(masked categorical) and DQN (masked argmax, exploration and target), through the console script,
on ``env=pick_items`` (``examples/my_lab/masked_env.py``) in strict mode, where an illegal action
raises in the env: a run that completes took none. A random legal policy earns 1.50 an episode
there (5000 episodes, seeds 0, 1, 2), an untrained PPO policy at most 1.58 over 16 batches and
1.61 in evaluation; the trained figures of each test were measured on seeds 0, 1, 2 (2026-11-27,
docs/guides/action-masks.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from conftest import EXAMPLES, exported_file_runner, run_dirs, run_rlrun, summary

STRICT = ["env=pick_items", "env.kwargs.strict=true", "trainer.progress_bar=false",
          "eval.episodes=100"]  # fmt: skip
# 8192 frames: train return (last batch) 1.984, 2.008, 2.041; evaluation 2.152, 2.150, 2.162
PPO = ["+experiment=ppo", "algo.entropy_coef=0.01", "trainer.total_frames=8192",
       "eval.every_frames=8192"]  # fmt: skip
# 4096 frames: train return (last batch) 2.078, 2.096, 2.104; evaluation 2.170, 2.169, 2.182
DQN = ["+experiment=dqn", "policy.hidden_sizes=[64,64]", "algo.eps_anneal_frames=2048",
       "trainer.total_frames=4096", "eval.every_frames=4096"]  # fmt: skip
TRAINED = {"train_return_last": 1.85, "eval_return_last": 1.9}  # untrained: 1.58, 1.61 at most


def rlrun_masked(*args: str, cwd: Path, check: bool = True):
    """``rlrun ARGS`` with the example package on PYTHONPATH, as the guide runs it."""
    return run_rlrun(*args, cwd=cwd, check=check, env={"PYTHONPATH": str(EXAMPLES)})


def assert_learnt(run: Path) -> None:
    s = summary(run)
    assert s["status"] == "completed", s  # strict: an illegal action would have failed it
    for key, least in TRAINED.items():
        assert s[key] > least, (key, s)


@pytest.mark.parametrize(
    ("algorithm", "fmt"), [(PPO, "onnx"), (DQN, "torchscript")], ids=["ppo", "dqn"]
)
def test_takes_no_illegal_action_learns_and_exports(
    workdir: Path, algorithm: list[str], fmt: str
) -> None:
    """Strict mode: every action of the run (DQN's random first frames and epsilon-greedy ones
    too) was legal, and the return is one a random legal policy does not reach. The exported
    file takes the mask beside the observation and acts within it: with one legal action left,
    it picks that one, whatever the observation."""
    rlrun_masked(*algorithm, *STRICT, "seed=0", cwd=workdir)
    (run,) = run_dirs(workdir)
    assert_learnt(run)
    rlrun_masked("export", str(run), f"format={fmt}", cwd=workdir)
    path = run / "export" / ("policy.onnx" if fmt == "onnx" else "policy.pt")
    assert [i["name"] for i in json.loads(Path(f"{path}.json").read_text())["inputs"]] == [
        "observation",
        "action_mask",
    ]
    act = exported_file_runner(path)
    observation = torch.randn(64, 17) * 3
    legal = torch.randint(8, (64,))
    (action,) = act(observation, torch.nn.functional.one_hot(legal, 8).bool())
    assert torch.equal(action.argmax(-1), legal)


@pytest.mark.parametrize("preset", ["ppo", "dqn"])
def test_a_mask_with_no_legal_action_stops_the_run_in_one_line(workdir: Path, preset: str) -> None:
    """9 picks of 8 items: the ninth turn has no legal action (DQN meets it in its random first
    frames, PPO in its first batch)."""
    proc = rlrun_masked(f"+experiment={preset}", *STRICT, "env.kwargs.picks=9",
                        "checkpoint.backend=none", cwd=workdir, check=False)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(
        "rlrun: error: the env's action_mask has no legal action at step 8 of an episode (env 0 of"
    ), line
    (run,) = run_dirs(workdir)
    assert summary(run)["status"] == "failed" and "EnvError" in summary(run)["error"]


def test_a_policy_that_ignores_the_mask_is_refused(workdir: Path) -> None:
    """C51's networks do not read the mask: refused, rather than acting outside it."""
    proc = rlrun_masked("+experiment=c51", *STRICT, "checkpoint.backend=none", cwd=workdir,
                        check=False)  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "carry an action_mask, which policy._target_=rlrun.algorithms.c51.networks" in line


def test_the_strict_env_raises_on_an_illegal_action_and_counts_them_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What makes the runs above able to fail: the env refuses (strict) or counts an illegal
    action."""
    import gymnasium
    import numpy as np

    monkeypatch.syspath_prepend(str(EXAMPLES))
    from my_lab.masked_env import IllegalAction

    for strict in (True, False):
        env = gymnasium.make("my_lab/PickItems-v0", strict=strict)
        obs, _ = env.reset(seed=0)
        illegal = int(np.flatnonzero(obs["action_mask"] == 0)[0])
        if strict:
            with pytest.raises(IllegalAction):
                env.step(illegal)
            continue
        obs, reward, *_, info = env.step(illegal)
        assert reward == -1.0 and info["illegal_actions"] == 1


def test_the_masked_actor_samples_scores_and_entropies_legal_actions_only() -> None:
    """PPO's actor: sampled and deterministic actions are legal, log-probs and the entropy (and
    its gradient) finite, the entropy no more than that of a uniform draw among legal actions."""
    import torch
    from tensordict import TensorDict
    from torchrl.data import Binary, Composite, OneHot, Unbounded
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    from rlrun.builders.policies import make_actor_critic

    torch.manual_seed(0)
    spec = Composite(observation=Unbounded(17), action_mask=Binary(8, dtype=torch.bool))
    actor = make_actor_critic(observation_spec=spec, action_spec=OneHot(8)).actor
    mask = torch.rand(1024, 8) < 0.3
    mask[torch.arange(1024), torch.randint(8, (1024,))] = True  # one legal action at least
    td = TensorDict(observation=torch.randn(1024, 17) * 5, action_mask=mask, batch_size=[1024])
    for kind in (ExplorationType.RANDOM, ExplorationType.DETERMINISTIC):
        with set_exploration_type(kind):
            out = actor(td.clone())
        assert (out["action"].bool() & ~mask).sum() == 0, kind
        assert out["action_log_prob"].isfinite().all()
    entropy = actor.get_dist(td.clone()).entropy()
    assert entropy.isfinite().all() and (entropy <= mask.sum(-1).log() + 1e-5).all()
    entropy.mean().backward()
    assert all(p.grad.isfinite().all() for p in actor.parameters() if p.grad is not None)


@pytest.mark.parametrize("double_dqn", [True, False])
def test_the_dqn_target_maxes_over_the_next_states_legal_actions(double_dqn: bool) -> None:
    """With the best next action illegal, the loss is that of the best legal one."""
    import torch
    from tensordict import TensorDict
    from torchrl.data import Binary, Composite, OneHot, Unbounded
    from torchrl.objectives import DQNLoss, ValueEstimators

    from rlrun.builders.policies import make_qvalue_actor

    torch.manual_seed(0)
    spec = Composite(observation=Unbounded(17), action_mask=Binary(8, dtype=torch.bool))
    qvalue = make_qvalue_actor(observation_spec=spec, action_spec=OneHot(8)).qvalue
    loss = DQNLoss(qvalue, loss_function="l2", delay_value=True, double_dqn=double_dqn)
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.9)
    obs, next_obs, legal = torch.randn(64, 17), torch.randn(64, 17), torch.ones(64, 8).bool()
    with torch.no_grad():
        q, next_q = (qvalue(TensorDict(observation=o, action_mask=legal, batch_size=[64]))
                     ["action_value"] for o in (obs, next_obs))  # fmt: skip
    next_mask = legal.clone()
    next_mask[torch.arange(64), next_q.argmax(-1)] = False  # the best next action is illegal
    action = torch.nn.functional.one_hot(torch.randint(8, (64,)), 8)
    reward, false = torch.randn(64, 1), torch.zeros(64, 1, dtype=torch.bool)
    td = TensorDict(
        observation=obs, action_mask=legal, action=action,
        next=TensorDict(observation=next_obs, action_mask=next_mask, reward=reward, done=false,
                        terminated=false, batch_size=[64]),
        batch_size=[64],
    )  # fmt: skip
    chosen = (q * action).sum(-1)
    legal = reward.squeeze(-1) + 0.9 * next_q.masked_fill(~next_mask, -math.inf).max(-1).values
    expected = (chosen - legal).pow(2).mean()
    assert torch.isclose(loss(td)["loss"], expected, rtol=1e-4), (loss(td)["loss"], expected)
    unmasked = (chosen - reward.squeeze(-1) - 0.9 * next_q.max(-1).values).pow(2).mean()
    assert not torch.isclose(unmasked, expected, rtol=1e-4)
