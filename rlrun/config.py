"""Structured configs: the schema every YAML file under ``conf/`` is checked against.

The schema holds types, choices and ranges; the values and their comments live in the YAML files
only (``conf/<group>/_base.yaml`` for a group's defaults, one file per option for what it changes).
Hydra merges each YAML group option into the dataclass registered for it, so a misspelt key, a
value of the wrong type or a choice that does not exist fails at compose time, before anything
heavy is imported; ranges and cross-group rules are checked next, by ``rlrun/validation.py``.
The schemas are stored under ``rlrun_*`` names so they cannot collide with TorchRL's own
ConfigStore entries (``logger/csv``, ``collector/sync``, ...).

Groups whose options differ in shape (``policy``, ``algo``) are typed per option: each YAML file
starts with ``defaults: [rlrun_<kind>_schema]``; an algorithm's schemas live in its module
(``rlrun/algorithms/<name>.py``), the bases they share here. A user's own option file may skip
the schema and carry its own keys, which are handed to their ``_target_``.
"""

from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


def _choices(name: str, *values: str) -> type[StrEnum]:
    """A choice type: Hydra rejects any other value at compose time, listing these."""
    return StrEnum(name, list(values), module=__name__)


EnvBackend = _choices("EnvBackend", "gym_vector", "gym", "envpool", "vmas", "pettingzoo")
MULTI_AGENT_BACKENDS = ("vmas", "pettingzoo")  # env backends whose envs hold a team of agents
GroupMap = _choices("GroupMap", "all_in_one", "by_type", "one_per_agent")
StartMethod = _choices("StartMethod", "fork", "spawn", "forkserver")
PolicyKind = _choices("PolicyKind", "mlp", "lstm", "gru", "cnn")
RECURRENT_KINDS = ("lstm", "gru")  # policy kinds with a hidden state
Activation = _choices("Activation", "tanh", "relu", "elu", "gelu")
RegressionLoss = _choices("RegressionLoss", "l2", "smooth_l1", "l1")
TargetUpdate = _choices("TargetUpdate", "hard", "soft")
CollectorKind = _choices("CollectorKind", "sync", "multi_sync", "async", "ray", "none")
PolicyCopy = _choices("PolicyCopy", "auto", "always", "never")
Storage = _choices("Storage", "tensor", "memmap")
LearnerBackend = _choices("LearnerBackend", "local", "ray")
Sampler = _choices("Sampler", "random", "prioritized", "without_replacement", "slice")
WandbMode = _choices("WandbMode", "online", "offline", "disabled", "auto")
CheckpointBackend = _choices("CheckpointBackend", "torch", "torchsnapshot", "none")
ReferenceMetric = _choices("ReferenceMetric", "eval_return", "train_return")


