"""``trainer.learner_backend=ray`` (``rlrun/builders/learners.py``): what Ray learners cannot
run."""

from __future__ import annotations

from omegaconf import DictConfig

from rlrun.algorithms import Algorithm, Data, shipped
from rlrun.builders.hook_entries import HookEntry
from rlrun.errors import ConfigError

# trainer.learner_backend=ray (rlrun/builders/learners.py): the stages TorchRL 0.14.1 still runs on
# the driver; the others run inside the optimisation loop, on the learners
DRIVER_STAGES = (
    "batch_process",
    "post_steps",
    "pre_steps_log",
    "post_steps_log",
    "setup",
    "shutdown",
)


def check_learners(cfg: DictConfig, algorithm: Algorithm, hooks: list[HookEntry]) -> None:
    """What ``trainer.learner_backend=ray`` cannot run (``rlrun/builders/learners.py``)."""
    n = cfg.trainer.num_learners
    if cfg.trainer.learner_backend != "ray":
        if n != 1:
            raise ConfigError(
                f"trainer.num_learners={n} needs trainer.learner_backend=ray (the local "
                "backend optimises in this process)."
            )
        return
    why = "with trainer.learner_backend=ray"
    algo = cfg.algo.name
    if not algorithm.ray_learners:
        reason = (
            f"algo={algo} trains on each fresh batch"
            if algorithm.data == Data.ON_POLICY
            else f"algo={algo} is not wired to them yet"
        )
        capable = [n for n, a in shipped().items() if a.ray_learners]
        raise ConfigError(
            f"algo={algo} cannot train {why}: the Ray learners sample a replay buffer "
            f"(algo={', '.join(capable)}), {reason}; use trainer.learner_backend=local."
        )
    rb = cfg.replay_buffer
    if rb.batch_size % n:
        raise ConfigError(
            f"replay_buffer.batch_size={rb.batch_size} must be divisible by "
            f"trainer.num_learners={n} (each learner samples batch_size / num_learners)."
        )
    plain = {"single_frames": False, "storage": "tensor", "sampler": "random", "prefetch": None}
    for key, value in plain.items():
        if (rb[key] or None) != (value or None):
            raise ConfigError(
                f"replay_buffer.{key}={rb[key]} is not supported {why}: the learners sample a "
                f"Ray actor's in-memory buffer with a random sampler; set "
                f"replay_buffer.{key}={'null' if value is None else str(value).lower()}."
            )
    if rb.transforms:
        raise ConfigError(
            f"replay_buffer.transforms are not supported {why} (the buffer is a Ray actor's); "
            "set replay_buffer.transforms=[]."
        )
    for key in ("compile", "cudagraphs"):  # auto: off on Ray learners
        if cfg.algo.get(key) is True:
            raise ConfigError(
                f"algo.{key}=true is not supported {why}: the learners run TorchRL's own "
                f"optimisation step; set algo.{key}=false."
            )
    if cfg.optim.anneal_lr:
        raise ConfigError(
            f"optim.anneal_lr=true is not supported {why}: the learners own their optimisers; "
            "set optim.anneal_lr=false."
        )
    if cfg.checkpoint.backend == "torchsnapshot":
        raise ConfigError(
            f"checkpoint.backend=torchsnapshot cannot save the Ray learners' state ({why}); "
            "use checkpoint.backend=torch."
        )
    check_learner_hooks(hooks)


def check_learner_hooks(hooks: list[HookEntry]) -> None:
    """With Ray learners, config hooks run in this process: only at the driver's stages."""
    for entry in hooks:
        if entry.builtin is not None:
            raise ConfigError(
                f"hooks.{entry.name}: built-in hooks are not supported with "
                "trainer.learner_backend=ray (the optimisation runs on the Ray learners); "
                "drop it or use trainer.learner_backend=local."
            )
        refused = [point for point in entry.points if point not in DRIVER_STAGES]
        if refused:
            raise ConfigError(
                f"hooks.{entry.name}.at={refused[0]} runs inside the optimisation loop, which "
                "runs on the Ray learners with trainer.learner_backend=ray; use one of: "
                f"{', '.join(DRIVER_STAGES)}."
            )
