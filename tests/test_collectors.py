"""Collectors from config: policy copies, non-copyable policies, multi-process collection.

The policies come from ``examples/my_lab`` (declared not copyable) and ``collector_policies.py``
(the same lock-holding policy, undeclared), imported by ``_target_`` in real rlrun processes.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import (
    EXAMPLES,
    RLRUN,
    TINY,
    compose,
    cpu_placement,
    csv_series,
    leftovers,
    run_dirs,
    run_rlrun,
    summary,
)
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
USER_PATH = {"PYTHONPATH": os.pathsep.join([str(EXAMPLES), str(ROOT / "tests"), str(ROOT)])}
LOCKED = "policy._target_=collector_policies.build_locked"
AUTO_WARNING = "collector.policy_copy=auto: the policy cannot be copied"
LOCK_ERROR = "UndeclaredLockedMLP (inside ProbabilisticActor) failed to"


def test_copy_probe_names_the_culprit_and_leaves_the_policy_intact(monkeypatch) -> None:
    """The probe copies no tensor and never leaves parameters on ``meta`` (TorchRL 0.14.1 does)."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    from collector_policies import build_locked
    from my_lab.policies import build_policy

    from rlrun.builders.copying import copy_problem
    from rlrun.builders.envs import make_env
    from rlrun.builders.policies import make_actor_critic

    env = make_env(compose("env.num_envs=2").env)
    specs = {
        "observation_spec": env.observation_spec,
        "action_spec": env.full_action_spec["action"],
    }
    locked = build_locked(**specs, device="cpu").actor
    before = [p.clone() for p in locked.parameters()]
    for how in ("deepcopy", "pickle"):
        problem = copy_problem(locked, how)
        assert problem.startswith(f"{LOCK_ERROR} {how}: TypeError: cannot pickle '_thread.lock'")
    after = list(locked.parameters())
    assert all(
        p.device.type == "cpu" and torch.equal(p, q) for p, q in zip(after, before, strict=True)
    )
    declared = build_policy(**specs, device="cpu").actor
    assert copy_problem(declared, "pickle") == "LockedMLP declares rlrun_copyable = False"
    plain = make_actor_critic(**specs).actor
    assert copy_problem(plain, "deepcopy") is None and copy_problem(plain, "pickle") is None


def test_loss_must_train_the_policy_the_collector_runs_in_place() -> None:
    from torchrl.objectives import ClipPPOLoss

    from rlrun.builders.copying import check_loss_trains_in_place
    from rlrun.builders.envs import make_env
    from rlrun.builders.policies import make_actor_critic
    from rlrun.errors import ConfigError

    env = make_env(compose("env.num_envs=2").env)
    ac = make_actor_critic(
        observation_spec=env.observation_spec, action_spec=env.full_action_spec["action"]
    )
    check_loss_trains_in_place(ClipPPOLoss(ac.actor, ac.critic), ac.actor)  # shares: fine
    with pytest.raises(ConfigError, match="ClipPPOLoss trains copies of the policy"):
        check_loss_trains_in_place(ClipPPOLoss(copy.deepcopy(ac.actor), ac.critic), ac.actor)


def test_trajectory_ids_are_written_only_where_read() -> None:
    from rlrun.builders.collectors import make_collector
    from rlrun.builders.envs import make_env
    from rlrun.builders.policies import make_actor_critic
    from rlrun.errors import ConfigError
    from rlrun.validation import validate

    env_cfg = compose("env.num_envs=2").env
    env = make_env(env_cfg)
    actor = make_actor_critic(
        observation_spec=env.observation_spec, action_spec=env.full_action_spec["action"]
    ).actor
    policy_cfg = compose().policy
    where = cpu_placement()

    def first_batch(traj_ids: bool | None, read: bool):
        traj = "null" if traj_ids is None else str(traj_ids).lower()
        cfg = compose("collector.frames_per_batch=16", f"collector.traj_ids={traj}").collector
        collector = make_collector(
            cfg, env, actor, 16, where, env_cfg=env_cfg, policy_cfg=policy_cfg, traj_ids_read=read
        )
        batch = next(iter(collector))
        collector.shutdown()
        return batch

    traj = ("collector", "traj_ids")
    assert traj not in first_batch(None, read=False).keys(True)  # PPO: nothing reads them
    assert traj in first_batch(None, read=True).keys(True)  # e.g. the slice sampler
    assert traj in first_batch(True, read=False).keys(True)  # asked for explicitly
    with pytest.raises(ConfigError, match="only collector=sync can skip them"):
        validate(compose("collector=async", "collector.traj_ids=false"))


def test_uncopyable_policy_trains_in_place_with_one_warning(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", *TINY, LOCKED, "collector=sync", "collector.policy_copy=auto",
        cwd=workdir, env=USER_PATH,
    )  # fmt: skip
    assert proc.stdout.count(AUTO_WARNING) == 1, proc.stdout  # Hydra logs to stdout...
    run = run_dirs(workdir)[0]
    warning = next(
        line for line in (run / "cli.log").read_text().splitlines() if AUTO_WARNING in line
    )
    assert "WARNING" in warning and f"{LOCK_ERROR} deepcopy" in warning  # ...and the run's log
    assert "collector.policy_copy=never" in warning  # how to silence it
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 1024
    assert (run / "csv/scalars/train/loss_objective.csv").read_text().strip()  # PPO trained it


