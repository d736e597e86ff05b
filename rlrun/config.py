"""Structured configs: the schema every YAML file under ``conf/`` is checked against.

Hydra merges each YAML group option into the dataclass registered for it, so a misspelt key or a
value of the wrong type fails at compose time, before anything heavy is imported.
The schemas are stored under ``rlrun_*`` names so they cannot collide with TorchRL's own
ConfigStore entries (``logger/csv``, ``collector/sync``, ...).

Groups whose options differ in shape (``policy``, ``algo``) are typed per option: each YAML file
starts with ``defaults: [rlrun_<kind>_schema]``. A user's own option file may skip the schema and
carry its own keys, which are handed to their ``_target_``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class EnvConfig:
    """An environment: any gymnasium id, wrapped by TorchRL (read by ``rlrun/envs.py``)."""

    id: str = "CartPole-v1"
    backend: str = "gym_vector"  # gym_vector | gym | parallel
    num_envs: int = 8
    parallel: bool = False  # true: ``backend`` gym envs run in ParallelEnv worker processes
    mp_start_method: str | None = None  # ParallelEnv workers; null: fork, spawn with CUDA
    max_episode_steps: int | None = None
    obs_mask: list[int] | None = None  # indices of the observation vector the agent sees
    transforms: list[Any] = field(default_factory=list)  # extra TorchRL transforms (_target_)
    kwargs: dict[str, Any] = field(default_factory=dict)  # passed to gymnasium.make


@dataclass
class PolicyConfig:
    """Actor and critic networks (read by ``rlrun/policies.py``)."""

    _target_: str = "rlrun.policies.make_actor_critic"
    kind: str = "mlp"  # mlp | lstm | gru
    hidden_sizes: list[int] = field(default_factory=lambda: [64, 64])
    activation: str = "tanh"
    hidden_size: int = 64  # recurrent cell width (lstm, gru)
    num_layers: int = 1  # recurrent layers (lstm, gru)
    recurrent_critic: bool = True
    # Recurrent-mode flags: which phases process whole sequences (True) or single steps (False).
    recurrent_mode: dict[str, bool] = field(
        default_factory=lambda: {"collect": False, "loss": True, "eval": False}
    )
    compile: bool = False  # torch.compile the policy the collector steps (policy.compile=true)
    cudagraphs: bool = False  # capture the collector's policy in a CUDA graph (CUDA only)


@dataclass
class AlgoConfig:
    """Keys of every algorithm: ``name``, ``gamma`` (``rlrun/algorithms.py``) and the update
    step's ``max_grad_norm``, ``compile``, ``cudagraphs`` (``rlrun/updates.py``)."""

    name: str = MISSING
    gamma: float = 0.99
    max_grad_norm: float = 10.0
    compile: bool = False  # torch.compile the update step (loss, backward, optimiser step)
    cudagraphs: bool = False  # capture the update step in a CUDA graph (device=cuda only)


@dataclass
class PPOConfig(AlgoConfig):
    """Clipped PPO with GAE (read by ``rlrun/algorithms.py``)."""

    name: str = "ppo"
    gae_lambda: float = 0.95
    clip_epsilon: float = 0.2
    entropy_coef: float = 0.01
    critic_coef: float = 0.5
    normalize_advantage: bool = True
    epochs: int = 4
    minibatch_size: int = 256
    sequence_length: int | None = None  # recurrent policies: minibatch slices of this length
    logprob_check_tol: float = 1e-3
    max_grad_norm: float = 0.5


@dataclass
class DQNConfig(AlgoConfig):
    """DQN (read by ``rlrun/algorithms.py``)."""

    name: str = "dqn"
    loss_function: str = "l2"
    double_dqn: bool = True
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_anneal_frames: int = 10000  # frames over which epsilon goes from eps_start to eps_end
    target_update: str = "hard"  # hard | soft
    target_update_period: int = 500  # hard: optimisation steps between target copies
    tau: float = 0.005  # soft: target += tau * (online - target), every step
    utd_ratio: float = 1.0  # optimisation steps per collected frame


