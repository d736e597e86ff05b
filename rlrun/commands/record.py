"""``rlrun record RUN episodes=N [noise=0.2] [id=...]``: a trained policy's episodes written as a
Minari dataset, the Farama format that TorchRL (``MinariExperienceReplay``), d3rlpy and AgileRL
read, for offline RL.

The policy is the run's trained actor on plain tensors (``rlrun.commands.loading.TensorPolicy``: the
env's observation transforms built in), acting on a plain gymnasium env of the run's id and kwargs,
so the dataset holds the env's own observations and actions, as any other Minari dataset does.
``noise`` makes a "medium" dataset from an expert: on a continuous action space, Gaussian noise of
``noise`` times half the action range, clipped to the bounds; on a discrete one, a random action
with probability ``noise``. The dataset's ``ref_min_score`` is the mean return of a random policy
and ``ref_max_score`` that of the policy without noise (``minari.get_normalized_score`` maps them to
0 and 1), each over ``ref_episodes`` episodes. It is written where Minari keeps datasets
(``MINARI_DATASETS_PATH``, by default ``~/.minari/datasets``), so ``minari.load_dataset(ID)`` and
``minari show ID`` find it; ``<run>/datasets/<name>.json`` records what was written.
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from rlrun.builders.imports import import_unprobed
from rlrun.commands.eval import positive_int
from rlrun.config import MULTI_AGENT_BACKENDS
from rlrun.errors import ConfigError
from rlrun.folders.provenance import first_start
from rlrun.folders.run_dirs import is_run_dir, run_config, shown, split_options

if TYPE_CHECKING:
    import gymnasium as gym

    from rlrun.commands.loading import TensorPolicy

USAGE = """\
Usage: rlrun record RUN episodes=N [key=value ...]

Play RUN's trained policy for N episodes and write them as a Minari dataset.
  episodes=N           episodes to record
  noise=0.0            exploration noise: Gaussian, noise x half the action range (continuous),
                       or a random action with probability noise (discrete)
  id=NAME              the dataset id (default rlrun/<env>/<algo>-<run folder>-v0)
  ref_episodes=10      episodes of a random policy and of the noise-free policy for the
                       dataset's ref_min_score and ref_max_score
  checkpoint=NAME      best | step_N | a checkpoint folder (default: the newest intact one)
  KEY=VALUE            any key of the run's saved config: device=cpu seed=3
Datasets go where Minari keeps them: $MINARI_DATASETS_PATH or ~/.minari/datasets.
"""
OPTIONS = ("episodes", "noise", "id", "ref_episodes", "checkpoint")
REF_EPISODES = 10


def dataset_id(options: dict[str, str], run_dir: Path, cfg) -> str:
    """``id=`` as given, or ``rlrun/<env name>/<algo>-<run folder>-v0`` (Minari's
    ``namespace/env/name-vN`` form)."""
    if "id" in options:
        return options["id"]
    env = cfg.env.id.split("/")[-1].rsplit("-v", 1)[0].lower()
    return f"rlrun/{env}/{cfg.algo.name}-{run_dir.name}-v0"


def check_options(options: dict[str, str], cfg) -> tuple[int, float, int]:
    """Episodes, noise and reference episodes, checked before anything is built."""
    if "episodes" not in options:
        raise ConfigError("rlrun record: give the number of episodes: episodes=N.")
    episodes = positive_int("episodes", options["episodes"])
    refs = positive_int("ref_episodes", options.get("ref_episodes", str(REF_EPISODES)))
    try:
        noise = float(options.get("noise", "0"))
    except ValueError:
        noise = -1.0
    if not 0 <= noise <= 1:
        raise ConfigError(f"noise={options['noise']} must be a number in [0, 1].")
    if cfg.env.atari is not None or cfg.policy.kind in ("lstm", "gru"):
        what = "an Atari run" if cfg.env.atari is not None else f"a {cfg.policy.kind} policy"
        raise ConfigError(
            f"rlrun record plays plain observations through a feed-forward policy; {what} is "
            "not supported yet."
        )
    return episodes, noise, refs


class Player:
    """The trained policy, with noise, on a gymnasium env; one episode at a time."""

    def __init__(self, policy: TensorPolicy, env: gym.Env, noise: float, seed: int) -> None:
        import gymnasium as gym

        self.policy, self.env, self.noise = policy, env, noise
        self.discrete = isinstance(env.action_space, gym.spaces.Discrete)
        self.rng = np.random.default_rng(seed)
        env.action_space.seed(seed)

    def act(self, observation: np.ndarray, noise: float) -> np.ndarray | int:
        import torch

        obs = torch.as_tensor(np.asarray(observation), dtype=torch.float32)[None]
        device = next(self.policy.parameters()).device
        with torch.no_grad():
            action = self.policy(obs.to(device))[0].cpu().numpy()
        space = self.env.action_space
        if self.discrete:  # rlrun's discrete actions are one-hot
            if self.rng.random() < noise:
                return int(space.sample())
            return int(action.argmax()) if action.ndim else int(action)
        if noise:
            action = action + self.rng.normal(0, noise * (space.high - space.low) / 2)
        return np.clip(action, space.low, space.high).astype(space.dtype)

    def episode(self, seed: int, noise: float, random: bool = False) -> dict:
        """One episode: Minari's ``EpisodeBuffer`` fields (observations one longer)."""
        obs, _ = self.env.reset(seed=seed)
        observations, actions, rewards, terminations, truncations = [obs], [], [], [], []
        done = False
        while not done:
            action = self.env.action_space.sample() if random else self.act(obs, noise)
            obs, reward, terminated, truncated, _ = self.env.step(action)
            observations.append(obs)
            actions.append(action)
            rewards.append(float(reward))
            terminations.append(bool(terminated))
            truncations.append(bool(truncated))
            done = terminated or truncated
        return {
            "seed": seed,
            "observations": np.stack(observations),
            "actions": np.stack(actions),
            "rewards": np.array(rewards),
            "terminations": np.array(terminations),
            "truncations": np.array(truncations),
        }

    def mean_return(self, seeds: range, random: bool) -> float:
        return float(np.mean([self.episode(s, 0.0, random)["rewards"].sum() for s in seeds]))