@dataclass(frozen=True)
class Range:
    """Allowed numbers of a key: ``low``/``high`` bounds, open or closed (checked in
    ``rlrun/validation.py``; ``None`` always passes, for optional keys)."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def admits(self, x: float) -> bool:
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below

    def __str__(self) -> str:
        if self.high == math.inf:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"in {left}{self.low:g}, {self.high:g}{right}"


def ranged(low: float = -math.inf, high: float = math.inf, **openness: bool) -> Any:
    """A field with no default (the YAML gives it) whose value must lie in a :class:`Range`."""
    return field(default=MISSING, metadata={"range": Range(low, high, **openness)})


POSITIVE = {"low": 0, "low_open": True}  # > 0
PROBABILITY = {"low": 0, "high": 1}  # [0, 1]


@dataclass
class AtariConfig:
    """Atari preprocessing (``env.atari``; read by ``rlrun/builders/atari.py`` and, for
    ``env.backend=envpool``, ``rlrun/builders/envpool_env.py``)."""

    noop_max: int = ranged(0)
    frame_skip: int = ranged(1)
    screen_size: int = ranged(1)
    frame_stack: int = ranged(1)
    repeat_action_probability: float = ranged(**PROBABILITY)
    episodic_life: bool = MISSING
    clip_rewards: bool = MISSING


@dataclass
class EnvConfig:
    """An environment: any gymnasium id, wrapped by TorchRL (read by ``rlrun/builders/envs.py``)."""

    id: str = MISSING
    imports: list[str] = MISSING
    backend: EnvBackend = MISSING
    num_envs: int = ranged(1)
    num_threads: int | None = ranged(1)
    parallel: bool = MISSING
    mp_start_method: StartMethod | None = MISSING
    max_episode_steps: int | None = ranged(1)
    obs_mask: list[int] | None = MISSING
    normalize_observations: bool = MISSING
    atari: AtariConfig | None = MISSING
    transforms: list[Any] = MISSING
    kwargs: dict[str, Any] = MISSING
    group_map: GroupMap = MISSING
    opponents: dict[str, str] = MISSING


# Phases of a run and whether a recurrent policy processes whole sequences in each by default
# (policy.recurrent_mode; here, not in policies.py, so that checking it imports no torchrl).
PHASES = {"collect": False, "loss": True, "eval": False}
STEPPING_PHASES = ("collect", "eval")  # phases that call the policy once per env step


@dataclass
class PolicyConfig:
    """Actor and critic networks (read by ``rlrun/builders/policies.py``)."""

    _target_: str | None = MISSING  # null: the algorithm's own networks
    kind: PolicyKind = MISSING
    hidden_sizes: list[int] = MISSING
    activation: Activation = MISSING
    hidden_size: int = ranged(1)
    num_layers: int = ranged(1)
    recurrent_critic: bool = MISSING
    state_dependent_std: bool = MISSING
    recurrent_mode: dict[str, bool] = MISSING
    share_params: bool = MISSING
    compile: bool = MISSING
    cudagraphs: bool = MISSING


@dataclass
class AlgoConfig:
    """Keys of every algorithm: ``_target_`` (its declaration, ``rlrun/algorithms/``), ``name``,
    ``gamma`` and the update step's ``max_grad_norm``, ``compile``, ``cudagraphs``
    (``rlrun/builders/updates.py``). Each algorithm's own keys: its module's schema."""

    _target_: str = MISSING
    name: str = MISSING
    gamma: float = ranged(**PROBABILITY)
    max_grad_norm: float = ranged(**POSITIVE)
    compile: bool | str = MISSING  # true, false or auto (rlrun/checks/algorithms.py)
    cudagraphs: bool | str = MISSING


@dataclass
class OnPolicyConfig(AlgoConfig):
    """Keys of the algorithms that learn from each fresh batch with GAE advantages."""

    gae_lambda: float = ranged(**PROBABILITY)
    entropy_coef: float = ranged(0)
    critic_coef: float = ranged(0)


@dataclass
class ClipPPOConfig(OnPolicyConfig):
    """Clipped PPO's keys, for one agent or a team (``conf/algo/ppo.yaml``, ``mappo.yaml``)."""

    clip_epsilon: float = ranged(**POSITIVE)
    normalize_advantage: bool = MISSING
    epochs: int = ranged(1)
    minibatch_size: int = ranged(1)
    sequence_length: int | None = ranged(1)
    logprob_check_tol: float = ranged(**POSITIVE)


@dataclass
class OffPolicyConfig(AlgoConfig):
    """Keys shared by the replay-buffer algorithms."""

    utd_ratio: float = ranged(**POSITIVE)


@dataclass
class TargetNetConfig(OffPolicyConfig):
    """Replay-buffer algorithms with target networks."""

    tau: float = ranged(0, 1, low_open=True)


@dataclass
class EpsilonGreedyConfig(TargetNetConfig):
    """Value-based algorithms: epsilon-greedy exploration, hard or soft target updates."""

    eps_start: float = ranged(**PROBABILITY)
    eps_end: float = ranged(**PROBABILITY)
    eps_anneal_frames: int = ranged(0)
    target_update: TargetUpdate = MISSING
    target_update_period: int = ranged(1)


@dataclass
class MixedValueConfig(EpsilonGreedyConfig):
    """Value decomposition for a team (its agents' Q-values mixed into the team's)."""

    loss_function: RegressionLoss = MISSING


