"""rlrun's one door to TorchRL's, tensordict's and Hydra's internals: ``rlrun/compat/``.

- Each compat entry is checked against the installed library: what it relies on (a private
  method, attribute, module constant, keyword) still exists with the shape the entry expects. A
  failure names the entry, the private member and the version the entry was checked against.
- Every public entry of ``rlrun.compat`` has such a check and a docstring naming that version.
- No module of ``rlrun`` outside ``rlrun/compat/``, nor of ``hydra_plugins/rlrun_sweepers``,
  uses a ``_private`` member of TorchRL, tensordict, Hydra or a Hydra plugin (read with ``ast``).

Fast: classes are inspected, and the few objects built are tiny (no env, no training).
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
TORCHRL = "torchrl 0.14.1"
TENSORDICT = "tensordict 0.14.3"
HYDRA = "hydra-core 1.3.8"
RAY_LAUNCHER = "hydra-ray-launcher 1.2.2"
SUBMITIT_LAUNCHER = "hydra-submitit-launcher 1.2.0"


# --- helpers: each returns a problem (a sentence) or None -------------------------------------


def source(obj: Any) -> str:
    return inspect.getsource(obj)


def missing(obj: Any, *names: str) -> str | None:
    gone = [name for name in names if not hasattr(obj, name)]
    return f"{getattr(obj, '__name__', obj)} has no {', '.join(gone)}" if gone else None


def params(func: Callable, *expected: str) -> str | None:
    """None when ``func`` takes (at least, and first) the parameters ``expected``."""
    found = list(inspect.signature(func).parameters)
    if found[: len(expected)] != list(expected):
        return f"{func.__qualname__} takes {found}, expected {list(expected)} first"
    return None


def contains(obj: Any, *snippets: str) -> str | None:
    text = source(obj)
    gone = [s for s in snippets if s not in text]
    name = getattr(obj, "__qualname__", obj)
    return f"{name} no longer contains {' / '.join(map(repr, gone))}" if gone else None


def first(*problems: str | None) -> str | None:
    return next((p for p in problems if p), None)


# --- torchrl ----------------------------------------------------------------------------------


def check_capturable_ppo_loss() -> str | None:
    from torchrl.objectives import ClipPPOLoss, PPOLoss

    return first(
        params(ClipPPOLoss._get_entropy, "self", "dist", "adv_shape"),
        contains(ClipPPOLoss.forward, "self._get_entropy("),
        contains(PPOLoss.__init__, "self.samples_mc_entropy"),
    )


def check_greedy_distributional_head() -> str | None:
    from torchrl.modules import DistributionalQValueModule, QValueModule

    from rlrun.compat.torchrl import GreedyDistributionalHead

    problem = first(
        params(DistributionalQValueModule._support_expected, "self", "log_softmax_values"),
        contains(QValueModule.__init__, '"one_hot": self._one_hot'),
    )
    if problem:
        return problem
    head = GreedyDistributionalHead(action_space="one_hot", support=torch.arange(3.0))
    if head.action_func_mapping.get("one_hot") != head._one_hot:
        return "action_func_mapping['one_hot'] is no longer what the head acts with"
    tied = torch.full((3, 2), 0.5).log()  # [atoms, actions]: both actions' returns equal
    action = head.action_func_mapping["one_hot"](tied)
    if action.sum().item() != 1:
        return f"tied actions gave the one-hot {action.tolist()}, not one action"
    return None


def check_sampled_policy_actions() -> str | None:
    from torchrl.objectives import CQLLoss

    return params(CQLLoss._get_policy_actions, "self", "data", "actor_params", "num_actions")


def check_ensemble_qvalues() -> str | None:
    from torchrl.objectives import CQLLoss

    return contains(CQLLoss, "self._vmap_qvalue_networkN0 = ")


def check_standardized_advantage() -> str | None:
    from torchrl.objectives import PPOLoss

    return first(
        params(PPOLoss._maybe_normalize_advantage, "self", "advantage", "tensordict"),
        contains(PPOLoss._maybe_normalize_advantage, "update_norm"),
    )


def check_log_ratio_bounds() -> str | None:
    from torchrl.objectives import ClipPPOLoss

    if not isinstance(ClipPPOLoss.__dict__.get("_clip_bounds"), property):
        return "ClipPPOLoss._clip_bounds is no longer a property"
    return contains(ClipPPOLoss.forward, "log_weight.clamp(*self._clip_bounds)")


def check_policy_entropy() -> str | None:
    from torchrl.objectives import PPOLoss

    return params(PPOLoss._get_entropy, "self", "dist", "adv_shape")


def check_loss_mask_keys() -> str | None:
    from torchrl.objectives import LossModule

    return params(LossModule._loss_mask_keys, "self")


def check_reduce_loss() -> str | None:
    from torchrl.objectives import LossModule

    return params(LossModule._reduce_loss, "self", "loss", "tensordict")


def check_num_threads_kept() -> str | None:
    import torchrl
    from torchrl.collectors import MultiCollector
    from torchrl.envs.batched_envs import BatchedEnvBase

    return first(
        missing(torchrl, "_THREAD_POOL_INIT"),
        contains(BatchedEnvBase.close, "torchrl._THREAD_POOL_INIT"),
        contains(MultiCollector._shutdown_main, "torchrl._THREAD_POOL_INIT"),
    )


def check_optim_count() -> str | None:
    from torchrl.trainers import Trainer

    return first(
        contains(Trainer.__new__, "cls._optim_count"),
        contains(Trainer._train_with_execution_backend, "self._optim_count += receipt"),
        contains(Trainer._get_state, "_optim_count=self._optim_count"),
    )


def check_last_save() -> str | None:
    from torchrl.trainers import Trainer

    return first(
        contains(Trainer._get_state, "_last_save=self._last_save"),
        contains(Trainer.load_state_dict, "_last_save"),
        contains(Trainer.save_trainer, "self._last_save"),
    )


def check_trainer_checkpoint() -> str | None:
    from torchrl.checkpoint import Checkpoint
    from torchrl.trainers import Trainer

    from rlrun.compat.torchrl import trainer_checkpoint

    problem = params(Trainer._sync_checkpoint_components, "self", "checkpoint")
    if problem:
        return problem
    trainer = Trainer.__new__(Trainer)  # not built: only the components are asked for
    vars(trainer).update(
        checkpoint=None,
        learner_backend="local",
        loss_module=torch.nn.Linear(1, 1),
        optimizer=None,
        _collector=None,
        replay_buffer=None,
        logger=None,
        _modules={},
        _checkpoint_skip_warnings=set(),
        _checkpoint_state=None,
    )
    found = trainer_checkpoint(trainer)
    if not isinstance(found, Checkpoint) or "loss_module" not in found:
        return f"gave {found!r}, not a Checkpoint holding the loss_module"
    return None


def check_progress_bar() -> str | None:
    from torchrl.trainers import Trainer

    return contains(Trainer.train, "self._pbar = tqdm(")


def check_stop_requested() -> str | None:
    from torchrl.trainers import Trainer

    return first(
        contains(Trainer.request_stop, "self._stop_training = True"),
        contains(Trainer.train, "if self._stop_training:"),
        contains(Trainer.optim_steps, "except StopIteration:"),  # how a hook ends the batch
    )


def check_run_post_loss_hooks() -> str | None:
    from torchrl.trainers import Trainer

    problem = params(Trainer._post_loss_hook, "self", "batch")
    if problem:
        return problem
    # the Trainer must not run them itself with a stepper (rlrun's would then run twice)
    text = source(Trainer.optim_steps)
    stepper = text.split("if self.optimization_stepper is not None:", 1)
    if len(stepper) != 2:
        return "Trainer.optim_steps no longer branches on optimization_stepper"
    if "_post_loss_hook" in stepper[1].split("else:", 1)[0]:
        return "the Trainer now runs post_loss hooks with an optimization_stepper itself"
    return None


def check_learner_backend() -> str | None:
    from torchrl.trainers import Trainer
    from torchrl.trainers._ray_execution import _RayTrainerExecution

    return first(
        contains(Trainer.__init__, "self._execution_backend = _RayTrainerExecution("),
        missing(_RayTrainerExecution, "step", "publish_weights", "get_weights"),
        params(_RayTrainerExecution.step, "self", "num_steps"),
        params(_RayTrainerExecution.publish_weights, "self"),
        contains(_RayTrainerExecution.__init__, "self.model_version = "),
        contains(Trainer._train_with_execution_backend, "backend.step(", "receipt.metrics"),
    )


def check_learner_actors() -> str | None:
    from torchrl.trainers._ray_execution import _RayTrainerExecution

    return first(
        contains(_RayTrainerExecution.__init__, "self._actors = []"),
        contains(_RayTrainerExecution.start, "self._actors.append("),
    )


def check_publish_with_module() -> str | None:
    from torchrl.trainers import Trainer

    return first(
        params(Trainer._compose_execution_weight_publication, "auxiliary_module"),
        params(Trainer._execution_weight_publication, "self"),
        contains(Trainer._publish_execution_weights, "self._execution_weight_publication()"),
    )


def check_learner_weight_receivers() -> str | None:
    from torchrl.collectors.distributed import RayCollector
    from torchrl.trainers import Trainer

    return first(
        contains(Trainer.__init__, 'getattr(collector, "_learner_weight_sync", None)'),
        params(RayCollector._learner_weight_sync, "self"),
        contains(RayCollector._learner_weight_sync, "new_generation"),
    )


def check_strided_trajectory_pool() -> str | None:
    from torchrl.collectors import Collector
    from torchrl.collectors.utils import _TrajectoryPool

    from rlrun.compat.torchrl import StridedTrajectoryPool

    problem = first(
        params(_TrajectoryPool.get_traj_and_increment, "self", "n", "device"),
        contains(Collector.__init__, 'kwargs.pop("traj_pool"'),
        contains(Collector._traj_pool.fget, "_traj_pool_val"),
    )
    if problem:
        return problem
    pool = StridedTrajectoryPool(3, 1)
    ids = [pool.get_traj_and_increment(2).tolist(), pool.get_traj_and_increment(1).tolist()]
    return None if ids == [[1, 4], [7]] else f"ids {ids}, not [[1, 4], [7]]"


def check_ray_weight_sync_timeout() -> str | None:
    from torchrl.weight_update import _ray

    if not isinstance(getattr(_ray, "_DIST_TIMEOUT", None), timedelta):
        return "torchrl.weight_update._ray has no timedelta _DIST_TIMEOUT"
    return contains(_ray, "timeout=_DIST_TIMEOUT")


def check_storage_contents() -> str | None:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorStorage

    from rlrun.compat.torchrl import storage_contents

    problem = contains(TensorStorage.__init__, "self._storage = storage")
    if problem:
        return problem
    storage = LazyTensorStorage(4)
    storage.set([0, 1], TensorDict({"x": torch.ones(2, 3)}, [2]))
    contents = storage_contents(storage)
    if not isinstance(contents, TensorDict) or tuple(contents.batch_size) != (4,):
        return f"gave {contents!r}, not the storage's TensorDict of all 4 rows"
    return None


def check_target_updater_tensors() -> str | None:
    from torchrl.objectives.utils import TargetNetUpdater

    return first(
        missing(TargetNetUpdater, "_sources", "_targets"),
        contains(TargetNetUpdater, 'self._targets.get(f"target_{key}")'),
    )


def check_prioritized_sampler_torch() -> str | None:
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from torchrl.data.replay_buffers import PrioritizedSampler
    from torchrl.data.replay_buffers.samplers import prioritized

    from rlrun.compat.torchrl import PrioritizedSamplerTorch

    problem = first(
        params(PrioritizedSampler._init, "self"),
        missing(prioritized, "SumSegmentTreeFp32"),
        contains(PrioritizedSampler.__init__, "self._device = ", "self._init()"),
        contains(prioritized, "self._max_capacity = max_capacity"),
        contains(PrioritizedSampler._init, "self._sum_tree = ", "self._min_tree = "),
        contains(PrioritizedSampler._init, "self._max_priority = "),
    )
    if problem:
        return problem
    sampler = PrioritizedSamplerTorch(max_capacity=8, alpha=0.6, beta=0.4)
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(8), sampler=sampler, batch_size=4)
    buffer.extend(TensorDict({"x": torch.arange(8.0)}, [8]))
    sample = buffer.sample()
    sample.set("td_error", torch.ones(4))
    buffer.update_tensordict_priority(sample)
    buffer.sample()
    return None


def check_hooked_memmap_storage(tmp_path: Path) -> str | None:
    from tensordict import TensorDict
    from torchrl.data import LazyMemmapStorage

    from rlrun.compat.torchrl import HookedMemmapStorage

    problem = first(
        params(LazyMemmapStorage._init_standard, "self", "data"),
        contains(LazyMemmapStorage._init, "self._init_standard(data)"),
    )
    if problem:
        return problem
    calls = []

    class Recording(HookedMemmapStorage):
        def before_files(self, data) -> None:
            calls.append(("before", sorted(Path(self.scratch_dir).rglob("*.memmap"))))

        def after_files(self) -> None:
            calls.append(("after", sorted(Path(self.scratch_dir).rglob("*.memmap"))))

    storage = Recording(4, scratch_dir=tmp_path / "rb")
    storage.set([0, 1], TensorDict({"x": torch.ones(2, 3)}, [2]))
    storage.set([2], TensorDict({"x": torch.ones(1, 3)}, [1]))
    if [(when, bool(files)) for when, files in calls] != [("before", False), ("after", True)]:
        return f"hooks called as {calls}, not once before and once after the files were made"
    return None


def check_envpool_gym_specs() -> str | None:
    from torchrl.envs.libs.envpool import MultiThreadedEnvWrapper

    return first(
        params(MultiThreadedEnvWrapper._get_action_spec, "self"),
        params(MultiThreadedEnvWrapper._get_observation_spec, "self"),
        contains(MultiThreadedEnvWrapper._get_action_spec, "self._env.spec.action_space"),
    )


def check_transform_env_step() -> str | None:
    from torchrl.envs import Transform

    return first(
        params(Transform._call, "self", "next_tensordict"),
        contains(Transform._step, "self._call(next_tensordict)"),
    )


# --- tensordict -------------------------------------------------------------------------------


def check_tensor_first_from_any() -> str | None:
    from tensordict import TensorDict, TensorDictBase

    from rlrun.compat.tensordict import ORIGINAL_FROM_ANY, tensor_first_from_any

    if TensorDictBase.from_any.__func__ is not tensor_first_from_any:
        return "TensorDictBase.from_any is not patched after importing rlrun.compat.tensordict"
    tensor = torch.zeros(2)
    if ORIGINAL_FROM_ANY(TensorDict, tensor) is not tensor:
        return "the original from_any no longer returns a tensor unchanged (the patch does)"
    if 'find_spec("pandas")' not in source(ORIGINAL_FROM_ANY):
        return "the original from_any no longer searches for pandas: the patch may be dropped"
    return None


# --- hydra ------------------------------------------------------------------------------------


def check_args_parser() -> str | None:
    from rlrun.compat.hydra import args_parser

    parsed = args_parser().parse_args(["-m", "--config-dir", "conf", "a=1", "b=2"])
    read = (
        "overrides multirun cfg info shell_completion hydra_help config_path config_name "
        "experimental_rerun config_dir"
    ).split()
    gone = [name for name in read if not hasattr(parsed, name)]
    if gone:
        return f"the parsed arguments have no {', '.join(gone)}"
    if parsed.overrides != ["a=1", "b=2"] or not parsed.multirun or parsed.config_dir != "conf":
        return f"parsed {vars(parsed)}"
    return None


def check_basic_sweeper() -> str | None:
    from hydra.plugins.sweeper import Sweeper

    from rlrun.compat.hydra import basic_sweeper_class

    BasicSweeper = basic_sweeper_class()
    if not issubclass(BasicSweeper, Sweeper):
        return "BasicSweeper is no longer a Sweeper"
    sweeper = type("Extended", (BasicSweeper,), {})(max_batch_size=None)  # as rlrun's extend it
    if sweeper.max_batch_size is not None:
        return "BasicSweeper(max_batch_size=None) keeps no max_batch_size"
    return first(
        params(BasicSweeper.__init__, "self", "max_batch_size", "params"),
        params(BasicSweeper.setup, "self", "hydra_context", "task_function", "config"),
        params(BasicSweeper.sweep, "self", "arguments"),
        contains(BasicSweeper.setup, "self.launcher = ", "self.hydra_context = "),
        contains(BasicSweeper.setup, "self.config = "),
        contains(BasicSweeper.sweep, "self.launcher.launch("),
        missing(BasicSweeper, "validate_batch_is_legal"),
    )


def check_known_mode() -> str | None:
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import _run_hydra

    if "hydra.get_mode(config_name=config_name, overrides=overrides)" not in source(_run_hydra):
        return "hydra.main no longer asks Hydra.get_mode for the run mode"
    return params(Hydra.get_mode, "self", "config_name", "overrides")


def check_task_name() -> str | None:
    from hydra._internal.utils import _run_hydra

    from rlrun.compat.hydra import task_name

    if task_name(check_task_name) != "test_compat":
        return f"a task function of tests/test_compat.py names its job {task_name(check_task_name)}"
    return contains(
        _run_hydra,
        "detect_calling_file_or_module_from_task_function(task_function)",
        "task_name = detect_task_name(calling_file, calling_module)",
    )


def check_known_config() -> str | None:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra._internal.hydra import Hydra

    called = "self config_name overrides run_mode from_shell validate_sweep_overrides".split()
    return first(
        params(ConfigLoaderImpl.load_configuration, *called),
        contains(Hydra.compose_config, "self.config_loader.load_configuration("),
        contains(Hydra.run, "self.compose_config(", "run_mode=RunMode.RUN"),
        params(ConfigLoaderImpl._apply_overrides_to_config, "overrides", "cfg"),
        contains(
            ConfigLoaderImpl._load_configuration_impl,
            "ConfigLoaderImpl._apply_overrides_to_config(config_overrides, cfg)",
            "cfg.hydra.overrides.hydra.append(override.input_line)",
        ),
    )


def check_hydra_basic_sweeper() -> str | None:
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeperConf

    from rlrun.compat.hydra import HYDRA_BASIC_SWEEPER

    if BasicSweeperConf._target_ != HYDRA_BASIC_SWEEPER:
        return f"Hydra's basic sweeper is {BasicSweeperConf._target_}, not {HYDRA_BASIC_SWEEPER}"
    return None


def check_basic_sweep_jobs() -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from rlrun.compat.hydra import basic_sweep_jobs

    jobs = basic_sweep_jobs(OverridesParser.create().parse_overrides(["a=1,2", "b=3"]))
    expected = [["a=1", "b=3"], ["a=2", "b=3"]]
    return None if jobs == expected else f"jobs {jobs}, expected {expected}"


def check_basic_launcher() -> str | None:
    from hydra.plugins.launcher import Launcher

    from rlrun.compat.hydra import basic_launcher_class

    BasicLauncher = basic_launcher_class()
    type("Extended", (BasicLauncher,), {})()  # as rlrun's extends it
    if not issubclass(BasicLauncher, Launcher):
        return "BasicLauncher is no longer a Launcher"
    return params(BasicLauncher.setup, "self", "hydra_context", "task_function", "config")


def check_job_outcome() -> str | None:
    from hydra.core.utils import JobReturn, JobStatus

    from rlrun.compat.hydra import job_outcome

    if "_return_value" not in {f.name for f in fields(JobReturn)}:
        return "JobReturn has no _return_value field"
    error = RuntimeError("boom")
    ret = JobReturn(status=JobStatus.FAILED)
    ret.return_value = error
    done = JobReturn(status=JobStatus.COMPLETED)
    done.return_value = 1.5
    if job_outcome(ret) is not error or job_outcome(done) != 1.5:
        return "job_outcome no longer gives the value return_value was set to"
    return None


def check_submitit_executor() -> str | None:
    plugin = pytest.importorskip("hydra_plugins.hydra_submitit_launcher.submitit_launcher")
    from rlrun.compat.hydra import submitit_executor

    kinds = (submitit_executor(plugin.LocalLauncher), submitit_executor(plugin.SlurmLauncher))
    if kinds != ("local", "slurm"):
        return f"the launchers' _EXECUTOR are {kinds}, not ('local', 'slurm')"
    return contains(plugin.BaseSubmititLauncher, "submitit.AutoExecutor(cluster=self._EXECUTOR")


def ray_launcher_util() -> ast.Module:
    """The plugin's ``_launcher_util`` as parsed source (importing it imports Ray)."""
    spec = importlib.util.find_spec("hydra_plugins.hydra_ray_launcher")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("hydra-ray-launcher is not installed")
    path = Path(next(iter(spec.submodule_search_locations)), "_launcher_util.py")
    return ast.parse(path.read_text())


