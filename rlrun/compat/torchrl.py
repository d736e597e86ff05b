"""Every private member of TorchRL that rlrun relies on, in one place.

Each entry names the TorchRL version it was checked against and why the public API does not
serve; ``tests/test_compat.py`` fails with a message naming the entry when an upgrade changes
what it relies on. Nothing else in rlrun touches a ``_private`` name of TorchRL.
"""

from __future__ import annotations

import functools
from datetime import timedelta
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn
from torch.distributions import Distribution
from torchrl.checkpoint import Checkpoint
from torchrl.collectors import BaseCollector
from torchrl.collectors.utils import _TrajectoryPool
from torchrl.data import LazyMemmapStorage, TensorSpec
from torchrl.data.replay_buffers import PrioritizedSampler
from torchrl.data.replay_buffers.samplers import prioritized as _prioritized
from torchrl.envs import MultiThreadedEnv, Transform
from torchrl.modules import DistributionalQValueModule
from torchrl.objectives import ClipPPOLoss, LossModule
from torchrl.objectives.ppo import CompositeDistribution, has_analytic_entropy, sample_and_log_prob
from torchrl.trainers import Trainer

CHECKED = "torchrl 0.14.1"


class CapturablePPOLoss(ClipPPOLoss):
    """``ClipPPOLoss`` whose entropy term can be captured in a CUDA graph without compile.

    TorchRL falls back to a sampled entropy where the analytic one is not finite, and decides so
    with ``if not entropy.isfinite().all()``: a host sync, which CUDA graph capture refuses
    ("operation not permitted when stream is capturing"; Categorical, i.e. CartPole, has an
    analytic entropy). Under compile TorchRL already picks per element with ``torch.where``;
    while capturing eagerly, this does the same. Private: ``ClipPPOLoss._get_entropy``
    (torchrl 0.14.1), the only place the entropy is computed; no option turns the check off.
    """

    def _get_entropy(self, dist: Distribution, adv_shape: torch.Size) -> torch.Tensor:
        if (
            # compiled: TorchRL's own picks per element; asked first, so that dynamo never
            # traces ``_capturing()``, whose answer changes at capture and recompiled the step
            # there, which capture refuses (``algo.compile=true algo.cudagraphs=true``, H200)
            torch.compiler.is_compiling()
            or not _capturing()
            or isinstance(dist, CompositeDistribution)
            or not has_analytic_entropy(dist)
        ):
            return super()._get_entropy(dist, adv_shape)
        return entropy_without_sync(dist, self.samples_mc_entropy).unsqueeze(-1)


def _capturing() -> bool:
    """Whether a CUDA graph is being captured on the current stream (never on a CPU build)."""
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def entropy_without_sync(dist: Distribution, samples: int) -> torch.Tensor:
    """The analytic entropy where it is finite, else a ``samples``-sample estimate: per
    element, with no host sync."""
    entropy = dist.entropy()
    _, log_prob = sample_and_log_prob(dist, (samples,), reparameterize=dist.has_rsample)
    return torch.where(entropy.isfinite(), entropy, -log_prob.mean(0))


