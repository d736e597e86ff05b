"""The algorithm against the run: its own keys, the policy it trains, the action space it acts
in and its own rules, all read from its declaration (``rlrun/algorithms/``)."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from rlrun.algorithms import AUTO, Algorithm, Data, shipped
from rlrun.checks.ranges import check_node_ranges
from rlrun.config import MULTI_AGENT_BACKENDS, RECURRENT_KINDS
from rlrun.errors import ConfigError


def check_algorithm(cfg: DictConfig, algorithm: Algorithm) -> None:
    """``algo``'s keys against the algorithm's schema (a user's YAML may leave it out of its
    defaults list), random frames against an on-policy algorithm (``Algorithm.data``), the
    policy against what it trains, CUDA graphs against what is known to capture, and the
    algorithm's own rules (``Algorithm.check``)."""
    name = cfg.algo.get("name")
    check_schema(cfg.algo, algorithm)
    check_agents(cfg, algorithm)
    random_frames = cfg.collector.get("init_random_frames")
    if algorithm.data == Data.ON_POLICY and random_frames:
        raise ConfigError(
            f"collector.init_random_frames={random_frames}: algo={name} learns on-policy, from "
            "each fresh batch of its own policy, with no replay buffer for random frames to "
            "fill; set collector.init_random_frames=0."
        )
    kind = cfg.policy.get("kind")
    if kind in RECURRENT_KINDS and not algorithm.sequences:
        fits = [
            f"algo={n}, "
            for n, a in shipped().items()
            if a.sequences and a.multi_agent == algorithm.multi_agent
        ]
        raise ConfigError(
            f"algo={name} cannot train a recurrent policy (policy={kind}); use "
            f"{' or '.join(fits)}{'or ' if fits else ''}policy=mlp."
        )
    for key in ("compile", "cudagraphs"):
        if cfg.algo.get(key, False) not in (True, False, AUTO):
            raise ConfigError(
                f"algo.{key}={cfg.algo[key]} is not a choice; use algo.{key}=true, false or "
                f"{AUTO} (on where algo={name} measured a gain)."
            )
    if cfg.algo.get("cudagraphs") is True and not algorithm.cudagraphs:
        known = [n for n, a in shipped().items() if a.cudagraphs]
        raise ConfigError(
            f"algo.cudagraphs=true: algo={name}'s update step is not known to capture in a CUDA "
            f"graph (known: algo={', '.join(known)}); set algo.cudagraphs=false (algo.compile=true "
            "alone works for every algorithm)."
        )
    if algorithm.check is not None:
        algorithm.check(cfg)


def check_schema(node: DictConfig, algorithm: Algorithm) -> None:
    """``algo`` typed by the algorithm's schema: Hydra did it at compose time where the YAML
    names the schema; a user's YAML that does not is checked here, keys, types and ranges."""
    if algorithm.schema is None or OmegaConf.get_type(node) is algorithm.schema:
        return
    try:
        typed = OmegaConf.merge(OmegaConf.structured(algorithm.schema), node)
    except OmegaConfBaseException as err:
        first = str(err).strip().splitlines()[0]
        raise ConfigError(
            f"algo.{getattr(err, 'full_key', '')}: {first} (algo._target_={node._target_} takes "
            f"the keys of {algorithm.schema.__name__})"
        ) from None
    check_node_ranges(typed, "algo.")


def check_actions(cfg: DictConfig, algorithm: Algorithm, space: str) -> None:
    """The env's action space (a gymnasium class name) is one the algorithm acts in; else the
    algorithms that do, for one agent or a team as it is (online ones: an offline one needs a
    dataset)."""
    if space in algorithm.actions:
        return
    fits = [
        n
        for n, a in shipped().items()
        if space in a.actions and a.data != Data.OFFLINE and a.multi_agent == algorithm.multi_agent
    ]
    preset = f" (with its preset, e.g. +experiment={fits[0] if fits else '<name>'})"
    raise ConfigError(
        f"algo={cfg.algo.get('name')} needs a {' or '.join(algorithm.actions)} action space, but "
        f"env.id={cfg.env.id} has a {space} one; use algo={' or algo='.join(fits) or '?'}"
        f"{'' if algorithm.multi_agent else preset}."
    )


def check_agents(cfg: DictConfig, algorithm: Algorithm) -> None:
    """A team algorithm on a multi-agent env (``env.backend=vmas``), a one-agent algorithm on a
    gymnasium env; else the algorithms that fit."""
    team = cfg.env.backend in MULTI_AGENT_BACKENDS
    if algorithm.multi_agent == team:
        check_groups(cfg, algorithm)
        return
    fits = [n for n, a in shipped().items() if a.multi_agent == team and a.data != Data.OFFLINE]
    use = f"use algo=<one of: {', '.join(fits)}>"
    name = cfg.algo.get("name")
    if team:
        raise ConfigError(
            f"algo={name} trains one agent, but env.backend={cfg.env.backend} "
            f"(env.id={cfg.env.id}) is a team of agents: {use} (e.g. +experiment=mappo_navigation)."
        )
    raise ConfigError(
        f"algo={name} trains a team of agents, but env.id={cfg.env.id} has one agent: "
        f"{use}, or env=vmas for a multi-agent scenario."
    )


def check_groups(cfg: DictConfig, algorithm: Algorithm) -> None:
    """``env.group_map`` other than ``all_in_one`` only for a team, trained by an algorithm that
    trains several groups; else the algorithms that do."""
    groups = cfg.env.group_map
    if groups == "all_in_one" or algorithm.groups:
        return
    if cfg.env.backend not in MULTI_AGENT_BACKENDS:
        raise ConfigError(
            f"env.group_map={groups} groups a team's agents; env.id={cfg.env.id} has one agent: "
            "leave env.group_map=all_in_one."
        )
    fits = [n for n, a in shipped().items() if a.groups]
    raise ConfigError(
        f"algo={cfg.algo.get('name')} trains one group of agents, but env.group_map={groups} "
        f"may make several: set env.group_map=all_in_one, or use algo=<one of: {', '.join(fits)}>."
    )