def function_params(module: ast.Module, name: str) -> list[str] | None:
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return [a.arg for a in node.args.args]
    return None


def check_start_ray() -> str | None:
    found = function_params(ray_launcher_util(), "start_ray")
    return None if found == ["init_cfg"] else f"_launcher_util.start_ray takes {found}"


def check_run_ray_job() -> str | None:
    found = function_params(ray_launcher_util(), "_run_job")
    expected = ["hydra_context", "sweep_config", "task_function", "singleton_state"]
    return None if found == expected else f"_launcher_util._run_job takes {found}"


# --- the entries ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    module: str  # rlrun.compat.<library>
    names: tuple[str, ...]  # the module's public names this check covers
    member: str  # the private member(s) relied on
    checked: str  # the version the entry was checked against
    check: Callable[..., str | None]


T, TD, H = "rlrun.compat.torchrl", "rlrun.compat.tensordict", "rlrun.compat.hydra"
PY = "rlrun.compat.cpython"
CPYTHON = "CPython 3.11"


def check_exit_steps() -> str | None:
    import atexit
    import threading

    return first(missing(threading, "_shutdown"), missing(atexit, "_run_exitfuncs"))


def check_spawning() -> str | None:
    import multiprocessing.spawn

    return contains(
        multiprocessing.spawn._main,
        "process.current_process()._inheriting = True",
        "prepare(preparation_data)",
        "del process.current_process()._inheriting",
    )