@dataclass
class MaxEntropyConfig(OffPolicyConfig):
    """The soft actor-critic family: a learned entropy temperature and several critics."""

    alpha_init: float = ranged(**POSITIVE)
    num_qvalue_nets: int = ranged(1)


@dataclass
class SoftActorCriticConfig(TargetNetConfig, MaxEntropyConfig):
    """Soft actor-critic's keys, for one agent or a team (``conf/algo/sac.yaml``,
    ``masac.yaml``, ``isac.yaml``)."""

    loss_function: RegressionLoss = MISSING


@dataclass
class GaussianNoiseConfig(TargetNetConfig):
    """Deterministic actors exploring with Gaussian noise, for one agent or a team
    (``conf/algo/ddpg.yaml``, ``maddpg.yaml``, ``iddpg.yaml``)."""

    loss_function: RegressionLoss = MISSING
    exploration_sigma_start: float = ranged(0)
    exploration_sigma_end: float = ranged(0)
    exploration_anneal_frames: int = ranged(1)


@dataclass
class TwinDelayedConfig(TargetNetConfig):
    """Twin Q with clipped target policy smoothing and an actor delayed to every
    ``policy_delay`` critic steps (read by ``rlrun/builders/offpolicy.py``: ``twin_delayed``)."""

    loss_function: RegressionLoss = MISSING
    num_qvalue_nets: int = ranged(1)
    policy_delay: int = ranged(1)
    policy_noise: float = ranged(0)
    noise_clip: float = ranged(0)


@dataclass
class CollectorConfig:
    """Data collection (read by ``rlrun/builders/collectors.py``)."""

    kind: CollectorKind = MISSING  # none: no env stepping, learn from ``dataset`` alone
    frames_per_batch: int = ranged(1)
    init_random_frames: int = ranged(0)
    num_workers: int = ranged(1)
    device: str | None = MISSING
    policy_copy: PolicyCopy = MISSING
    policy_factory: str | None = MISSING
    traj_ids: bool | None = MISSING
    sync: bool = MISSING


@dataclass
class RayConfig:
    """The Ray runtime of ``collector=ray`` (read by ``rlrun/builders/ray_runtime.py``)."""

    address: str | None = MISSING
    num_cpus: int | None = ranged(1)
    num_gpus: int | None = ranged(0)
    object_store_memory: int | None = ranged(1)
    runtime_env: dict[str, Any] = MISSING
    include_dashboard: bool = MISSING
    worker_cpus: float = ranged(**POSITIVE)
    worker_gpus: float | None = ranged(0)
    connect_timeout_s: float = ranged(**POSITIVE)


@dataclass
class ReplayBufferConfig:
    """Replay buffer (read by ``rlrun/builders/buffers.py``)."""

    storage: Storage = MISSING
    device: str = MISSING
    size: int = ranged(1)
    sampler: Sampler = MISSING
    alpha: float = ranged(0)
    beta: float = ranged(**PROBABILITY)
    slice_len: int = ranged(1)
    batch_size: int = ranged(1)
    prefetch: int | None = ranged(1)
    pin_memory: str = MISSING  # auto | true | false (YAML reads true/false as booleans)
    single_frames: bool = MISSING
    transforms: list[Any] = MISSING
    offline_fraction: float = ranged(0, 1, low_open=True, high_open=True)
    offline_anneal_frames: int = ranged(0)


@dataclass
class OptimConfig:
    """Optimizer (read by ``rlrun/builders/updates.py``)."""

    _target_: str = MISSING
    lr: float = ranged(**POSITIVE)
    weight_decay: float = ranged(0)
    anneal_lr: bool = MISSING
    kwargs: dict[str, Any] = MISSING


@dataclass
class TrainerConfig:
    """TorchRL Trainer settings (read by ``rlrun/run.py``)."""

    total_frames: int = ranged(1)
    log_every_frames: int = ranged(0)
    progress_bar: bool = MISSING
    progress_every_s: float = ranged(0)
    num_threads: int | None = ranged(1)
    flush_denormal: bool = MISSING
    learner_backend: LearnerBackend = MISSING
    num_learners: int = ranged(1)


