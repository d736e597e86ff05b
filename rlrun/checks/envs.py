"""The ``env`` group against the rest: observations a policy can read, an env that exists and
that the algorithm can act in, frames for evaluation videos. Light: gymnasium makes the env once."""

from __future__ import annotations

import functools
import json

from omegaconf import DictConfig, OmegaConf

from rlrun.algorithms import declared
from rlrun.builders.env_ids import check_env_id, check_pettingzoo_module, check_vmas_scenario
from rlrun.checks.algorithms import check_actions
from rlrun.config import MULTI_AGENT_BACKENDS, RECURRENT_KINDS
from rlrun.errors import ConfigError


def check_observations(cfg: DictConfig) -> None:
    """Atari ids get their preprocessing, image observations a CNN, and a CNN images."""
    env, kind = cfg.env, cfg.policy.get("kind")
    if env.id.startswith("ALE/") and env.atari is None:
        raise ConfigError(
            f"env.id={env.id} needs the Atari preprocessing: use env=atari env.id={env.id} "
            "(or env=pong, env=breakout)."
        )
    if env.atari is not None and kind in ("mlp", *RECURRENT_KINDS):
        raise ConfigError(
            f"env.id={env.id} gives image observations, which policy={kind} cannot read: use "
            "policy=cnn (or start from +experiment=ppo_atari or +experiment=dqn_atari)."
        )
    if kind == "cnn" and env.atari is None:
        raise ConfigError(
            f"policy=cnn needs image observations, but env.id={env.id} gives vectors: use "
            "env=pong, env=breakout or env=atari env.id=ALE/..., or policy=mlp."
        )
    if env.backend == "envpool" and env.parallel:
        raise ConfigError(
            "env.parallel=true runs gymnasium envs in worker processes; env.backend=envpool "
            "steps its envs in its own threads (env.num_threads): set env.parallel=false."
        )
    if env.backend == "vmas":
        check_vmas_scenario(env.id)
    if env.backend == "pettingzoo":
        check_pettingzoo_module(env.id)
    elif env.opponents:
        raise ConfigError(
            f"env.opponents is for turn-based PettingZoo games (env.backend=pettingzoo); "
            f"env.backend={env.backend} trains every agent: drop env.opponents."
        )
    if env.backend in MULTI_AGENT_BACKENDS:
        single = {"obs_mask": env.obs_mask, "normalize_observations": env.normalize_observations}
        if env.backend == "vmas":  # PettingZoo's envs may run in worker processes
            single["parallel"] = env.parallel
        for key, value in {**single, "atari": env.atari}.items():
            if value:
                raise ConfigError(
                    f"env.{key}={value} is for single-agent gymnasium envs; "
                    f"env.backend={env.backend} simulates its envs itself: drop it."
                )
    if env.backend == "envpool" and env.kwargs:
        raise ConfigError(
            f"env.kwargs={OmegaConf.to_container(env.kwargs)} are gymnasium.make arguments, "
            "which env.backend=envpool does not take (Atari: set env.atari's keys); drop them."
        )


@functools.cache
def _env_facts(env_id: str, kwargs_json: str) -> tuple[str, tuple[str, ...]]:
    """The action space's class and the render modes of ``env_id`` (one env made and closed)."""

    import gymnasium
    from gymnasium.error import DependencyNotInstalled

    check_env_id(env_id)
    try:
        env = gymnasium.make(env_id, **json.loads(kwargs_json))
    except (DependencyNotInstalled, ImportError) as err:
        hint = str(err).strip().splitlines()[0]
        if "mujoco" in hint.lower():
            hint = "MuJoCo is not installed: pip install 'rlrun[mujoco]'"
        raise ConfigError(
            f"env.id={env_id} needs a package that is not installed: {hint}"
        ) from None
    try:
        return type(env.action_space).__name__, tuple(env.metadata.get("render_modes", ()))
    finally:
        env.close()