ENTRIES = [
    Entry(
        PY,
        ("run_exit_steps",),
        "threading._shutdown, atexit._run_exitfuncs",
        CPYTHON,
        check_exit_steps,
    ),
    Entry(
        PY, ("spawning",), "multiprocessing.current_process()._inheriting", CPYTHON, check_spawning
    ),
    Entry(
        T, ("CapturablePPOLoss",), "ClipPPOLoss._get_entropy", TORCHRL, check_capturable_ppo_loss
    ),
    Entry(
        T,
        ("GreedyDistributionalHead",),
        "DistributionalQValueModule.action_func_mapping, _support_expected",
        TORCHRL,
        check_greedy_distributional_head,
    ),
    Entry(
        T,
        ("sampled_policy_actions",),
        "CQLLoss._get_policy_actions",
        TORCHRL,
        check_sampled_policy_actions,
    ),
    Entry(
        T, ("ensemble_qvalues",), "CQLLoss._vmap_qvalue_networkN0", TORCHRL, check_ensemble_qvalues
    ),
    Entry(
        T,
        ("standardized_advantage",),
        "PPOLoss._maybe_normalize_advantage",
        TORCHRL,
        check_standardized_advantage,
    ),
    Entry(T, ("log_ratio_bounds",), "ClipPPOLoss._clip_bounds", TORCHRL, check_log_ratio_bounds),
    Entry(T, ("policy_entropy",), "PPOLoss._get_entropy", TORCHRL, check_policy_entropy),
    Entry(T, ("reduce_loss",), "LossModule._reduce_loss", TORCHRL, check_reduce_loss),
    Entry(T, ("loss_mask_keys",), "LossModule._loss_mask_keys", TORCHRL, check_loss_mask_keys),
    Entry(
        T,
        ("set_num_threads_kept",),
        "torchrl._THREAD_POOL_INIT",
        TORCHRL,
        check_num_threads_kept,
    ),
    Entry(T, ("optim_count",), "Trainer._optim_count", TORCHRL, check_optim_count),
    Entry(T, ("last_save", "set_last_save"), "Trainer._last_save", TORCHRL, check_last_save),
    Entry(
        T,
        ("trainer_checkpoint",),
        "Trainer._sync_checkpoint_components",
        TORCHRL,
        check_trainer_checkpoint,
    ),
    Entry(T, ("progress_bar",), "Trainer._pbar", TORCHRL, check_progress_bar),
    Entry(T, ("stop_requested",), "Trainer._stop_training", TORCHRL, check_stop_requested),
    Entry(
        T, ("run_post_loss_hooks",), "Trainer._post_loss_hook", TORCHRL, check_run_post_loss_hooks
    ),
    Entry(
        T,
        ("learner_backend",),
        "Trainer._execution_backend (_RayTrainerExecution)",
        TORCHRL,
        check_learner_backend,
    ),
    Entry(T, ("learner_actors",), "_RayTrainerExecution._actors", TORCHRL, check_learner_actors),
    Entry(
        T,
        ("publish_with_module",),
        "Trainer._execution_weight_publication, _compose_execution_weight_publication",
        TORCHRL,
        check_publish_with_module,
    ),
    Entry(
        T,
        ("receive_no_learner_weights", "receives_no_learner_weights"),
        "collector._learner_weight_sync",
        TORCHRL,
        check_learner_weight_receivers,
    ),
    Entry(
        T,
        ("StridedTrajectoryPool",),
        "collectors.utils._TrajectoryPool, Collector(traj_pool=...)",
        TORCHRL,
        check_strided_trajectory_pool,
    ),
    Entry(
        T,
        ("set_ray_weight_sync_timeout",),
        "torchrl.weight_update._ray._DIST_TIMEOUT",
        TORCHRL,
        check_ray_weight_sync_timeout,
    ),
    Entry(T, ("storage_contents",), "TensorStorage._storage", TORCHRL, check_storage_contents),
    Entry(
        T,
        ("target_updater_tensors",),
        "TargetNetUpdater._sources, _targets",
        TORCHRL,
        check_target_updater_tensors,
    ),
    Entry(
        T,
        ("PrioritizedSamplerTorch",),
        "PrioritizedSampler._init, _sum_tree, _min_tree, _max_priority, _device, _max_capacity",
        TORCHRL,
        check_prioritized_sampler_torch,
    ),
    Entry(
        T,
        ("HookedMemmapStorage",),
        "LazyMemmapStorage._init_standard",
        TORCHRL,
        check_hooked_memmap_storage,
    ),
    Entry(
        T,
        ("envpool_gym_specs",),
        "MultiThreadedEnvWrapper._get_action_spec, _get_observation_spec",
        TORCHRL,
        check_envpool_gym_specs,
    ),
    Entry(T, ("transform_env_step",), "Transform._call", TORCHRL, check_transform_env_step),
    Entry(
        TD,
        ("tensor_first_from_any",),
        "TensorDictBase.from_any (patched)",
        TENSORDICT,
        check_tensor_first_from_any,
    ),
    Entry(H, ("args_parser",), "hydra._internal.utils.get_args_parser", HYDRA, check_args_parser),
    Entry(
        H,
        ("basic_sweeper_class",),
        "hydra._internal.core_plugins.basic_sweeper.BasicSweeper",
        HYDRA,
        check_basic_sweeper,
    ),
    Entry(
        H,
        ("HYDRA_BASIC_SWEEPER",),
        "hydra._internal.core_plugins.basic_sweeper.BasicSweeper (its path)",
        HYDRA,
        check_hydra_basic_sweeper,
    ),
    Entry(H, ("known_mode",), "Hydra.get_mode, as _run_hydra calls it", HYDRA, check_known_mode),
    Entry(H, ("task_name",), "hydra._internal.utils.detect_task_name", HYDRA, check_task_name),
    Entry(
        H,
        ("known_config",),
        "ConfigLoaderImpl.load_configuration, _apply_overrides_to_config",
        HYDRA,
        check_known_config,
    ),
    Entry(H, ("basic_sweep_jobs",), "BasicSweeper.split_arguments", HYDRA, check_basic_sweep_jobs),
    Entry(
        H,
        ("basic_launcher_class",),
        "hydra._internal.core_plugins.basic_launcher.BasicLauncher",
        HYDRA,
        check_basic_launcher,
    ),
    Entry(H, ("job_outcome",), "JobReturn._return_value", HYDRA, check_job_outcome),
    Entry(
        H,
        ("submitit_executor",),
        "the submitit launchers' _EXECUTOR",
        SUBMITIT_LAUNCHER,
        check_submitit_executor,
    ),
    Entry(H, ("start_ray",), "_launcher_util.start_ray", RAY_LAUNCHER, check_start_ray),
    Entry(H, ("run_ray_job",), "_launcher_util._run_job", RAY_LAUNCHER, check_run_ray_job),
]
# public names of the compat modules that are helpers of an entry, not entries
HELPERS = {"entropy_without_sync"}