def record(run_dir: Path, args: list[str]) -> dict:
    """Play, write the dataset and its record; what was written."""
    options, overrides = split_options(args, OPTIONS, "record")
    cfg = run_config(run_dir, overrides, None)  # its keys checked before torch is imported
    if cfg.env.backend in MULTI_AGENT_BACKENDS:
        raise ConfigError(
            f"rlrun record plays one agent in a gymnasium env; {run_dir.name} trains a team "
            f"(env.backend={cfg.env.backend}), whose episodes a Minari dataset cannot hold: "
            "evaluate it with rlrun eval."
        )
    episodes, noise, refs = check_options(options, cfg)
    name = dataset_id(options, run_dir, cfg)
    try:
        import minari
        from minari.data_collector import EpisodeBuffer
    except ImportError:
        raise ConfigError("rlrun record needs Minari: pip install 'rlrun[offline]'.") from None
    if name in minari.list_local_datasets():
        raise ConfigError(
            f"a dataset {name} exists already ({minari.storage.get_dataset_path(name)}); give "
            "another id=, or delete it: minari delete " + name
        )
    import gymnasium as gym

    from rlrun.builders.env_ids import import_env_modules

    loading = import_unprobed("rlrun.commands.loading")  # TorchRL, without its probes

    trained = loading.rebuild(run_dir, cfg, options.get("checkpoint"))
    import_env_modules(cfg.env.imports)
    env = gym.make(cfg.env.id, **cfg.env.kwargs)
    if cfg.env.max_episode_steps:
        env = gym.wrappers.TimeLimit(env, cfg.env.max_episode_steps)
    player = Player(loading.TensorPolicy(trained), env, noise, cfg.seed)
    start = time.perf_counter()
    seed = cfg.seed + 1000  # other envs than training's and evaluation's
    played = [player.episode(seed + i, noise) for i in range(episodes)]
    ref_seeds = range(seed + episodes, seed + episodes + refs)
    ref_min = player.mean_return(ref_seeds, random=True)
    ref_max = player.mean_return(ref_seeds, random=False)
    buffers = [EpisodeBuffer(id=i, **episode) for i, episode in enumerate(played)]
    returns = [float(e["rewards"].sum()) for e in played]
    description = (
        f"{episodes} episodes of rlrun {cfg.algo.name} ({run_dir.name}, {trained.frames} frames) "
        f"on {cfg.env.id}, noise {noise:g}; ref_min_score: a random policy, ref_max_score: the "
        f"policy without noise, each over {refs} episodes."
    )
    started = first_start(run_dir) or {}
    commit = (started.get("source") or {}).get("commit")
    with warnings.catch_warnings():  # Minari's advice to name an author and an email
        warnings.simplefilter("ignore", UserWarning)
        dataset = minari.create_dataset_from_buffers(
            dataset_id=name, buffer=buffers, env=env.spec, eval_env=env.spec,
            algorithm_name=f"rlrun {cfg.algo.name}", ref_min_score=ref_min,
            ref_max_score=ref_max, description=description,
            code_permalink=f"rlrun commit {commit}" if commit else None,
        )  # fmt: skip
    env.close()
    result = {
        "id": name,
        "path": str(minari.storage.get_dataset_path(name)),
        "run": str(run_dir),
        "checkpoint": str(trained.checkpoint),
        "frames": trained.frames,
        "env_id": cfg.env.id,
        "episodes": episodes,
        "steps": int(dataset.total_steps),
        "noise": noise,
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "ref_min_score": ref_min,
        "ref_max_score": ref_max,
        "seconds": round(time.perf_counter() - start, 1),
    }
    folder = run_dir / "datasets"
    folder.mkdir(exist_ok=True)
    (folder / f"{name.replace('/', '_')}.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def main(args: list[str]) -> int:
    if not args or args[0] in ("--help", "-h"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    run_dir = Path(args[0]).expanduser().absolute()
    if not is_run_dir(run_dir):
        raise ConfigError(f"rlrun record {args[0]}: not a run folder (give one job of a sweep).")
    result = record(run_dir, args[1:])
    print(
        f"rlrun record: {result['episodes']} episodes, {result['steps']} steps, return "
        f"{result['return_mean']:.4g} ± {result['return_std']:.3g} (noise {result['noise']:g}; "
        f"random policy {result['ref_min_score']:.4g}, without noise "
        f"{result['ref_max_score']:.4g}) -> Minari dataset {result['id']}"
    )
    print(f"rlrun record: written to {shown(Path(result['path']))}")
    return 0