@functools.cache
def _team_spaces(module: str, kwargs_json: str, opponents_json: str) -> tuple[str, list[str], bool]:
    """The action space's class of a PettingZoo env's first learning agent, the agents whose
    observation or action space differs from the first's (one env made and closed), and whether
    it is a turn-based game, after a one-line refusal if ``module`` cannot make one. A
    turn-based game's (``env(**kwargs)``, no ``parallel_env``) learner is the one agent not in
    ``env.opponents``."""
    import importlib

    opponents = json.loads(opponents_json)
    try:
        found = importlib.import_module(module)
        turns = hasattr(found, "env") and not hasattr(found, "parallel_env")
        maker = "env" if turns else "parallel_env"
        make = getattr(found, maker)
    except (ImportError, AttributeError) as err:
        raise ConfigError(
            f"env.id={module} is not an importable PettingZoo env module with a parallel_env "
            f"or a turn-based env (e.g. env.id=mpe2.simple_spread_v3): {type(err).__name__}: "
            f"{err}"
        ) from None
    try:
        env = make(**json.loads(kwargs_json))
    except TypeError as err:  # a keyword the env does not take
        raise ConfigError(
            f"env.kwargs do not fit {module}.{maker}: {err}; drop a key with '~env.kwargs.<key>'."
        ) from None
    try:
        if turns:
            from rlrun.builders.turns import check_policy_opponents, learner_of

            learner = learner_of(list(env.possible_agents), opponents, module)
            check_policy_opponents(env, opponents, module)
            return type(env.action_space(learner)).__name__, [], True
        if opponents:
            raise ConfigError(
                f"env.opponents is for turn-based games; env.id={module} is a parallel env, "
                "where every agent learns: drop env.opponents."
            )
        first, *others = env.possible_agents
        spaces = {a: (env.observation_space(a), env.action_space(a)) for a in env.possible_agents}
        unlike = [a for a in others if spaces[a] != spaces[first]]
        return type(spaces[first][1]).__name__, [first, *unlike] if unlike else [], False
    finally:
        env.close()


def check_env(cfg: DictConfig) -> None:
    """The env exists, its packages are installed, the algorithm can act in it (one agent or a
    team, its action space), and evaluation can render it."""
    algorithm = declared(cfg.algo)
    kwargs = OmegaConf.to_container(cfg.env.kwargs, resolve=True)
    if cfg.env.backend in MULTI_AGENT_BACKENDS:
        if cfg.env.backend == "vmas":  # VMAS's default: continuous actions; it has both
            continuous = kwargs.get("continuous_actions", True)
            space = "Box" if continuous else "Discrete"
        else:
            opponents = OmegaConf.to_container(cfg.env.opponents, resolve=True)
            space, unlike, turns = _team_spaces(
                cfg.env.id, json.dumps(kwargs, sort_keys=True), json.dumps(opponents)
            )
            if turns:  # a game's actions are what they are: no continuous_actions to flip
                check_actions(cfg, algorithm, space)
            if unlike and cfg.env.group_map == "all_in_one":
                raise ConfigError(
                    f"env.id={cfg.env.id}: its agents differ in what they observe or do "
                    f"({', '.join(unlike)}), so they cannot form one group: set "
                    "env.group_map=by_type (a group per agent type)."
                )
        if space not in algorithm.actions:
            flip = "false" if space == "Box" else "true"
            raise ConfigError(
                f"algo={cfg.algo.get('name')} needs {' or '.join(algorithm.actions)} actions, but "
                f"env.id={cfg.env.id} gives {space} ones: set env.kwargs.continuous_actions="
                f"{flip} (VMAS and MPE envs give either)."
            )
        if cfg.eval.video:
            raise ConfigError("eval.video=true: rlrun records gymnasium envs only; set it false.")
        return
    if cfg.env.backend == "envpool":
        from rlrun.builders.envpool_env import envpool_task

        envpool_task(cfg.env)
    space, render_modes = _env_facts(cfg.env.id, json.dumps(kwargs, sort_keys=True))
    check_actions(cfg, algorithm, space)
    if cfg.eval.video and "rgb_array" not in render_modes:
        raise ConfigError(
            f"eval.video=true, but env.id={cfg.env.id} cannot render frames (render modes: "
            f"{', '.join(render_modes) or 'none'}); set eval.video=false."
        )