@pytest.mark.parametrize(
    "entry", ENTRIES, ids=lambda e: f"{e.module.rsplit('.', 1)[1]}.{e.names[0]}"
)
def test_entry_still_fits(entry: Entry, tmp_path: Path) -> None:
    """What each compat entry relies on still exists, with the shape the entry expects."""
    kwargs = (
        {"tmp_path": tmp_path} if "tmp_path" in inspect.signature(entry.check).parameters else {}
    )
    try:
        problem = entry.check(**kwargs)
    except pytest.skip.Exception:
        raise
    except Exception as err:  # a missing attribute, a changed signature, ...
        problem = f"{type(err).__name__}: {err}"
    if problem:
        pytest.fail(
            f"{entry.module}.{' / '.join(entry.names)} relies on {entry.member}, checked against "
            f"{entry.checked}; the installed version differs: {problem}. Re-check the entry "
            "(its docstring says what it needs and why), then its version here and there.",
            pytrace=False,
        )


def compat_entries(module_name: str) -> dict[str, Any]:
    """The public functions and classes a compat module defines (what it imports excluded)."""
    module = importlib.import_module(module_name)
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == module_name
    }


@pytest.mark.parametrize("module_name", [T, TD, H, PY])
def test_every_entry_is_checked_and_documented(module_name: str) -> None:
    """Each public function or class of a compat module is covered by a check above, and its
    docstring names the private member it relies on and the version it was checked against."""
    checked = {name for e in ENTRIES if e.module == module_name for name in e.names}
    versions = {e.checked for e in ENTRIES if e.module == module_name}
    problems = []
    for name, obj in compat_entries(module_name).items():
        if name in HELPERS:
            continue
        if name not in checked:
            problems.append(f"{name}: no check in tests/test_compat.py ENTRIES")
        doc = inspect.getdoc(obj) or ""
        if not any(version in doc for version in versions):
            problems.append(f"{name}: its docstring names none of {sorted(versions)}")
        if "Private" not in doc and "Patched" not in doc:
            problems.append(f"{name}: its docstring does not say what is private (Private: ...)")
    stale = checked - set(compat_entries(module_name)) - {"HYDRA_BASIC_SWEEPER"}
    problems += [f"{name}: checked here but gone from {module_name}" for name in sorted(stale)]
    assert not problems, f"{module_name}:\n" + "\n".join(problems)


