"""The optional packages a choice needs, and the extra that installs each."""

from __future__ import annotations

import importlib.util

from omegaconf import DictConfig

from rlrun.errors import ConfigError

# what each optional choice imports, and the extra that installs it
EXTRAS = {
    "torchsnapshot": "torchsnapshot",
    "wandb": "wandb",
    "mlflow": "mlflow",
    "tensorboard": "tensorboard",
    "moviepy": "video",
    "hydra_plugins.hydra_joblib_launcher": "launchers",
    "hydra_plugins.hydra_submitit_launcher": "launchers",
    "hydra_plugins.hydra_optuna_sweeper": "optuna",
    "ale_py": "atari",
    "cv2": "atari",
    "envpool": "envpool",
    "ray": "ray",
    "minari": "offline",
    "vmas": "multiagent",
    "pettingzoo": "multiagent",
    "mpe2": "multiagent",
    "hydra_plugins.hydra_ray_launcher": "ray",
}

# rlrun's wrappers of a Hydra plugin: the plugin module each imports when it launches
WRAPPED_PLUGINS = {
    "hydra_plugins.rlrun_sweepers.ray_launcher": "hydra_plugins.hydra_ray_launcher",
    "hydra_plugins.rlrun_sweepers.joblib_launcher": "hydra_plugins.hydra_joblib_launcher",
    "hydra_plugins.rlrun_sweepers.submitit_launcher": "hydra_plugins.hydra_submitit_launcher",
}


def _missing_extra(module: str) -> str | None:
    """The extra that installs ``module`` when it cannot be imported, else None."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        found = False
    if found:
        return None
    extra = next((e for m, e in EXTRAS.items() if module.startswith(m)), None)
    return f"pip install 'rlrun[{extra}]'" if extra else f"pip install {module.split('.')[0]}"


def need(module: str, why: str) -> None:
    fix = _missing_extra(module)
    if fix is not None:
        raise ConfigError(f"{why} needs the {module.split('.')[0]} package: {fix}.")


def check_optional_packages(cfg: DictConfig) -> None:
    """The packages the chosen backends import (loggers, checkpoints, video, launchers)."""
    if cfg.checkpoint.backend == "torchsnapshot":
        need("torchsnapshot", "checkpoint.backend=torchsnapshot")
    for name in ("tensorboard", "wandb", "mlflow"):
        if cfg.logger[name]:
            need(name, f"logger={name}")
    if cfg.eval.video:
        need("moviepy", "eval.video=true")
    if cfg.env.id.startswith("ALE/"):
        need("ale_py", f"env.id={cfg.env.id}")
    if cfg.env.atari is not None:
        need("cv2", "the Atari preprocessing (env.atari)")
    if cfg.env.backend in ("envpool", "vmas", "pettingzoo"):
        need(cfg.env.backend, f"env.backend={cfg.env.backend}")
    if cfg.collector.kind == "ray":
        need("ray", "collector=ray")
    if cfg.trainer.learner_backend == "ray":
        need("ray", "trainer.learner_backend=ray")
    hydra = cfg.get("hydra")
    if hydra is not None:
        for group in ("launcher", "sweeper"):
            target = hydra[group].get("_target_", "")
            if target.startswith("hydra_plugins."):
                choice = hydra.runtime.choices.get(f"hydra/{group}", target)
                module = WRAPPED_PLUGINS.get(target.rsplit(".", 1)[0], target.rsplit(".", 2)[0])
                need(module, f"hydra/{group}={choice}")
