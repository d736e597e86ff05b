"""``rlrun export`` (rlrun/commands/export_files.py) on real runs trained by the console script: the
exported file, run by onnxruntime or ``torch.jit.load`` here, gives the actions of ``rlrun.load``'s
in-process policy on real observations, a recurrent one through its carried state."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from conftest import TINY, exported_file_runner, run_dirs, run_rlrun, summary

pytestmark = pytest.mark.xdist_group("export")  # the module's runs are trained once
ROOT = Path(__file__).resolve().parents[1]
TESTS_PATH = {"PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
RUNS = {
    "ppo": ["+experiment=ppo", *TINY],
    "sac": [
        "+experiment=sac",
        "trainer.total_frames=300",
        "collector.frames_per_batch=100",
        "collector.init_random_frames=200",
        "policy.hidden_sizes=[32,32]",
        "replay_buffer.batch_size=32",
        "trainer.progress_bar=false",
    ],
    "lstm": ["+experiment=ppo_lstm", *TINY],  # masked CartPole: env.obs_mask built in
    "norm": [
        "+experiment=ppo",
        *TINY,
        "env.normalize_observations=true",
        "eval=default",
        "eval.every_frames=1024",
    ],  # running observation statistics, built in
    "branching": ["+experiment=ppo", *TINY, "policy._target_=export_policies.build_branching"],
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    trained = {}
    for name, args in RUNS.items():
        root = tmp_path_factory.mktemp(name)
        run_rlrun(*args, cwd=root, env=TESTS_PATH)
        trained[name] = run_dirs(root)[0]
    return trained


@pytest.mark.parametrize(
    ("name", "fmt"),
    # each format once for a feed-forward policy (export.py's formats do not depend on it), both
    # for the recurrent one (TorchScript traces it at batch 1)
    [
        ("ppo", "onnx"),
        ("sac", "torchscript"),
        ("lstm", "onnx"),
        ("lstm", "torchscript"),
        ("norm", "onnx"),
    ],  # fmt: skip
)
def test_export_gives_the_in_process_actions(runs, name: str, fmt: str) -> None:
    import rlrun

    run = runs[name]
    proc = run_rlrun("export", str(run), f"format={fmt}", cwd=run)
    assert "verified on 128 real observations" in proc.stdout
    path = run / "export" / ("policy.onnx" if fmt == "onnx" else "policy.pt")
    specs = json.loads(Path(f"{path}.json").read_text())
    assert [i["name"] for i in specs["inputs"]][0] == "observation"
    policy = rlrun.load(run)
    exported = exported_file_runner(path)
    batch = 1 if specs["batch"] == 1 else 4
    env = policy.make_env(num_envs=batch).base_env  # raw observations: the file masks them
    raw = env.rollout(12, break_when_any_done=False)["observation"]  # random actions
    env.close()
    state = [torch.zeros(batch, *i["shape"][1:]) for i in specs["inputs"][1:-1]]
    mine = list(state)
    for t in range(raw.shape[1]):
        inputs = [raw[:, t]]
        if specs["recurrent"]:  # [observation, *state, is_init]; the first step resets
            is_init = torch.full((batch, 1), t == 0)
            got = exported(raw[:, t], *state, is_init)
            expected = policy(raw[:, t], *mine, is_init)
            state, mine = got[1:], list(expected[1:])
        else:
            got, expected = exported(*inputs), [policy(raw[:, t])]
        for a, b in zip(got, expected, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
    assert specs["observation"]["shape"] == list(raw.shape[2:])
    if name == "lstm":  # the preset masks the velocities, then normalises what is left
        mask, norm = specs["observation"]["built_in_transforms"]
        assert mask == {"class": "ObservationMask", "indices": [0, 2]}
        assert norm["class"] == "FrozenObservationNorm" and len(norm["loc"]) == 2
        assert specs["recurrent"]["state"] == ["actor_h", "actor_c"]
        assert specs["batch"] == (1 if fmt == "torchscript" else "any")
    if name == "norm":
        (norm,) = specs["observation"]["built_in_transforms"]
        assert norm["class"] == "FrozenObservationNorm" and len(norm["loc"]) == 4
    if name == "sac":
        assert specs["action"] == {"shape": [1], "encoding": "continuous", "low": -2.0, "high": 2.0}


def test_a_policy_without_a_graph_is_refused_in_one_line(runs) -> None:
    run = runs["branching"]
    proc = run_rlrun("export", str(run), "format=onnx", cwd=run, check=False, env=TESTS_PATH)
    assert proc.returncode == 2
    assert proc.stderr.startswith("rlrun: error: format=onnx: this policy cannot be expressed")
    assert "Traceback" not in proc.stderr
    assert not (run / "export").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["format=tflite"], "format=tflite is not valid; use format=onnx or format=torchscript"),
        ([], "format= is missing"),
        (["format=onnx", "device=cuda"], "loads the policy on the CPU; drop device="),
    ],
)
def test_bad_export_input_is_one_line_and_writes_nothing(runs, args, message: str) -> None:
    run = runs["ppo"]
    before = sorted(p.name for p in run.iterdir())
    proc = run_rlrun("export", str(run), *args, cwd=run, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("rlrun: error: ") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in run.iterdir()) == before


def test_normalised_observations_evaluate_with_the_checkpoints_statistics(runs) -> None:
    """``env.normalize_observations``: the running statistics come from the checkpoint, so the
    evaluation reproduces the in-run one."""
    run = runs["norm"]
    run_rlrun("eval", str(run), "episodes=5", cwd=run)
    (folder,) = (run / "eval").iterdir()
    result = json.loads((folder / "eval.json").read_text())
    assert result["return_mean"] == pytest.approx(summary(run)["eval_return_last"], abs=1e-4)
