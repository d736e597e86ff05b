"""A run or sweep beside its preset's published reference (the preset's ``reference:`` block,
schema ``rlrun/config.py`` ReferenceConfig), for ``rlrun report`` and ``rlrun check``.

Per setting of a sweep (seeds of the same overrides), the final value the reference names
(``eval_return_last`` or ``train_return_last`` of each job's ``summary.json``) is summarised by its
IQM with a 95% stratified bootstrap interval (rliable, as ``rlrun/commands/statistics.py``), in a
line "<env> at <frames> frames: <IQM>, 95% CI [<low>, <high>] over <n> seeds; <source>: <value> ±
<spread>: <verdict>". The verdict is ``below`` when the whole interval lies under ``value -
spread``, ``above`` when it lies over ``value + spread``, ``within`` otherwise, and ``not
comparable`` when the runs cannot be set beside the figure (another env than the preset's, fewer
frames than the reference's, no such value). What differs from the source's setting (its env
version, the preset's changed keys, the source's own note) follows the line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from omegaconf import DictConfig, OmegaConf

from rlrun.folders.run_dirs import RUN_CONFIG, apply_overrides

BELOW, WITHIN, ABOVE, NOT_COMPARABLE = "below", "within", "above", "not comparable"
# overrides that do not change what a preset trains (how long is checked against the frames)
NEUTRAL_KEYS = ("seed", "trainer.total_frames", "deterministic", "device", "resume",
                "experiment", "reference")  # fmt: skip
NEUTRAL_GROUPS = ("eval", "logger", "checkpoint", "hydra", "ray", "trainer.progress_bar")
FRAMES_SLACK = 0.98  # collectors stop at a whole batch: a run may end a little short


@dataclass
class Job:
    """One run folder, as written by ``rlrun.run.run_job``."""

    path: Path
    overrides: list[str]
    summary: dict
    curve: np.ndarray | None  # [n, 2] rows of (frames, value), or None without CSV logs
    setting: str = ""  # the overrides that differ between jobs, seeds left out


@dataclass
class Setting:
    """Jobs that differ only in their seed."""

    name: str
    jobs: list[Job] = field(default_factory=list)


@dataclass
class Comparison:
    """One setting's line and verdict."""

    setting: str
    line: str
    verdict: str
    notes: list[str]

    def text(self) -> str:
        return self.line + "".join(f"\n  - {n}" for n in self.notes)


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def changed_keys(overrides: Sequence[str]) -> list[str]:
    """The overrides that change what the preset trains."""
    return [
        o
        for o in overrides
        if _key(o) not in NEUTRAL_KEYS
        and not _key(o).startswith(tuple(f"{g}." for g in NEUTRAL_KEYS))
        and not _key(o).startswith(NEUTRAL_GROUPS)
    ]


def reference_of(run_dir: Path, overrides: Sequence[str] = ()) -> DictConfig | None:
    """The run's saved reference, with ``reference.KEY=VALUE`` overrides applied."""
    cfg = OmegaConf.load(run_dir / RUN_CONFIG)
    if cfg.get("reference") is None:
        return None
    apply_overrides(cfg, overrides)
    return cfg.reference


def verdict(low: float, high: float, ref: DictConfig) -> str:
    if high < ref.value - ref.spread:
        return BELOW
    if low > ref.value + ref.spread:
        return ABOVE
    return WITHIN


def compare(setting: Setting, overrides: Sequence[str] = ()) -> Comparison | None:
    """``setting``'s jobs beside their reference; None when they have none."""
    from rlrun.commands import statistics

    refs = [reference_of(job.path, overrides) for job in setting.jobs]
    if all(r is None for r in refs):
        return None
    ref = refs[0]
    name = setting.name
    if ref is None or any(OmegaConf.to_yaml(r) != OmegaConf.to_yaml(ref) for r in refs if r):
        return Comparison(name, "its jobs have different references", NOT_COMPARABLE, [])
    source = f"{ref.source} ({ref.version}): {ref.value:g} ± {ref.spread:g}"
    env_change = [o for o in setting.jobs[0].overrides if _key(o) in ("env", "env.id")]
    if env_change:
        why = f"{' '.join(env_change)} changes the preset's env; the reference is for {ref.env}"
        return Comparison(name, f"no reference applies: {why}", NOT_COMPARABLE, [])
    env_id = str(OmegaConf.load(setting.jobs[0].path / RUN_CONFIG).env.id)
    key = f"{ref.metric}_last"
    values = [float(v) for j in setting.jobs if (v := j.summary.get(key)) is not None]
    notes = []
    if len(values) < len(setting.jobs):
        missing = len(setting.jobs) - len(values)
        notes.append(f"{missing} of {len(setting.jobs)} jobs have no {key} in summary.json "
                     "(failed, or no evaluation: eval.every_frames)")  # fmt: skip
    if not values:
        return Comparison(name, f"{env_id}: no {key} to compare; {source}", NOT_COMPARABLE, notes)
    if not statistics.available():
        line = f"{env_id}: no interval without rliable: pip install 'rlrun[report]'; {source}"
        return Comparison(name, line, NOT_COMPARABLE, notes)
    row = statistics.interval_table({name: np.array(values)[:, None]}, None)[0]
    frames = min(int(j.summary.get("frames") or 0) for j in setting.jobs)
    found = verdict(row["iqm_low"], row["iqm_high"], ref)
    if frames < FRAMES_SLACK * ref.frames:
        found = NOT_COMPARABLE
        notes.append(f"the runs stopped at {frames} frames, the reference is at {ref.frames}")
    elif frames > ref.frames / FRAMES_SLACK:
        notes.append(f"the runs trained for {frames} frames, the reference is at {ref.frames}")
    if ref.env != env_id:
        notes.append(f"the reference is for {ref.env}, these runs are {env_id}")
    changed = changed_keys(setting.jobs[0].overrides)
    if changed:
        notes.append(f"these runs change the preset: {' '.join(changed)}")
    given = [o for o in [*setting.jobs[0].overrides, *overrides] if _key(o) == "reference"
             or _key(o).startswith("reference.")]  # fmt: skip
    if given:
        notes.append(f"the reference was changed on the command line: {' '.join(given)}")
    if ref.get("note"):
        notes.append(f"{ref.source}: {ref.note}")
    seeds = f"{len(values)} seed" + ("s" if len(values) > 1 else "")
    line = (
        f"{env_id} at {frames} frames: {row['iqm']:.4g}, 95% CI [{row['iqm_low']:.4g}, "
        f"{row['iqm_high']:.4g}] over {seeds}; {source}: {found}"
    )
    return Comparison(name, line, found, notes)


def compare_all(settings: Sequence[Setting], overrides: Sequence[str] = ()) -> list[Comparison]:
    return [c for s in settings if (c := compare(s, overrides)) is not None]


def section(comparisons: Sequence[Comparison]) -> str:
    """The report's reference section (empty without references)."""
    if not comparisons:
        return ""
    lines = []
    for c in comparisons:
        head = f"- {c.setting}: " if len(comparisons) > 1 else "- "
        lines.append(head + c.text().replace("\n  - ", "\n    - "))
    return (
        "\n## Reference\n\nThe IQM of the final value the reference names, its 95% bootstrap "
        "interval, and the published figure: below or above when the whole interval lies "
        "outside value ± spread.\n\n" + "\n".join(lines) + "\n"
    )