@dataclass
class SACConfig(AlgoConfig):
    """SAC (read by ``rlrun/algorithms.py``)."""

    name: str = "sac"
    tau: float = 0.005  # soft target update: target += tau * (online - target), every step
    alpha_init: float = 1.0  # initial entropy temperature (learned towards -|A| entropy)
    num_qvalue_nets: int = 2  # twin Q
    loss_function: str = "l2"  # Q regression: l2 | smooth_l1 | l1
    utd_ratio: float = 1.0  # optimisation steps per collected frame


@dataclass
class CollectorConfig:
    """Data collection (read by ``rlrun/collectors.py``)."""

    kind: str = "sync"  # sync | multi_sync | async
    frames_per_batch: int = 1024
    init_random_frames: int = 0
    num_workers: int = 2
    device: str | None = None  # the collector's policy; default: the top-level ``device``
    policy_copy: str = "auto"  # auto | always | never
    policy_factory: str | None = None  # multi-process: a ``_target_`` each worker calls
    traj_ids: bool | None = None  # write ("collector", "traj_ids"); null: only where read


@dataclass
class ReplayBufferConfig:
    """Replay buffer (read by ``rlrun/buffers.py``)."""

    storage: str = "tensor"  # tensor | memmap
    device: str = "cpu"  # where the storage lives: cpu | cuda | cuda:N | auto (the learner's)
    size: int = 100000
    sampler: str = "random"  # random | prioritized | without_replacement | slice
    alpha: float = 0.6  # prioritized: priority exponent
    beta: float = 0.4  # prioritized: importance-sampling exponent
    slice_len: int = 8  # slice: steps per sampled sequence
    batch_size: int = 256
    prefetch: int | None = None
    pin_memory: str = "auto"  # auto | true | false
    transforms: list[Any] = field(default_factory=list)


@dataclass
class OptimConfig:
    """Optimizer (read by ``rlrun/updates.py``)."""

    _target_: str = "torch.optim.Adam"
    lr: float = 3e-4
    weight_decay: float = 0.0
    anneal_lr: bool = False  # linear decay to 0 over trainer.total_frames
    kwargs: dict[str, Any] = field(default_factory=dict)  # other arguments of the optimizer class


@dataclass
class TrainerConfig:
    """TorchRL Trainer settings (read by ``rlrun/run.py``)."""

    total_frames: int = 100000
    log_every_frames: int = 0  # 0: log every collected batch
    progress_bar: bool = True
    num_threads: int | None = None  # torch threads; default: 1 per job for small nets


@dataclass
class LoggerConfig:
    """Loggers, one or several (read by ``rlrun/loggers.py``)."""

    csv: bool = False
    tensorboard: bool = False
    wandb: bool = False
    mlflow: bool = False
    project: str = "rlrun"
    entity: str | None = None
    group: str | None = None
    mode: str = "auto"  # wandb: online | offline | disabled | auto (offline without credentials)
    tags: list[str] = field(default_factory=list)


@dataclass
class CheckpointConfig:
    """Checkpoints (read by ``rlrun/checkpoints.py``)."""

    backend: str = "torch"  # torch | torchsnapshot | none
    every_frames: int = 0  # 0: only at the end of the run and on stop
    keep: int = 3


@dataclass
class EvalConfig:
    """Evaluation on a separate env (read by ``rlrun/evaluation.py``)."""

    every_frames: int = 0  # 0: no evaluation
    episodes: int = 5
    video: bool = False
    max_steps: int = 1000


@dataclass
class RootConfig:
    """The whole run. Group options are merged into these nodes."""

    seed: int = 0
    device: str = "cpu"  # the learner's: cpu | cuda | cuda:N | auto (rlrun/devices.py)
    resume: str | None = None
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
    hooks: dict[str, Any] = field(default_factory=dict)


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="rlrun_root_schema", node=RootConfig)
    cs.store(group="policy", name="rlrun_policy_schema", node=PolicyConfig)
    cs.store(group="algo", name="rlrun_ppo_schema", node=PPOConfig)
    cs.store(group="algo", name="rlrun_dqn_schema", node=DQNConfig)
    cs.store(group="algo", name="rlrun_sac_schema", node=SACConfig)