def test_rlrun_sweepers_instantiate_after_hydras_plugin_scan() -> None:
    """rlrun's sweepers and basic launcher, built on the compat entries, instantiate from Hydra's
    plugin registry with ``rlrun.compat.hydra`` imported before the scan (the console script's
    order): the scan runs Hydra's own plugin modules again, making their classes anew."""
    from hydra.core.plugins import Plugins

    import rlrun.compat.hydra  # noqa: F401  (before the scan, as rlrun/cli.py does)

    registry = Plugins.instance().class_name_to_class
    for name, kwargs in [
        ("hydra_plugins.rlrun_sweepers.basic_sweeper.BasicSweeper", {"max_batch_size": None}),
        ("hydra_plugins.rlrun_sweepers.resume_sweeper.ResumeSweeper", {}),
        ("hydra_plugins.rlrun_sweepers.basic_launcher.BasicLauncher", {}),
    ]:
        registry[name](**kwargs)


@pytest.mark.parametrize(
    ("module_name", "distribution"),
    [
        (T, "torchrl"),
        (TD, "tensordict"),
        (H, "hydra-core"),
    ],
)
def test_checked_versions_are_installed(module_name: str, distribution: str) -> None:
    """A compat module's entries were checked against the installed version of its library:
    after an upgrade, re-check them (the tests above), then update the version they name."""
    checked = importlib.import_module(module_name).CHECKED
    installed = f"{distribution} {importlib.metadata.version(distribution)}"
    assert checked == installed, (
        f"{module_name} was checked against {checked}, but {installed} is installed: re-check "
        f"its entries against {installed} and update CHECKED and the entries' docstrings."
    )


