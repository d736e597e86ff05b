"""The placement rule (rlrun/builders/devices.py): every device of a run from its config, decided
once.

The rule is pure, so it is checked here for CUDA machines too (``cuda_devices`` says how many GPUs
the process would see). The CUDA runs themselves are in test_cuda.py (``pytest -m cuda``).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import torch
from conftest import TINY, built, compose, run_dirs, run_rlrun, summary

from rlrun.builders import devices
from rlrun.builders.devices import OnDevice, placement
from rlrun.errors import ConfigError

CPU = torch.device("cpu")
GPU0, GPU1 = torch.device("cuda", 0), torch.device("cuda", 1)
PACKAGE = Path(devices.__file__).parent
TESTS_PATH = {"PYTHONPATH": str(Path(__file__).parent)}  # probe_hooks.py, in rlrun processes


def where(*overrides: str, gpus: int = 2):
    return placement(compose(*overrides), cuda_devices=gpus)


C, G0, G1 = CPU, GPU0, GPU1


@pytest.mark.parametrize(
    ("overrides", "gpus", "expected"),
    [
        # learner, collector policy, storing, replay storage, pinned samples, start method
        (["device=cpu"], 2, (C, C, C, C, False, "fork")),
        (["device=cuda"], 2, (G0, G0, G0, G0, False, "spawn")),
        (["device=cuda:1"], 2, (G1, G1, G1, G1, False, "spawn")),
        (["device=auto"], 0, (C, C, C, C, False, "fork")),
        (["device=auto"], 2, (G0, G0, G0, G0, False, "spawn")),
        (["device=cuda", "collector.device=cpu"], 2, (G0, C, G0, G0, False, "spawn")),
        (["device=cpu", "collector.device=cuda:1"], 2, (C, G1, C, C, False, "spawn")),
        (["device=cuda", "replay_buffer.device=cpu"], 2, (G0, G0, G0, C, True, "spawn")),
        (["device=cuda", "replay_buffer.storage=memmap"], 2, (G0, G0, G0, C, True, "spawn")),
        (["device=cuda", "replay_buffer.device=cuda:1"], 2, (G0, G0, G0, G1, False, "spawn")),
        (["device=cuda", "replay_buffer.device=cpu", "replay_buffer.pin_memory=false"], 2,
         (G0, G0, G0, C, False, "spawn")),
        (["device=cpu", "replay_buffer.pin_memory=true"], 2, (C, C, C, C, True, "fork")),
        (["device=cuda", "env.mp_start_method=forkserver"], 2,
         (G0, G0, G0, G0, False, "forkserver")),
    ],
)  # fmt: skip
def test_placement_rule(overrides: list[str], gpus: int, expected: tuple) -> None:
    w = where(*overrides, gpus=gpus)
    got = (w.learner, w.collector_policy, w.storing, w.replay, w.pin_memory, w.env_start_method)
    assert got == expected
    assert w.env == CPU, "gymnasium envs stay on the CPU, whatever the devices"
    assert w.eval_policy == w.learner, "evaluation steps a CPU env with the learner's policy"
    assert w.storing == w.learner, "batches reach the loss on the loss's device"


@pytest.mark.parametrize(
    ("overrides", "gpus", "said"),
    [
        (["replay_buffer.pin_memory=true"], 0, "CUDA is not available"),
        (["device=cuda", "replay_buffer.pin_memory=true"], 1, "the replay buffer is on cuda:0"),
    ],
)
def test_pin_true_where_nothing_can_be_pinned_warns_once_and_goes_on_unpinned(
    monkeypatch, overrides: list[str], gpus: int, said: str
) -> None:
    monkeypatch.setattr(devices, "_pin_warnings", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pins = [where(*overrides, gpus=gpus).pin_memory for _ in range(2)]
    assert pins == [False, False]
    messages = [str(w.message) for w in caught if "pin_memory=true" in str(w.message)]
    assert len(messages) == 1 and said in messages[0], messages


@pytest.mark.parametrize(
    ("overrides", "gpus", "message"),
    [
        (["device=cuda"], 0, "device=cuda but no CUDA device is available here; use device=cpu"),
        (["device=cuda:2"], 2, r"only 2 CUDA device\(s\) exist here \(cuda:0 to cuda:1\)"),
        (["device=tpu"], 2, "device=tpu is not valid; use cpu, cuda, cuda:N or auto"),
        (["device=mps"], 2, "device=mps is not supported"),
        (["collector.device=cuda"], 0, "collector.device=cuda but no CUDA device"),
        (["replay_buffer.device=cuda:1"], 1, "replay_buffer.device=cuda:1 but only 1 CUDA"),
        (["replay_buffer.pin_memory=yes"], 0, "replay_buffer.pin_memory=yes is not valid"),
        (
            ["device=cuda", "replay_buffer.device=cuda", "replay_buffer.storage=memmap"],
            1,
            "memmap storage lives on disk; use replay_buffer.device=cpu",
        ),
        (
            ["device=cuda", "env.parallel=true", "env.mp_start_method=fork"],
            1,
            "use env.mp_start_method=spawn",
        ),
        (["algo.cudagraphs=true"], 1, "algo.cudagraphs=true captures the update step"),
        (
            ["device=cuda", "collector.device=cpu", "policy.cudagraphs=true"],
            1,
            "policy.cudagraphs=true captures the collector's policy in a CUDA graph, but it runs "
            "on cpu",
        ),
    ],
)
def test_impossible_placements_are_config_errors(overrides, gpus, message) -> None:
    with pytest.raises(ConfigError, match=message):
        where(*overrides, gpus=gpus)


DECIDES_A_DEVICE = re.compile(r"torch\.device\(|\.cuda\(|torch\.cuda\.is_available|[\"']cuda[\"':]")


def test_no_other_module_decides_a_device() -> None:
    """Devices come from the placement: no other module names one or asks whether CUDA exists."""
    offenders = [
        f"{path.name}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "devices.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if DECIDES_A_DEVICE.search(line)
    ]
    assert offenders == []


def test_built_run_agrees_with_the_placement(tmp_path: Path) -> None:
    """Every object ``build_trainer`` makes sits where the placement says (here: the CPU)."""
    for preset in ("ppo", "dqn"):
        with built(tmp_path / preset, f"+experiment={preset}") as (cfg, trainer):
            w = placement(cfg)
            assert {p.device for p in trainer.loss_module.parameters()} == {w.learner}
            collector = trainer.collector
            assert collector.env.device in (None, w.env)
            assert collector.storing_device in (None, w.storing)
            assert collector.policy_device in (None, w.collector_policy)
            batch = next(iter(collector))
            assert {t.device for t in batch.values(True, True)} == {w.storing}
            if trainer.replay_buffer is not None:
                trainer.replay_buffer.extend(batch.reshape(-1))
                assert trainer.replay_buffer.storage.device == w.replay


def test_on_device_moves_inputs_there_and_outputs_back() -> None:
    """The evaluation wrapper: a CPU env's tensordict in, the actor's outputs back on the CPU."""
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    seen = []

    def act(obs: torch.Tensor) -> torch.Tensor:
        seen.append(obs.device)
        return obs.sum(-1, keepdim=True)

    module = TensorDictModule(act, ["observation"], ["action"])
    td = TensorDict({"observation": torch.ones(3, 4)}, batch_size=[3])
    out = OnDevice(module, CPU)(td)
    assert out is td and out["action"].device == CPU and seen == [CPU]
    assert torch.equal(out["action"], torch.full((3, 1), 4.0))
    assert devices.on_device(module, CPU) is module  # nothing to move on a CPU run


def _as_saved_on_cuda(checkpoint: Path) -> None:
    """Rewrite a CPU checkpoint as a run on ``cuda:0`` writes it: every tensor recorded on
    ``cuda:0`` (schemas and tensor metadata) and the CUDA generators' RNG state added."""
    for schema in checkpoint.glob("components/*/state.json"):
        schema.write_text(schema.read_text().replace('"device":"cpu"', '"device":"cuda:0"'))
    for meta in checkpoint.glob("components/*/state/meta.json"):
        entries = json.loads(meta.read_text())
        for entry in entries.values():
            if isinstance(entry, dict) and "device" in entry:
                entry["device"] = "cuda:0"
        meta.write_text(json.dumps(entries))
    (rng,) = checkpoint.glob("components/*-rng/state.json")
    state = json.loads(rng.read_text())
    generator = {"kind": "tensor", "key": "tensor_00000000", "device": "cpu"}
    state["items"].append(
        [{"kind": "value", "value": "torch_cuda"}, {"kind": "list", "items": [generator]}]
    )
    rng.write_text(json.dumps(state))
    from rlrun.folders.checkpoint_files import write_checksums

    write_checksums(checkpoint)  # the bytes changed on purpose


