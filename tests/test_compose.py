"""Every experiment preset composes against the typed schema and builds its objects."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest
from conftest import built, compose

PRESETS = sorted(  # _name.yaml: a part that presets share, not one itself
    p.name[:-5] for p in files("rlrun.conf").joinpath("experiment").iterdir() if p.name[0] != "_"
)


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