# --- nothing else touches a private member ----------------------------------------------------

LIBRARIES = ("torchrl", "tensordict", "hydra")
PLUGINS = ("hydra_ray_launcher", "hydra_joblib_launcher", "hydra_submitit_launcher")
# what TorchRL documents for subclasses to define or use: public contract, not private members
EXTENSION_POINTS = {
    "_reset": "EnvBase / Transform: reset (abstract method of EnvBase)",
    "_step": "EnvBase / Transform: step (abstract method of EnvBase)",
    "_set_seed": "EnvBase: seeding (abstract method)",
    "_build_env": "_EnvWrapper: build the wrapped env (abstract method)",
    "_make_specs": "_EnvWrapper: the specs (abstract method)",
    "_check_kwargs": "_EnvWrapper: check the constructor's keywords (abstract method)",
    "_init_env": "_EnvWrapper: ready the env (abstract method)",
    "_env": "_EnvWrapper: the wrapped env, as its docstring shows",
    "_call": "Transform: what it does to an env step (its docstring: rewrite _call)",
    "_inv_call": "Transform: the inverse of _call (its docstring)",
    "_apply_transform": "Transform: what it does to one entry (its docstring)",
    "_inv_apply_transform": "Transform: the inverse of _apply_transform (its docstring)",
    "_create_experiment": "Logger: make the backend's experiment (abstract method)",
}


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def library_module(dotted: str) -> bool:
    root, _, rest = dotted.partition(".")
    if root == "hydra_plugins":
        return rest.split(".", 1)[0] in PLUGINS
    return root in LIBRARIES


