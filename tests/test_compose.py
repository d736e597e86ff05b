"""Every experiment preset composes against the typed schema and builds its objects."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest
from conftest import compose
from omegaconf import OmegaConf

PRESETS = sorted(p.name[:-5] for p in files("rlrun.conf").joinpath("experiment").iterdir())


@pytest.mark.parametrize("preset", PRESETS)
def test_preset_composes_and_builds(preset, tmp_path: Path):
    from hydra.core.hydra_config import HydraConfig

    from rlrun.hooks import EpisodeStats
    from rlrun.run import build_trainer

    cfg = compose(f"+experiment={preset}", "trainer.progress_bar=false", "logger=none")
    HydraConfig.instance().set_config(cfg)
    OmegaConf.set_struct(cfg, False)
    del cfg["hydra"]
    trainer = build_trainer(cfg, tmp_path, EpisodeStats())
    try:
        assert trainer.total_frames == cfg.trainer.total_frames
        assert sum(p.numel() for p in trainer.loss_module.parameters()) > 0
    finally:
        trainer.collector.shutdown()


def test_schema_rejects_unknown_yaml_key():
    with pytest.raises(Exception, match="total_frame"):
        compose("trainer.total_frame=1")
