"""Offline RL from the console script (issue #32): an online run, its policy recorded as a Minari
dataset (``rlrun record``, read back with Minari itself), offline algorithms trained from it (and
from a run's own replay buffer), an offline run resumed, then continued online from its networks
with a collector; refusals in one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import csv_series, run_dirs, run_rlrun, summary

import rlrun

minari = pytest.importorskip("minari")

# optimisation steps in batches of 10, evaluated once at the end
OFFLINE = ["trainer.total_frames=20", "collector.frames_per_batch=10", "eval.every_frames=20",
           "eval.episodes=1", "replay_buffer.batch_size=32",
           "trainer.progress_bar=false"]  # fmt: skip
SAC = ["+experiment=sac", "trainer.total_frames=400", "collector.init_random_frames=200",
       "replay_buffer.batch_size=32", "trainer.progress_bar=false"]  # fmt: skip
DQN = ["+experiment=dqn", "trainer.total_frames=400", "collector.frames_per_batch=200",
       "collector.init_random_frames=200", "replay_buffer.batch_size=32",
       "trainer.progress_bar=false"]  # fmt: skip


def record(run: Path, cwd: Path, env: dict, *options: str) -> str:
    """``rlrun record RUN episodes=2 ...``; returns the id of the dataset it wrote."""
    proc = run_rlrun("record", str(run), "episodes=2", "ref_episodes=1", *options, cwd=cwd,
                     env=env)  # fmt: skip
    written = max((run / "datasets").glob("*.json"), key=lambda p: p.stat().st_mtime)
    dataset = json.loads(written.read_text())["id"]
    assert f"Minari dataset {dataset}" in proc.stdout
    return dataset


def load(root: Path, dataset_id: str):
    """The dataset as any Minari user loads it (Minari reads its root when called)."""
    os.environ["MINARI_DATASETS_PATH"] = str(root / "datasets")
    try:
        return minari.load_dataset(dataset_id)
    finally:
        del os.environ["MINARI_DATASETS_PATH"]


def offline_jobs(root: Path, count: int) -> list[Path]:
    """The offline sweeps' jobs under ``root``, each completed: 20 optimisation steps (its
    frames), logged as such, and an evaluation in the env."""
    jobs = sorted(p.parent for p in (root / "outputs" / "multirun").rglob("summary.json"))
    assert len(jobs) == count
    for job in jobs:
        done = summary(job)
        assert done["status"] == "completed" and done["frames"] == 20, job
        assert done["eval_return_last"] is not None
        steps = (job / "csv" / "scalars" / "train" / "optim_steps.csv").read_text().split()
        assert steps[-1] == "20,20.0"  # a frame of an offline run is one optimisation step
    return jobs


def test_record_offline_resume_then_online(workdir: Path) -> None:
    env = {"MINARI_DATASETS_PATH": str(workdir / "datasets")}
    run_rlrun(*SAC, cwd=workdir)
    (sac,) = run_dirs(workdir)
    record(sac, workdir, env, "noise=0.3", "id=rlrun/pendulum/tiny-v0")
    dataset = load(workdir, "rlrun/pendulum/tiny-v0")
    assert dataset.total_episodes == 2 and dataset.total_steps == 400
    episode = next(dataset.iterate_episodes())
    assert episode.observations.shape == (201, 3) and episode.actions.shape == (200, 1)
    assert np.all(np.abs(episode.actions) <= 2.0)  # noise clipped to Pendulum's bounds
    assert episode.truncations[-1] and not episode.terminations.any()
    assert dataset.spec.env_spec.id == "Pendulum-v1"
    written = json.loads((sac / "datasets" / "rlrun_pendulum_tiny-v0.json").read_text())
    assert written["noise"] == 0.3 and written["episodes"] == 2
    returns = [float(e.rewards.sum()) for e in dataset.iterate_episodes()]
    assert written["return_mean"] == pytest.approx(np.mean(returns))
    score = minari.get_normalized_score(dataset, np.array([written["ref_max_score"]]))
    assert score == pytest.approx(1.0)  # ref scores stored: the policy without noise is 1
    # the same id again: refused, the dataset kept
    proc = run_rlrun("record", str(sac), "episodes=1", "id=rlrun/pendulum/tiny-v0",
                     cwd=workdir, env=env, check=False)  # fmt: skip
    assert proc.returncode == 2 and "exists already" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert load(workdir, "rlrun/pendulum/tiny-v0").total_episodes == 2

    # every continuous offline algorithm, in one sweep over their presets
    presets = "bc,iql,td3_bc,cql"
    run_rlrun("-m", f"+experiment={presets}", "dataset=rlrun/pendulum/tiny-v0", *OFFLINE,
              cwd=workdir, env=env)  # fmt: skip
    jobs = offline_jobs(workdir, 4)
    iql = next(j for j in jobs if "iql" in (j / ".hydra" / "overrides.yaml").read_text())
    cql = next(j for j in jobs if "cql" in (j / ".hydra" / "overrides.yaml").read_text())
    logged = {p.stem for p in (cql / "csv" / "scalars" / "train").glob("*.csv")}
    assert {"loss_actor", "loss_cql", "actor_bc"} <= logged  # the BC term reported, not trained
    assert "loss_actor_bc" not in logged
    # algo.bc_steps: the actor learns by behaviour cloning for that many steps, counted across
    # a resume (steps 21-30 here), then CQL's objective again
    run_rlrun(f"resume={cql}", "trainer.total_frames=40", "algo.bc_steps=30", cwd=workdir, env=env)
    actor = csv_series(cql, "train/loss_actor")
    cloned = csv_series(cql, "train/actor_bc")
    assert [f for f, _ in actor] == [10, 20, 30, 40]
    same = [a == b for (_, a), (_, b) in zip(actor, cloned, strict=True)]
    assert same == [False, False, True, False]

    # resumed: 10 more steps, from its checkpoint
    run_rlrun(f"resume={iql}", "trainer.total_frames=30", cwd=workdir, env=env)
    assert summary(iql)["frames"] == 30
    steps = (iql / "csv" / "scalars" / "train" / "optim_steps.csv").read_text().split()
    assert steps[-1] == "30,30.0"

    # online, from the offline networks, sampling the dataset and the collected frames; with a
    # negligible learning rate, its policy acts as the offline one did
    online = ["+experiment=iql", "dataset=rlrun/pendulum/tiny-v0", "collector=sync",
              f"init_from={iql}", "trainer.total_frames=400", "collector.frames_per_batch=200",
              "replay_buffer.offline_anneal_frames=400", "optim.lr=1e-12",
              "replay_buffer.batch_size=32", "eval.every_frames=0",
              "trainer.progress_bar=false"]  # fmt: skip
    proc = run_rlrun(*online, cwd=workdir, env=env)
    assert "rlrun: networks from" in proc.stdout
    run = next(r for r in run_dirs(workdir) if r not in (sac,))
    done = summary(run)
    assert done["status"] == "completed" and done["frames"] == 400
    assert done["train_return_last"] is not None  # it collected episodes
    obs = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 2.0], [-1.0, 0.0, -3.0]])
    offline_actions = rlrun.load(iql)(obs)
    online_actions = rlrun.load(run)(obs)
    torch.testing.assert_close(online_actions, offline_actions, atol=1e-4, rtol=0)
    manifest = json.loads(
        next((run / "checkpoints").glob("checkpoint-*/manifest.json")).read_text()
    )
    assert "replay_buffer" in manifest["components"]  # the collected frames, not the dataset

    # behaviour cloning of the policy without noise reproduces its actions: the loss saw the
    # dataset's own transitions (TorchRL 0.14.1's MinariExperienceReplay gave zeros)
    record(sac, workdir, env, "id=rlrun/pendulum/clean-v0")
    run_rlrun("+experiment=bc", "dataset=rlrun/pendulum/clean-v0", "trainer.total_frames=300",
              "collector.frames_per_batch=300", "eval.every_frames=0",
              "replay_buffer.batch_size=64", "optim.lr=1e-3", "trainer.progress_bar=false",
              cwd=workdir, env=env)  # fmt: skip
    bc = max(run_dirs(workdir), key=lambda p: p.stat().st_mtime)
    episode = next(load(workdir, "rlrun/pendulum/clean-v0").iterate_episodes())
    cloned = rlrun.load(bc)(torch.as_tensor(episode.observations[:-1], dtype=torch.float32))
    error = np.abs(cloned.numpy() - episode.actions).mean()
    assert error < 0.1 * np.abs(episode.actions).mean()  # (0.003 against 0.18, 2026-11-25)

    # a run's own replay buffer is a dataset too
    run_rlrun("+experiment=td3_bc", f"dataset={sac}", *OFFLINE, cwd=workdir, env=env)
    assert summary(max(run_dirs(workdir), key=lambda p: p.stat().st_mtime))["frames"] == 20


def test_discrete_offline_and_mismatched_spaces(workdir: Path) -> None:
    env = {"MINARI_DATASETS_PATH": str(workdir / "datasets")}
    run_rlrun(*DQN, cwd=workdir)
    (dqn,) = run_dirs(workdir)
    tiny = record(dqn, workdir, env, "noise=0.1")  # a discrete policy, the default id
    assert tiny == f"rlrun/cartpole/dqn-{dqn.name}-v0"
    episode = next(load(workdir, tiny).iterate_episodes())
    assert set(np.unique(episode.actions)) <= {0, 1}
    run_rlrun("-m", "+experiment=cql_discrete,iql_discrete", f"dataset={tiny}", *OFFLINE,
              cwd=workdir, env=env)  # fmt: skip
    bc = ["+experiment=bc", "env=cartpole", "env.num_envs=1", f"dataset={tiny}"]  # categorical
    run_rlrun("-m", *bc, *OFFLINE, cwd=workdir, env=env)
    offline_jobs(workdir, 3)

    # a CartPole dataset for a Pendulum run: one line, exit 2
    proc = run_rlrun("+experiment=iql", f"dataset={tiny}", *OFFLINE, cwd=workdir, env=env,
                     check=False)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"rlrun: error: dataset={tiny}: its observations have shape (4,), the "
        "env's (3,) (continuous); record a dataset of this env, or choose the env it was "
        "recorded in (env.id=...)."
    ]
    # networks of another algorithm: one line, exit 2
    proc = run_rlrun("+experiment=iql", "env=cartpole", "env.num_envs=1", f"init_from={dqn}",
                     f"dataset={tiny}", *OFFLINE, cwd=workdir, env=env,
                     check=False)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.startswith("rlrun: error: init_from=") and "do not fit" in proc.stderr
    assert "algo.name is dqn there, iql here; policy." in proc.stderr  # what differs
    assert len(proc.stderr.strip().splitlines()) == 1

    # the dataset's file cut short (a copy interrupted, a full disk): one line, no run left
    (hdf5,) = (workdir / "datasets").rglob("*.hdf5")
    hdf5.write_bytes(hdf5.read_bytes()[: hdf5.stat().st_size // 2])
    runs = run_dirs(workdir)
    proc = run_rlrun("+experiment=iql_discrete", f"dataset={tiny}", *OFFLINE, cwd=workdir,
                     env=env, check=False)  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert f"rlrun: error: dataset={tiny}:" in proc.stderr and "record it again" in proc.stderr
    assert run_dirs(workdir) == runs  # the refused run's folder is gone


def test_record_wants_a_run_folder(workdir: Path) -> None:
    (workdir / "outputs").mkdir()
    proc = run_rlrun("record", str(workdir), "episodes=2", cwd=workdir, check=False)
    assert proc.returncode == 2 and "not a run folder" in proc.stderr


def test_cql_conservative_term_is_the_official_codes() -> None:
    """One log-sum-exp per state over all 3 x num_random actions, each Q taken at the state and
    importance-weighted, as in rlkit/torch/sac/cql.py (TorchRL 0.14.1's CQLLoss differs)."""
    from tensordict import TensorDict
    from torchrl.envs import GymEnv

    from rlrun.algorithms.cql import ConservativeSAC
    from rlrun.builders.policies import make_stochastic_actor_q

    torch.manual_seed(1)
    env = GymEnv("Pendulum-v1")  # actions in [-2, 2]: the uniform actions' density is 1/4
    spec = env.action_spec
    ac = make_stochastic_actor_q(observation_spec=env.observation_spec, action_spec=spec)
    n, batch, weight = 4, 16, 5.0
    loss = ConservativeSAC(ac.actor, ac.qvalue, min_q_weight=weight, num_random=n,
                           target_entropy=-1.0, low=spec.space.low,
                           high=spec.space.high)  # fmt: skip
    data = env.rollout(batch, break_when_any_done=False)
    loss.q_loss(data)  # writes the predicted Q values the term subtracts
    torch.manual_seed(0)
    term, _ = loss.cql_loss(data)

    torch.manual_seed(0)  # the same draws, in the same order
    params = loss.actor_network_params
    at_s, logp_s = loss._get_policy_actions(data.copy(), params, n)
    at_next, logp_next = loss._get_policy_actions(data.get("next").copy(), params, n)
    uniform = torch.rand_like(at_s["action"]) * 4 - 2
    obs = data["observation"].unsqueeze(1).repeat(1, n, 1).view(batch * n, -1)
    expected = 0.0
    for i, pred in enumerate((data["pred_q1"], data["pred_q2"])):

        def q(actions: torch.Tensor, i: int = i) -> torch.Tensor:
            with loss.qvalue_network_params[i].to_module(loss.qvalue_network):
                out = loss.qvalue_network(
                    TensorDict(observation=obs, action=actions, batch_size=[batch * n])
                )
            return out["state_action_value"].view(batch, n, 1)

        cat = torch.cat([q(uniform) - np.log(0.25),
                         q(at_next["action"]) - logp_next.view(batch, n, 1),
                         q(at_s["action"]) - logp_s.view(batch, n, 1)], 1)  # fmt: skip
        expected = expected + (torch.logsumexp(cat, 1).mean() - pred.mean()) * weight
    torch.testing.assert_close(term, expected)
    assert data["cql_q1_loss"].shape == (batch,)  # one gap per state


def test_discrete_cql_bootstraps_from_its_target_network() -> None:
    """cql_discrete's TD target is reward + gamma * max Q of the target network at s' (TorchRL
    0.14.1's DiscreteCQLLoss took it from the online network: its estimator ignores
    ``params=``)."""
    from torchrl.envs import GymEnv
    from torchrl.objectives import ValueEstimators

    from rlrun.algorithms.cql import TargetedDiscreteCQL
    from rlrun.builders.policies import make_qvalue_actor

    torch.manual_seed(0)
    env = GymEnv("CartPole-v1")
    ac = make_qvalue_actor(observation_spec=env.observation_spec, action_spec=env.action_spec)
    loss = TargetedDiscreteCQL(ac.qvalue, loss_function="l2", delay_value=True,
                               action_space=env.action_spec)  # fmt: skip
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.99)
    with torch.no_grad():  # a target network unlike the online one
        for p in loss.target_value_network_params.values(True, True):
            p.add_(torch.randn_like(p))
    data = env.rollout(8, break_when_any_done=False)
    out = loss(data.clone())
    reward = data["next", "reward"].squeeze(-1)
    alive = (~data["next", "terminated"]).squeeze(-1).float()
    expected = {}
    for name in ("target_value_network_params", "value_network_params"):
        with getattr(loss, name).to_module(loss.value_network):
            next_q = loss.value_network(data["next"].clone())["action_value"].max(-1).values
        expected[name] = (reward + 0.99 * alive * next_q).mean()
    torch.testing.assert_close(out["target_value"], expected["target_value_network_params"])
    assert not torch.isclose(out["target_value"], expected["value_network_params"])
    assert torch.isfinite(out["loss_qvalue"]) and out["loss_qvalue"].requires_grad