@dataclass
class LoggerConfig:
    """Loggers, one or several (read by ``rlrun/builders/loggers.py``)."""

    csv: bool = MISSING
    tensorboard: bool = MISSING
    wandb: bool = MISSING
    mlflow: bool = MISSING
    project: str = MISSING
    entity: str | None = MISSING
    group: str | None = MISSING
    mode: WandbMode = MISSING
    tags: list[str] = MISSING
    tracking_uri: str | None = MISSING
    experiment: str = MISSING
    strict: bool = MISSING


@dataclass
class CheckpointConfig:
    """Checkpoints (read by ``rlrun/builders/checkpoints.py``)."""

    backend: CheckpointBackend = MISSING
    every_frames: int = ranged(0)
    keep: int = ranged(1)


@dataclass
class EvalConfig:
    """Evaluation on a separate env (read by ``rlrun/builders/evaluation.py``)."""

    every_frames: int = ranged(0)
    episodes: int = ranged(1)
    video: bool = MISSING
    max_steps: int = ranged(1)


@dataclass
class ReferenceConfig:
    """A published figure an experiment preset should reach (read by
    ``rlrun/commands/references.py``: ``rlrun report`` and ``rlrun check``). A preset's
    ``reference:`` block gives every key but ``note``; there is no group default, since a figure
    belongs to one preset."""

    source: str = MISSING  # who published it: rl-baselines3-zoo benchmark.md, CleanRL, a paper
    version: str = MISSING  # the source's version or commit
    env: str = MISSING  # the env (and version) the figure is for, as the source names it
    frames: int = ranged(1)  # env steps at which it was measured; rlrun check trains this long
    metric: ReferenceMetric = MISSING  # which summary.json value: <metric>_last
    value: float = MISSING  # the published figure
    spread: float = ranged(0)  # the band: below value - spread is "below"
    note: str | None = MISSING  # null, or how the source's setting differs from the preset's


@dataclass
class RootConfig:
    """The whole run. Group options are merged into these nodes."""

    seed: int = MISSING
    deterministic: bool = MISSING
    device: str = MISSING
    resume: str | None = MISSING
    dataset: str | None = MISSING
    init_from: str | None = MISSING
    reference: ReferenceConfig | None = MISSING
    env: EnvConfig = field(default_factory=EnvConfig)
    policy: Any = MISSING
    algo: Any = MISSING
    collector: CollectorConfig = field(default_factory=CollectorConfig)
    replay_buffer: ReplayBufferConfig = field(default_factory=ReplayBufferConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    hooks: dict[str, Any] = field(default_factory=dict)


SECRET = re.compile(r"api_?key|token|secret|password", re.IGNORECASE)


def redact_secrets(value: Any) -> Any:
    """Drop values under secret-looking keys (``api_key``, ``token``, ...) before anything is
    saved or sent: configs go into loggers and checkpoints."""
    if isinstance(value, dict):
        return {
            k: "<redacted>" if SECRET.search(str(k)) else redact_secrets(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_secrets(v) for v in value]
    return value


def run_tag() -> str:
    """``${rlrun_tag:}`` in the default run and sweep folders: 6 random hex digits after the
    start time, so that runs started in the same second (two terminals, a script, a SLURM array,
    on one host or several sharing a file system) get folders of their own, still sorted by
    time (1000 runs in one second: about 3 in 100,000 chances of one shared folder). Cached as
    Hydra caches ``now``, so a sweep's jobs agree (Hydra copies the sweep config's cache to
    theirs); the console script pins the folder it checked (``rlrun/cli.py``)."""
    return secrets.token_hex(3)


def store_schemas() -> None:
    """Store the root's schemas in Hydra's ConfigStore and the folder resolver (idempotent;
    ``rlrun/commandline.py`` adds each algorithm's)."""
    if not OmegaConf.has_resolver("rlrun_tag"):
        OmegaConf.register_new_resolver("rlrun_tag", run_tag, use_cache=True)
    cs = ConfigStore.instance()
    cs.store(name="rlrun_root_schema", node=RootConfig)
    cs.store(group="policy", name="rlrun_policy_schema", node=PolicyConfig)