def test_run_saved_on_cuda_resumes_on_cpu(workdir: Path) -> None:
    """A checkpoint as a CUDA run writes it resumes with ``device=cpu`` on a machine with no GPU
    (TorchRL alone refuses: "Checkpoint contains CUDA RNG state but CUDA is unavailable")."""
    dqn = ["+experiment=dqn", "collector.frames_per_batch=128", "collector.init_random_frames=128",
           "trainer.progress_bar=false"]  # fmt: skip
    run_rlrun(*dqn, "trainer.total_frames=256", cwd=workdir)
    run = run_dirs(workdir)[0]
    (checkpoint,) = (run / "checkpoints").glob("checkpoint-*")
    _as_saved_on_cuda(checkpoint)
    proc = run_rlrun(f"resume={run}", "device=cpu", "trainer.total_frames=512", cwd=workdir)
    assert "Traceback" not in proc.stderr
    result = summary(run)
    assert result["status"] == "completed" and result["frames"] == 512


def test_tiny_run_on_cpu_through_the_placement_flushes_denormals_unless_told_not_to(
    workdir: Path,
) -> None:
    """``device=auto`` on a machine without CUDA is a CPU run, end to end; its floats below
    float32's smallest normal number are zero by default (``trainer.flush_denormal``), IEEE's
    with ``trainer.flush_denormal=false``, each job of one process as it says."""
    if torch.cuda.is_available():
        pytest.skip("checks the CPU fallback of device=auto")
    probe = ["+hooks.probe._target_=probe_hooks.Denormals", "+hooks.probe.at=post_steps",
             "+hooks.probe.path=flush_${trainer.flush_denormal}.txt"]  # fmt: skip
    run_rlrun("-m", "+experiment=ppo", *TINY, "device=auto", "trainer.flush_denormal=true,false",
              "hydra.sweep.dir=sweep", *probe, cwd=workdir, env=TESTS_PATH)  # fmt: skip
    for job in ("0", "1"):
        assert summary(workdir / "sweep" / job)["status"] == "completed"
    assert float((workdir / "flush_True.txt").read_text()) == 0.0
    assert 0.0 < float((workdir / "flush_False.txt").read_text()) < 1.2e-38
