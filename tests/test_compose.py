"""Every experiment preset composes against the typed schema and builds its objects."""

from __future__ import annotations

import os
from collections.abc import Iterator
from importlib.resources import files
from pathlib import Path

import pytest
from conftest import built, compose

PRESETS = sorted(p.name[:-5] for p in files("rlrun.conf").joinpath("experiment").iterdir())


@pytest.fixture(scope="module")
def random_datasets(tmp_path_factory) -> Iterator[dict[str, str]]:
    """Minari datasets of random play for the offline presets, by env id."""
    minari = pytest.importorskip("minari")
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    from rlrun.record import Player

    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path_factory.mktemp("datasets"))
    ids = {}
    for env_id in ("Pendulum-v1", "CartPole-v1"):
        env = gym.make(env_id)
        player = Player(None, env, 0.0, 0)
        played = [EpisodeBuffer(id=i, **player.episode(i, 0.0, random=True)) for i in range(2)]
        ids[env_id] = f"test/{env_id.lower()}/random-v0"
        minari.create_dataset_from_buffers(
            dataset_id=ids[env_id], buffer=played, env=env.spec, algorithm_name="random"
        )
    yield ids
    if old is None:
        del os.environ["MINARI_DATASETS_PATH"]
    else:
        os.environ["MINARI_DATASETS_PATH"] = old


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_and_builds(preset, tmp_path: Path, request):
    overrides = [f"+experiment={preset}"]
    composed = compose(*overrides)
    if composed.collector.kind == "none":  # an offline preset: a dataset of its env
        overrides.append(f"dataset={request.getfixturevalue('random_datasets')[composed.env.id]}")
    with built(tmp_path, *overrides) as (cfg, trainer):
        assert trainer.total_frames == cfg.trainer.total_frames
        assert sum(p.numel() for p in trainer.loss_module.parameters()) > 0


def test_schema_rejects_unknown_yaml_key():
    with pytest.raises(Exception, match="total_frame"):
        compose("trainer.total_frame=1")