def test_always_copying_an_uncopyable_policy_is_a_clear_error(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", *TINY, LOCKED, "collector.policy_copy=always",
        cwd=workdir, env=USER_PATH, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "rlrun: error: collector.policy_copy=always, but the policy cannot be copied" in (
        proc.stderr
    )
    assert f"{LOCK_ERROR} deepcopy: TypeError: cannot pickle '_thread.lock' object" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_declared_user_policy_from_own_config_dir_trains_silently(workdir: Path) -> None:
    """docs/guides/collectors.md's path: own module by ``_target_``, own YAML by
    ``--config-dir``."""
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "policy=locked", "--config-dir", str(EXAMPLES / "my_conf"),
        cwd=workdir, env=USER_PATH,
    )  # fmt: skip
    assert AUTO_WARNING not in proc.stdout + proc.stderr
    run = run_dirs(workdir)[0]
    assert summary(run)["status"] == "completed"
    composed = OmegaConf.load(run / ".hydra/config.yaml")
    assert composed.policy._target_ == "my_lab.policies.build_policy"


def test_multi_sync_refuses_unpicklable_policy_before_any_process(workdir: Path) -> None:
    start = time.monotonic()
    proc = subprocess.Popen(
        [RLRUN, "+experiment=ppo", *TINY, LOCKED, "collector=multi_sync"],
        cwd=workdir,
        env={**os.environ, **USER_PATH},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # every process it starts stays in its session
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stderr
    assert f"{LOCK_ERROR} pickle" in stderr and "collector.policy_factory" in stderr
    assert "Traceback" not in stderr
    assert time.monotonic() - start < 90
    assert leftovers(proc.pid) == []


def test_a_dying_worker_ends_the_run_with_one_line_and_no_leftovers(workdir: Path) -> None:
    proc = subprocess.Popen(
        [RLRUN, "+experiment=ppo", *TINY, "collector=multi_sync",
         "+env.transforms=[{_target_: worker_faults.FailInWorker}]"],
        cwd=workdir,
        env={**os.environ, **USER_PATH},
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )  # fmt: skip
    _, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 1, stderr
    assert "RuntimeError: env broke in a worker" in stderr  # the worker's own traceback
    last = stderr.strip().splitlines()[-1]
    assert last.startswith("rlrun: error: collector worker ") and "died (exit code 1)" in last
    assert "Error executing job" not in stderr  # no traceback of the main process
    assert leftovers(proc.pid) == []
    result = summary(run_dirs(workdir)[0])
    assert result["status"] == "failed" and result["error"].startswith("RunError: collector worker")


def test_multi_sync_policy_factory_sends_weights_to_two_workers(workdir: Path) -> None:
    trace = workdir / "trace"
    trace.mkdir()
    run_rlrun(
        "+experiment=ppo", *TINY, LOCKED, f"+policy.trace_dir={trace}",
        "collector=multi_sync", "collector.num_workers=2",
        "collector.policy_factory=${policy._target_}",
        cwd=workdir, env=USER_PATH,
    )  # fmt: skip
    runs, gc_states = {}, {}
    for file in trace.glob("*.txt"):
        lines = [line.split() for line in file.read_text().splitlines()]
        runs[lines[0][0]] = [float(checksum) for _, checksum, *_ in lines]
        gc_states[lines[0][0]] = {(enabled, int(frozen)) for *_, enabled, frozen in lines}
    main = set(runs.pop("MainProcess"))
    assert len(runs) == 2, runs  # two worker processes ran the policy
    for checksums in runs.values():
        assert len(set(checksums)) >= 2  # their weights changed after an update...
        assert set(checksums) <= main  # ...to weights the trainer's policy had
    # each process ran with Python's garbage collector on, what it imported frozen out of its
    # passes (rlrun/builders/imports.py: collection_paused, and in the spawned workers
    # collection_paused_while_spawning)
    for name, states in gc_states.items():
        assert all(on == "True" and frozen > 100_000 for on, frozen in states), (name, states)
    assert summary(run_dirs(workdir)[0])["status"] == "completed"


def test_dqn_workers_that_build_their_policy_explore_like_the_trainer(workdir: Path) -> None:
    # Each worker appends the epsilon-greedy module to the policy it builds; before, the
    # structures differed and the first weight sync failed inside the workers.
    run_rlrun(
        "+experiment=dqn", "trainer.total_frames=1024", "trainer.progress_bar=false",
        "collector=multi_sync", "collector.num_workers=2", "collector.init_random_frames=0",
        "collector.policy_factory=${policy._target_}",
        cwd=workdir,
    )  # fmt: skip
    run = run_dirs(workdir)[0]
    assert summary(run)["status"] == "completed" and summary(run)["frames"] == 1024
    eps = [value for _, value in csv_series(run, "train/epsilon")]
    assert eps[0] < 1.0 and eps == sorted(eps, reverse=True)  # annealed batch by batch


def test_async_collector_completes_a_tiny_run(workdir: Path) -> None:
    run_rlrun("+experiment=ppo", *TINY, "collector=async", cwd=workdir)
    result = summary(run_dirs(workdir)[0])
    assert result["status"] == "completed" and result["frames"] >= 1024


@pytest.mark.cuda
def test_never_copy_across_devices_names_the_disagreeing_settings(workdir: Path) -> None:
    proc = run_rlrun(
        "+experiment=ppo", *TINY, "device=cuda", "collector.device=cpu",
        "collector.policy_copy=never", cwd=workdir, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "collector.policy_copy=never" in proc.stderr and "collector.device=cpu" in proc.stderr