class GreedyDistributionalHead(DistributionalQValueModule):
    """TorchRL's greedy head of a distributional Q-network, with ties broken (first maximal
    action, as ``argmax``). TorchRL's one-hot marks every action whose expected return equals
    the maximum, and C51's saturated atoms tie exactly: at 86k frames of +experiment=c51 one
    action came out with two ones, the env took it, and the loss then failed on that sample
    ("shape '[128, 101]' is invalid for input of size 13029"). Private (torchrl 0.14.1):
    ``action_func_mapping``, bound at init, and ``_support_expected``, the expected return the
    head compares; the greedy rule has no option."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.action_func_mapping["one_hot"] = self._one_hot  # bound at init: point it here

    def _one_hot(self, value: torch.Tensor, support: torch.Tensor | None = None) -> torch.Tensor:
        expected = self._support_expected(value, self.support if support is None else support)
        return nn.functional.one_hot(expected.argmax(-1), expected.shape[-1])


def sampled_policy_actions(
    loss: LossModule, tensordict: TensorDictBase, params: Any, n: int
) -> tuple[TensorDictBase, torch.Tensor]:
    """``n`` actions per state drawn from the actor of TorchRL's ``CQLLoss`` ``loss`` with
    ``params``, and their log-probabilities. Private (torchrl 0.14.1): ``_get_policy_actions``,
    which repeats the states and samples under the loss's functional parameters, as its own
    conservative term does."""
    return loss._get_policy_actions(tensordict, params, n)


def ensemble_qvalues(loss: LossModule, tensordict: TensorDictBase, params: Any) -> TensorDictBase:
    """Every Q network of ``loss`` (TorchRL's ``CQLLoss``) on ``tensordict``, stacked along a
    first dim. Private (torchrl 0.14.1): ``_vmap_qvalue_networkN0``, the loss's own vmapped
    ensemble over its functional parameters."""
    return loss._vmap_qvalue_networkN0(tensordict, params)


def standardized_advantage(
    loss: ClipPPOLoss, advantage: torch.Tensor, tensordict: TensorDictBase
) -> torch.Tensor:
    """``advantage`` as ``loss`` weighs its objective with it: standardised where
    ``normalize_advantage`` asks (over the batch's valid steps where it marks them), scaled by
    its ``advantage_norm`` where it has one. Private (torchrl 0.14.1):
    ``PPOLoss._maybe_normalize_advantage``, the only place it is done."""
    return loss._maybe_normalize_advantage(advantage, tensordict, update_norm=False)


def log_ratio_bounds(loss: ClipPPOLoss) -> tuple[torch.Tensor, torch.Tensor]:
    """The bounds ``loss`` clamps the log importance ratio to (from its ``clip_epsilon``, or
    its low and high ones). Private (torchrl 0.14.1): ``ClipPPOLoss._clip_bounds``."""
    return loss._clip_bounds


def policy_entropy(loss: ClipPPOLoss, dist: Distribution, adv_shape: torch.Size) -> torch.Tensor:
    """The entropy ``loss`` rewards, per sample (analytic, or sampled where that is not
    finite). Private (torchrl 0.14.1): ``PPOLoss._get_entropy`` (:class:`CapturablePPOLoss`'s
    where ``loss`` is one)."""
    return loss._get_entropy(dist, adv_shape)


def reduce_loss(loss: LossModule, value: torch.Tensor, tensordict: TensorDictBase) -> torch.Tensor:
    """``value`` reduced as ``loss`` reduces its terms (its ``reduction``: mean, sum or none).
    Private (torchrl 0.14.1): ``LossModule._reduce_loss``."""
    return loss._reduce_loss(value, tensordict=tensordict)


# --- threads ----------------------------------------------------------------------------------


def set_num_threads_kept(threads: int) -> None:
    """``torch.set_num_threads(threads)`` for the rest of the process. When a batched env
    (``SerialEnv``, ``ParallelEnv``: PettingZoo's envs, ``env.parallel=true``) or a multi-process
    collector closes, TorchRL sets the count to ``min(count at its import, count + workers)``:
    a collector closes its env once it has collected the last batch, so a run trained its last
    batch, evaluated and saved with 2 threads on 2 cores where ``trainer.num_threads`` says 1.
    Setting what TorchRL returns to keeps the count. Private (torchrl 0.14.1):
    ``torchrl._THREAD_POOL_INIT``, read by ``BatchedEnvBase.close`` and the multi-process
    collectors' shutdown; no option turns that step off."""
    import torchrl

    torch.set_num_threads(threads)
    torchrl._THREAD_POOL_INIT = threads


# --- the Trainer ------------------------------------------------------------------------------


def optim_count(trainer: Trainer) -> int:
    """The optimisation steps ``trainer`` has counted, restored from a checkpoint on resume.
    Private (torchrl 0.14.1): ``Trainer._optim_count``; TorchRL hands the count to
    ``post_optim_complete_log`` hooks only, a stage that does not run with Ray learners."""
    return trainer._optim_count


def last_save(trainer: Trainer) -> int:
    """The frame count at the Trainer's last checkpoint, part of its saved state (so a resumed
    run knows it too). Private (torchrl 0.14.1): ``Trainer._last_save``; no accessor."""
    return trainer._last_save


def set_last_save(trainer: Trainer, frames: int) -> None:
    """Record a checkpoint taken outside the Trainer (``checkpoint.backend=torchsnapshot``) at
    ``frames`` in the Trainer's own saved state. Private (torchrl 0.14.1): ``Trainer._last_save``;
    no setter."""
    trainer._last_save = frames


def trainer_checkpoint(trainer: Trainer) -> Checkpoint:
    """``trainer.checkpoint``, or, for a Trainer built without one, the ``Checkpoint`` it would
    fill: every component it saves, by name. Private (torchrl 0.14.1):
    ``Trainer._sync_checkpoint_components``, the only code that knows which components a
    Trainer saves and under which names."""
    return trainer.checkpoint or trainer._sync_checkpoint_components(Checkpoint())


def progress_bar(trainer: Trainer) -> Any:
    """The Trainer's tqdm progress bar (after ``setup``, with ``progress_bar=True``). Private
    (torchrl 0.14.1): ``Trainer._pbar``, which ``train`` opens at 0 with no option for where it
    starts."""
    return trainer._pbar


def stop_requested(trainer: Trainer) -> bool:
    """Whether the Trainer was asked to stop (``request_stop``: a signal, an early-stopping
    hook): rlrun's hooks then end the batch's optimisation and skip its evaluation, so that the
    run stops within seconds, not after the batch. Private (torchrl 0.14.1):
    ``Trainer._stop_training``, which ``request_stop`` sets and ``train`` reads at the batch's
    end; there is no public getter."""
    return bool(trainer._stop_training)


def run_post_loss_hooks(trainer: Trainer, batch: TensorDictBase) -> TensorDictBase:
    """Run the Trainer's ``post_loss`` hooks (replay priorities, users' hooks) on ``batch``.
    Private (torchrl 0.14.1): ``Trainer._post_loss_hook``; with an ``optimization_stepper`` the
    Trainer runs only ``post_optim`` hooks, which get no batch, so the stepper runs these."""
    return trainer._post_loss_hook(batch)


def learner_backend(trainer: Trainer) -> Any:
    """The execution of ``trainer``'s Ray learners (``learner_backend="ray"``): its ``step``
    (returning the ``metrics`` and ``optim_steps`` of a round), ``publish_weights``,
    ``get_weights``, ``model_version``; None without Ray learners. Private (torchrl 0.14.1):
    ``Trainer._execution_backend``, a ``torchrl.trainers._ray_execution._RayTrainerExecution``;
    the Trainer exposes neither its learners' metrics nor their weights."""
    return trainer._execution_backend


def learner_actors(trainer: Trainer) -> list:
    """The Ray actors of ``trainer``'s learners: empty without Ray learners, before they start
    and after they shut down. Private (torchrl 0.14.1): ``_RayTrainerExecution._actors``; no
    accessor."""
    return list(getattr(trainer._execution_backend, "_actors", None) or [])


def publish_with_module(trainer: Trainer, module: nn.Module) -> None:
    """Have ``trainer``'s Ray learners send the collector workers their policy composed with the
    driver's ``module`` (weights of ``Sequential(policy, module)``), as TorchRL's DQN and TD3
    trainers do for their exploration modules. Private (torchrl 0.14.1):
    ``Trainer._execution_weight_publication``, which those trainers override, and
    ``Trainer._compose_execution_weight_publication``, which they call; no option does it."""
    trainer._execution_weight_publication = functools.partial(
        trainer._compose_execution_weight_publication, module
    )


def _no_learner_receivers(new_generation: bool = False) -> None:
    return None


def receive_no_learner_weights(collector: BaseCollector) -> None:
    """Let a collector without weight receivers (any but ``RayCollector``) feed Ray learners:
    they then send it nothing. Private (torchrl 0.14.1): ``_learner_weight_sync``, which the
    Trainer asks the collector for with ``learner_backend="ray"`` and refuses a collector
    without; only ``RayCollector`` has it."""
    if not hasattr(collector, "_learner_weight_sync"):
        collector._learner_weight_sync = _no_learner_receivers


def receives_no_learner_weights(collector: BaseCollector) -> bool:
    """Whether :func:`receive_no_learner_weights` gave ``collector`` its (empty) receivers.
    Private (torchrl 0.14.1): ``_learner_weight_sync`` (see there)."""
    return getattr(collector, "_learner_weight_sync", None) is _no_learner_receivers


# --- collectors and weight sync ---------------------------------------------------------------


class StridedTrajectoryPool(_TrajectoryPool):
    """Trajectory ids ``offset, offset + stride, offset + 2 * stride, ...``: given to collector
    ``offset`` of ``stride`` as ``Collector(..., traj_pool=...)``, the collectors' ids never
    meet. Private (torchrl 0.14.1): ``torchrl.collectors.utils._TrajectoryPool`` and the
    undocumented ``traj_pool`` keyword, with which TorchRL's multi-process collectors share one
    pool among their workers; a collector has no option for its ids' start or step. (Setting
    ``_traj_pool_val`` before ``Collector.__init__``, as rlrun did, is overwritten there.)"""

    def __init__(self, stride: int, offset: int) -> None:
        super().__init__()
        self.stride, self.offset = stride, offset

    def get_traj_and_increment(self, n: int = 1, device=None) -> torch.Tensor:
        return super().get_traj_and_increment(n, device) * self.stride + self.offset


def set_ray_weight_sync_timeout(seconds: float) -> None:
    """How long TorchRL's Ray weight sync waits for the workers to join its gloo group. Private
    (torchrl 0.14.1): ``torchrl.weight_update._ray._DIST_TIMEOUT``, read when the group is made;
    the scheme takes no timeout."""
    from torchrl.weight_update import _ray

    _ray._DIST_TIMEOUT = timedelta(seconds=seconds)


# --- replay buffers ---------------------------------------------------------------------------


def storage_contents(storage: Any) -> Any:
    """All ``max_size`` rows of a tensor storage (written or not) as the one TensorDict it keeps,
    or None for a storage that keeps none (not a tensor storage, not written yet). Private
    (torchrl 0.14.1): ``TensorStorage._storage``; the public ``get`` slices to the rows written,
    a Python count that a captured or compiled step cannot read from memory."""
    return getattr(storage, "_storage", None)


def target_updater_tensors(updater: Any) -> tuple[TensorDictBase, TensorDictBase]:
    """``(sources, targets)``: the parameters a TorchRL target-network updater (``SoftUpdate``,
    ``HardUpdate``) copies from, and those it copies to (keys ``target_<name>``). Private
    (torchrl 0.14.1): ``TargetNetUpdater._sources`` and ``_targets``; no accessor."""
    return updater._sources, updater._targets


class _FlatTree:
    """Pure-torch stand-in for TorchRL's C++ sum/min segment trees, with the same interface.
    Queries are O(capacity) tensor ops, fast enough for buffers of a few 100k transitions."""

    def __init__(self, capacity: int, op: str, dtype: torch.dtype, device=None) -> None:
        self.op = op
        fill = 0.0 if op == "sum" else float("inf")
        self.values = torch.full((capacity,), fill, dtype=dtype, device=device)

    def __getitem__(self, index) -> torch.Tensor:
        return self.values[torch.as_tensor(index, device=self.values.device)]

    def __setitem__(self, index, value) -> None:
        index = torch.as_tensor(index, dtype=torch.long, device=self.values.device)
        self.values[index] = torch.as_tensor(value, dtype=self.values.dtype).to(self.values)

    def query(self, start, end) -> torch.Tensor:
        values = self.values[int(start) : int(end)]
        return values.sum() if self.op == "sum" else values.min()

    def scan_lower_bound(self, mass) -> torch.Tensor:
        """Smallest index whose inclusive prefix sum reaches ``mass``."""
        mass = torch.as_tensor(mass, dtype=self.values.dtype, device=self.values.device)
        return torch.searchsorted(self.values.cumsum(0), mass)


class PrioritizedSamplerTorch(PrioritizedSampler):
    """TorchRL's ``PrioritizedSampler`` (priority updates, IS weights, checkpoints), on
    :class:`_FlatTree` when TorchRL's C++ segment trees are unavailable: TorchRL 0.14.1's C++
    extension does not load against torch 2.13 (undefined symbol), which leaves the sampler
    without trees. Private (torchrl 0.14.1): ``PrioritizedSampler._init``, which makes the trees
    (``_sum_tree``, ``_min_tree``, ``_max_priority``) from ``_device`` and ``_max_capacity``; the
    trees are not an option."""

    def _init(self) -> None:
        if _prioritized.SumSegmentTreeFp32 is not None:
            return super()._init()
        device = self._device
        self._sum_tree = _FlatTree(self._max_capacity, "sum", self.dtype, device)
        self._min_tree = _FlatTree(self._max_capacity, "min", self.dtype, device)
        self._max_priority = None


class HookedMemmapStorage(LazyMemmapStorage):
    """TorchRL's ``LazyMemmapStorage`` with two methods for subclasses around the creation of its
    files (at the first write): ``before_files(data)`` and ``after_files()``. Private
    (torchrl 0.14.1): ``LazyMemmapStorage._init_standard``, which creates them; the public
    ``extend`` creates them lazily inside, with no hook."""

    def before_files(self, data: TensorDictBase | torch.Tensor) -> None:
        """Called with the first data written, before the files are made."""

    def after_files(self) -> None:
        """Called once the files are made."""

    def _init_standard(self, data: TensorDictBase | torch.Tensor) -> None:
        self.before_files(data)
        super()._init_standard(data)
        self.after_files()


# --- envs and transforms ----------------------------------------------------------------------


def envpool_gym_specs(env: MultiThreadedEnv) -> tuple[TensorSpec, TensorSpec]:
    """``(action_spec, observation_spec)`` of a ``MultiThreadedEnv``, converted from envpool's
    gym spaces (under the gym backend set by the caller) with the batch dim added. Private
    (torchrl 0.14.1): ``MultiThreadedEnvWrapper._get_action_spec`` and ``_get_observation_spec``
    (on the private ``torchrl.envs.libs.gym._gym_to_torchrl_spec_transform``); the public
    specs are only those the wrapper already set, from the legacy gym backend."""
    return env._get_action_spec(), env._get_observation_spec()


def transform_env_step(transform: Transform, tensordict: TensorDictBase) -> TensorDictBase:
    """What ``transform`` does to an env step's output (as a ``TransformedEnv`` applies it), on
    ``tensordict``. Private (torchrl 0.14.1): ``Transform._call``, the env path, which
    ``Transform._step`` calls; the public ``forward`` is the replay-buffer path, which a user's
    transform may leave out or make different."""
    return transform._call(tensordict)


# --- losses -----------------------------------------------------------------------------------


def loss_mask_keys(loss: LossModule) -> tuple:
    """The batch entries ``loss`` masks its terms with where present (``("collector",
    "mask")``, ``"shifted_valid"``, or the key a user set). Private (torchrl 0.14.1):
    ``LossModule._loss_mask_keys``, which resolves ``"auto"``; no accessor."""
    return loss._loss_mask_keys()
