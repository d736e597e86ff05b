"""Shared test helpers: run the real ``rlrun`` console script in a subprocess."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

RLRUN = str(Path(sys.executable).with_name("rlrun"))
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"  # my_lab, the user's own package

# A PPO run small enough for CI: 2 batches of 512 frames.
TINY = [
    "trainer.total_frames=1024",
    "collector.frames_per_batch=512",
    "algo.minibatch_size=128",
    "algo.epochs=1",
    "trainer.progress_bar=false",
]

# PPO in batches of 256 frames, a checkpoint after each: short runs to stop and resume
BATCH = 256
CHECKPOINTED = [
    "+experiment=ppo",
    f"collector.frames_per_batch={BATCH}",
    "env.num_envs=4",
    "algo.minibatch_size=128",
    "algo.epochs=1",
    "trainer.progress_bar=false",
    f"checkpoint.every_frames={BATCH}",  # a checkpoint after every batch
]


def run_rlrun(
    *args: str, cwd: Path, check: bool = True, timeout: float = 300, env: dict | None = None
) -> subprocess.CompletedProcess:
    """Run ``rlrun ARGS`` in ``cwd`` (its outputs/ folder lands there)."""
    full_env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", **(env or {})}
    proc = subprocess.run(
        [RLRUN, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"rlrun {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def run_in_session(
    *args: str, cwd: Path, timeout: float = 300
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """``rlrun ARGS`` in a session of its own, and the processes of that session still alive
    after it ended (see :func:`leftovers`)."""
    proc = subprocess.Popen(
        [RLRUN, *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return done, leftovers(proc.pid)


def _session(sid: int) -> Iterator[tuple[int, str]]:
    """``(pid, "state comm")`` of the live processes in session ``sid``: a run's children stay
    in it (worker processes, and a local Ray's GCS, raylet and workers)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # the process ended while we looked
        comm, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
        if int(fields[3]) == sid and fields[0] not in "ZX":
            yield int(stat.parent.name), f"{fields[0]} {comm}"


def session_processes(sid: int) -> list[str]:
    """``state comm`` of the live processes in session ``sid``."""
    return [what for _, what in _session(sid)]


def session_pids(sid: int) -> list[int]:
    """The pids of the live processes in session ``sid``."""
    return [pid for pid, _ in _session(sid)]


def leftovers(sid: int, grace_s: float = 10.0) -> list[str]:
    """Processes of session ``sid`` still alive after ``grace_s`` (time to finish exiting)."""
    deadline = time.monotonic() + grace_s
    while (alive := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def run_without(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The console script's entry point, ``rlrun ARGS``, in a process where ``module`` cannot be
    imported, as on a machine without its extra (``sys.modules[name] = None`` is Python's "not
    installed")."""
    code = (
        f"import sys; sys.modules[{module!r}] = None; from rlrun.cli import main; "
        f"sys.argv = ['rlrun', *{list(args)!r}]; main()"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def run_dirs(root: Path) -> list[Path]:
    """Run folders (those holding summary.json) under ``root/outputs``, oldest first."""
    return sorted(p.parent for p in (root / "outputs").rglob("summary.json"))


def csv_series(run_dir: Path, name: str) -> list[tuple[int, float]]:
    """A metric (e.g. ``eval/episode_return``) read back from the run's CSV logger:
    (frames, value) rows."""
    with (run_dir / "csv" / "scalars" / f"{name}.csv").open() as f:
        return [(int(float(step)), float(value)) for step, value in csv.reader(f)]


def series(run_dir: Path, name: str) -> list[tuple[int, float]]:
    """A ``train/<name>`` metric read back from the run's CSV logger."""
    return csv_series(run_dir, f"train/{name}")


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def compose(*overrides: str, job_name: str = "app"):
    """The config ``rlrun OVERRIDES`` would run (Hydra's compose API, rlrun's schemas), with
    the ``hydra`` node set up for code that reads it (its job named ``job_name``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from rlrun.commandline import register_configs

    GlobalHydra.instance().clear()
    register_configs()
    with initialize_config_module("rlrun.conf", version_base="1.3", job_name=job_name):
        return hydra_compose(
            config_name="config", overrides=list(overrides), return_hydra_config=True
        )


@contextmanager
def built(run_dir: Path, *overrides: str) -> Iterator[tuple]:
    """``(cfg, trainer)``: what ``rlrun OVERRIDES`` builds (no logger, no progress bar), built in
    this process; the collector is shut down afterwards."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from rlrun.builders.hooks import EpisodeStats
    from rlrun.run import build_trainer

    cfg = compose(*overrides, "logger=none", "trainer.progress_bar=false")
    HydraConfig.instance().set_config(cfg)
    OmegaConf.set_struct(cfg, False)
    del cfg["hydra"]
    trainer = build_trainer(cfg, run_dir, EpisodeStats())
    try:
        yield cfg, trainer
    finally:
        trainer.collector.shutdown()


def cpu_placement(**changes):
    """An all-CPU ``Placement`` (what ``device=cpu`` gives), for builders tested on their own."""
    import dataclasses

    from rlrun.builders.devices import Placement

    return dataclasses.replace(Placement.on_cpu(), **changes)


# Run first (``make test`` is ``pytest -n 2 --dist loadgroup``, which hands out work in this
# order): an xdist group runs whole on one worker, so the groups (the Ray group alone is about
# 5 worker-minutes, 2026-11-25), then the long files; a long unit left for the end keeps one
# worker busy while the other idles
GROUPS_FIRST = ("ray", "docs-tutorial", "docs-guides", "sweeps", "hooks")
LONG_FILES = ("test_updates.py", "test_folder_lock.py", "test_loggers.py", "test_offline.py",
              "test_algorithms.py")  # fmt: skip


def pytest_collection_modifyitems(config, items) -> None:
    """Long groups and tests first; ``@pytest.mark.cuda`` tests run where CUDA is (``pytest -m
    cuda`` on a GPU machine) and are skipped, saying so, everywhere else."""
    import torch

    def rank(item: pytest.Item) -> tuple[int, int]:
        group = next((m.args[0] for m in item.iter_markers("xdist_group")), None)
        if group is not None:
            return 0, GROUPS_FIRST.index(group) if group in GROUPS_FIRST else len(GROUPS_FIRST)
        name = item.path.name
        return 1, LONG_FILES.index(name) if name in LONG_FILES else len(LONG_FILES)

    items.sort(key=rank)  # stable: collection order within each rank
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def random_datasets(tmp_path: Path, monkeypatch) -> dict[str, str]:
    """Minari datasets of random play for the offline presets, by env id, in a
    MINARI_DATASETS_PATH of this test's own (restored after it)."""
    minari = pytest.importorskip("minari")
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer

    from rlrun.commands.record import Player

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "datasets"))
    ids = {}
    for env_id in ("Pendulum-v1", "CartPole-v1"):
        env = gym.make(env_id)
        player = Player(None, env, 0.0, 0)
        played = [EpisodeBuffer(id=i, **player.episode(i, 0.0, random=True)) for i in range(2)]
        ids[env_id] = f"test/{env_id.lower()}/random-v0"
        minari.create_dataset_from_buffers(
            dataset_id=ids[env_id], buffer=played, env=env.spec, algorithm_name="random"
        )
    return ids


def exported_file_runner(path: Path):
    """The exported file as a function of tensors, run the way a user without rlrun runs it."""
    import torch

    if path.suffix == ".onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        return lambda *xs: [
            torch.from_numpy(o)
            for o in session.run(None, {n: x.numpy() for n, x in zip(names, xs, strict=True)})
        ]
    module = torch.jit.load(str(path))
    return lambda *xs: list(out) if isinstance(out := module(*xs), tuple) else [out]


def forward_calls(monkeypatch: pytest.MonkeyPatch, loss_class: type) -> list[type]:
    """The types of the losses whose ``forward`` reached ``loss_class.forward`` (each call
    recorded, then run unchanged): whether a loss with a direct path took TorchRL's."""
    calls: list[type] = []
    forward = loss_class.forward

    def counted(self, tensordict):
        calls.append(type(self))
        return forward(self, tensordict)

    monkeypatch.setattr(loss_class, "forward", counted)
    return calls