def site_packages() -> Path:
    return Path(importlib.util.find_spec("torchrl").origin).parents[1]


DEFINED = re.compile(
    r"(?:def|class)\s+(_\w+)"  # def _name / class _Name
    r"|self\.(_\w+)\s*(?::[^=\n]*)?=(?!=)"  # self._name = (annotated too)
    r"|^[ \t]*(_\w+)\s*(?::[^=\n]*)?=(?!=)",  # _name = (module or class level)
    re.M,
)


def defined_names(files: Iterator[Path]) -> set[str]:
    names = set()
    for path in files:
        for found in DEFINED.finditer(path.read_text(errors="replace")):
            name = next(group for group in found.groups() if group)
            if is_private(name):
                names.add(name)
    return names


@cache
def library_private_names() -> frozenset[str]:
    """Every ``_name`` the installed libraries define (a method, an attribute they set, a module
    or class constant), read from their source once."""
    roots = [site_packages() / lib for lib in LIBRARIES]
    roots += [site_packages() / "hydra_plugins" / plugin for plugin in PLUGINS]
    return frozenset(defined_names(p for root in roots for p in root.rglob("*.py")))


def own_files() -> list[Path]:
    files = sorted((ROOT / "rlrun").rglob("*.py")) + sorted(
        (ROOT / "hydra_plugins" / "rlrun_sweepers").rglob("*.py")
    )
    return [f for f in files if "compat" not in f.relative_to(ROOT).parts[:2]]


@cache
def torch_private_names() -> frozenset[str]:
    """torch's own private names on the bases rlrun extends (``nn.Module._apply``, ...): torch's
    business, not the compat layer's."""
    bases = (torch.nn.Module, torch.Tensor, torch.distributions.Distribution, torch.optim.Optimizer)
    return frozenset(name for base in bases for name in dir(base) if is_private(name))


def resolve(module: ast.Module, expr: ast.expr) -> str | None:
    """The dotted path ``expr`` (a base class) names through ``module``'s imports."""
    parts = []
    while isinstance(expr, ast.Attribute):
        parts.insert(0, expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    for node in module.body:
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if (alias.asname or alias.name) == expr.id:
                    return ".".join([node.module, alias.name, *parts])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) == expr.id:
                    return ".".join([alias.name if alias.asname else expr.id, *parts])
        elif isinstance(node, ast.ClassDef) and node.name == expr.id and not parts:
            return None  # a class of the same module: followed by the caller
    return None


def load(dotted: str) -> Any:
    module, _, attr = dotted.rpartition(".")
    while module:
        try:
            obj = importlib.import_module(module)
            break
        except ImportError:
            module, _, head = module.rpartition(".")
            attr = f"{head}.{attr}"
    else:
        return None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    return obj


def class_private_names(cls: type) -> set[str]:
    """The private names the library classes of ``cls``'s MRO define (methods, class attributes,
    attributes their methods set), torch's own left out."""
    names = set()
    for klass in inspect.getmro(cls):
        if not library_module(klass.__module__):
            continue
        names |= {name for name in vars(klass) if is_private(name)}
        try:
            text = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names |= {m for m in re.findall(r"self\.(_\w+)\s*(?::[^=\n]*)?=(?!=)", text)}
    return {name for name in names if is_private(name)} - torch_private_names()


def library_bases(files: list[Path], trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """For each rlrun class name, the private names its library bases define (through rlrun
    classes too); classes without a library base are left out."""
    classes: dict[str, tuple[ast.Module, ast.ClassDef]] = {}
    for path in files:
        for node in ast.walk(trees[path]):
            if isinstance(node, ast.ClassDef):
                classes.setdefault(node.name, (trees[path], node))

    @cache
    def names_of(class_name: str) -> frozenset[str]:
        module, node = classes[class_name]
        found: set[str] = set()
        for base in node.bases:
            dotted = resolve(module, base)
            if dotted is None:
                if isinstance(base, ast.Name) and base.id in classes and base.id != class_name:
                    found |= names_of(base.id)
                continue
            if dotted.startswith("rlrun.") or dotted.startswith("hydra_plugins.rlrun_sweepers."):
                name = dotted.rsplit(".", 1)[1]
                if name in classes and name != class_name:
                    found |= names_of(name)
            elif library_module(dotted) and inspect.isclass(obj := load(dotted)):
                found |= class_private_names(obj)
        return frozenset(found)

    return {name: set(names_of(name)) for name in classes}


def private_imports(tree: ast.Module) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if not library_module(node.module):
                continue
            if any(is_private(part) for part in node.module.split(".")):
                yield node.lineno, f"from {node.module} import ..."
            for alias in node.names:
                if is_private(alias.name):
                    yield node.lineno, f"from {node.module} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if library_module(alias.name) and any(is_private(p) for p in parts):
                    yield node.lineno, f"import {alias.name}"


def rooted_at_torch(expr: ast.expr) -> bool:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return isinstance(expr, ast.Name) and expr.id == "torch"


def is_self(expr: ast.expr) -> bool:
    if isinstance(expr, ast.Name):
        return expr.id in ("self", "cls")
    return (
        isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "super"
    )


def offenders(files: list[Path], root: Path) -> list[str]:
    """``file:line: what`` for each use of a private member of the libraries in ``files``."""
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    library = library_private_names()
    own = defined_names(iter(files)) - library_private_names_shadowed(files, trees)
    bases = library_bases(files, trees)
    torch_names = torch_private_names()
    found = []

    def report(path: Path, line: int, what: str) -> None:
        found.append(f"{path.relative_to(root)}:{line}: {what}")

    for path, tree in trees.items():
        for line, what in private_imports(tree):
            report(path, line, what)
        for cls, node in walk_with_class(tree):
            inherited = bases.get(cls.name, set()) if cls is not None else set()
            if isinstance(node, ast.Attribute) and is_private(node.attr):
                name = node.attr
                if name in torch_names or rooted_at_torch(node.value):
                    continue
                if name in inherited and is_self(node.value) and name not in EXTENSION_POINTS:
                    report(path, node.lineno, f"{ast.unparse(node)} (a base's {name})")
                elif name in library and name not in own and name not in EXTENSION_POINTS:
                    report(path, node.lineno, ast.unparse(node))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id not in ("getattr", "hasattr", "setattr", "delattr"):
                    continue
                if len(node.args) < 2 or not isinstance(node.args[1], ast.Constant):
                    continue
                name = node.args[1].value
                if isinstance(name, str) and is_private(name) and name in library:
                    if name not in own or (is_self(node.args[0]) and name in inherited):
                        report(path, node.lineno, f"{node.func.id}(..., {name!r})")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and cls is not None:
                if node.name in inherited and node.name not in EXTENSION_POINTS:
                    report(path, node.lineno, f"def {node.name} (overrides a base's private)")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1])))


def library_private_names_shadowed(files: list[Path], trees: dict[Path, ast.Module]) -> set[str]:
    """Private names rlrun defines only as overrides in classes with library bases: those are
    the libraries' names, not rlrun's own."""
    bases = library_bases(files, trees)
    overridden, elsewhere = set(), set()
    for tree in trees.values():
        for cls, node in walk_with_class(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and is_private(node.name):
                inherited = bases.get(cls.name, set()) if cls is not None else set()
                (overridden if node.name in inherited else elsewhere).add(node.name)
    return overridden - elsewhere


def walk_with_class(tree: ast.Module) -> Iterator[tuple[ast.ClassDef | None, ast.AST]]:
    """Every node of ``tree`` with the innermost class it is in (None at module level)."""

    def visit(node: ast.AST, cls: ast.ClassDef | None) -> Iterator:
        for child in ast.iter_child_nodes(node):
            yield cls, child
            yield from visit(child, child if isinstance(child, ast.ClassDef) else cls)

    yield from visit(tree, None)


def test_no_private_members_outside_compat() -> None:
    """Nothing in rlrun (outside rlrun/compat/) or in hydra_plugins/rlrun_sweepers imports a
    private module or name of TorchRL, tensordict, Hydra or a Hydra plugin, reads or sets a
    private attribute they define, or overrides a private method of theirs; the documented
    extension points of envs and transforms excepted (EXTENSION_POINTS)."""
    found = offenders(own_files(), ROOT)
    assert not found, (
        "private members of TorchRL / tensordict / Hydra used outside rlrun/compat/ (move each "
        "behind an entry of rlrun/compat/<library>.py, or use a public API):\n  "
        + "\n  ".join(found)
    )


if __name__ == "__main__":  # python tests/test_compat.py [ROOT]: list the offenders of a tree
    tree = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    files = sorted((tree / "rlrun").rglob("*.py")) + sorted(
        (tree / "hydra_plugins" / "rlrun_sweepers").rglob("*.py")
    )
    files = [f for f in files if "compat" not in f.relative_to(tree).parts[:2]]
    print("\n".join(offenders(files, tree)) or "none")
