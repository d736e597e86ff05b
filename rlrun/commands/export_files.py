"""``rlrun export RUN format=onnx|torchscript``: the trained actor as a file that runs without
TorchRL (ONNX Runtime, or libtorch / ``torch.jit.load``), next to a JSON file of its specs.

The file holds the deterministic actor on plain tensors (``rlrun.commands.loading.TensorPolicy``):
the raw observation in (the env's observation transforms, e.g. ``env.obs_mask``, are built in), the
action out (the distribution's mode); an actor that honours the env's action mask also takes
``action_mask``; a recurrent actor also takes ``is_init`` and its hidden state and returns the
next state. The graph comes from ``torch.export`` (strict, the batch dimension
dynamic), then ``torch.onnx.export`` or ``torch.jit.trace``. TorchScript's tracer records an RNN's
reshapes with the traced batch size, so a recurrent actor's TorchScript file takes one observation
at a time (its JSON says ``"batch": 1``).

Right after export the file is loaded back from disk and run (onnxruntime, ``torch.jit.load``) on
real observations: the in-process policy acts in its env for a few steps, and the file must give
the same actions (and next states) from the same raw observations, within :data:`ATOL` +
:data:`RTOL` x |expected| for floats and exactly for integers. Only then are ``<run>/export/
policy.<ext>`` and ``policy.<ext>.json`` written; otherwise nothing is.
"""

from __future__ import annotations

import io
import json
import logging
import math
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, redirect_stderr
from pathlib import Path
from typing import Any

import torch

from rlrun.commands.loading import TensorPolicy, Trained
from rlrun.errors import ConfigError, RunError

ATOL, RTOL = 1e-5, 1e-4  # float outputs: |file - in-process| <= ATOL + RTOL * |in-process|
SAMPLE_ENVS, SAMPLE_STEPS = 4, 32  # real observations: 4 envs side by side, 32 steps each
RAW = "raw_observation"  # the observation before the env's transforms, recorded for the check


def real_samples(trained: Trained, policy: TensorPolicy) -> tuple[tuple, tuple]:
    """The in-process policy acting in its env (deterministic, as in evaluation): the file's
    inputs (raw observations, recurrent state and ``is_init`` as the env gave them) and the
    outputs it must reproduce, ``SAMPLE_ENVS * SAMPLE_STEPS`` rows."""
    from torchrl.envs import RenameTransform
    from torchrl.envs.utils import ExplorationType, set_exploration_type

    observation = policy.in_keys[0]
    env = trained.make_env(num_envs=SAMPLE_ENVS)
    env.insert_transform(0, RenameTransform([observation], [RAW], create_copy=True))
    try:
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            td = env.rollout(SAMPLE_STEPS, trained.policy, break_when_any_done=False)
    finally:
        env.close()
    td = td.reshape(-1)
    inputs = tuple(td.get(RAW if k == observation else k) for k in policy.in_keys)
    return inputs, tuple(td.get(k) for k in policy.out_keys)


def export_program(policy: TensorPolicy, inputs: tuple, dynamic: bool) -> Any:
    """``torch.export`` of the plain-tensor actor, its batch dimension dynamic (or fixed)."""
    batch = torch.export.Dim("batch")
    shapes = (tuple({0: batch} for _ in inputs),) if dynamic else None
    return torch.export.export(policy, inputs, dynamic_shapes=shapes, strict=True)


@contextmanager
def quiet_exporters() -> Iterator[None]:
    """The exporters' own chatter: torch.export prints a failed graph to stderr (rlrun says why
    in one line instead), TorchScript warns that the traced guards became constants (the file is
    checked right after), torch.onnx logs optional operator sets it skips."""
    logging.getLogger("torch.onnx").setLevel(logging.ERROR)
    logging.getLogger("torch.export").setLevel(logging.CRITICAL)
    with warnings.catch_warnings(), redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore", category=FutureWarning)
        warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
        yield


def write_onnx(program: Any, inputs: tuple, policy: TensorPolicy, path: Path) -> None:
    torch.onnx.export(
        program,
        inputs,
        str(path),
        input_names=policy.input_names,
        output_names=policy.output_names,
        dynamo=True,
        external_data=False,
        verbose=False,
    )


def run_onnx(path: Path) -> Any:
    """The file as onnxruntime runs it: tensors in, tensors out."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        feed = {n: t.numpy() for n, t in zip(names, tensors, strict=True)}
        return tuple(torch.from_numpy(out) for out in session.run(None, feed))

    return run


def run_torchscript(path: Path) -> Any:
    module = torch.jit.load(str(path))

    def run(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = module(*tensors)
        return out if isinstance(out, tuple) else (out,)

    return run


def max_differences(got: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], names) -> dict:
    """Largest |file - in-process| per output; raises when one is out of tolerance."""
    diffs = {}
    for name, a, b in zip(names, got, expected, strict=True):
        if a.shape != b.shape:
            raise RunError(
                f"the exported file's {name} has shape {list(a.shape)}, the in-process policy's "
                f"{list(b.shape)}; nothing was written."
            )
        if b.is_floating_point():
            bad = (a - b).abs() > ATOL + RTOL * b.abs()
        else:
            bad = a.to(b.dtype) != b
        diffs[name] = float((a.double() - b.double()).abs().max())
        if bad.any():
            raise RunError(
                f"the exported file's {name} differs from the in-process policy's on "
                f"{int(bad.sum())} of {b.numel()} values (max |difference| {diffs[name]:.3g}; "
                f"tolerance {ATOL:g} + {RTOL:g} x |value|); nothing was written."
            )
    return diffs


def verify(run: Any, inputs: tuple, expected: tuple, names: list[str], batch: int | None) -> dict:
    """Run the file on every sample: all at once and one by one (``batch=None``: any batch
    size), or ``batch`` rows at a time; the largest difference per output."""
    rows = len(inputs[0])
    chunks = (
        [(0, rows), (0, 1)] if batch is None else [(i, i + batch) for i in range(0, rows, batch)]
    )
    worst: dict[str, float] = {}
    with torch.no_grad():
        for start, stop in chunks:
            got = run(*(t[start:stop] for t in inputs))
            diffs = max_differences(got, [t[start:stop] for t in expected], names)
            worst = {n: max(worst.get(n, 0.0), d) for n, d in diffs.items()}
    return {"rows": rows, "batch_sizes": sorted({b - a for a, b in chunks}), "max_abs_diff": worst}


def _bounds(values: torch.Tensor) -> Any:
    """Spec bounds for JSON: one number when uniform, else a flat list; infinities as strings."""
    flat = [x if math.isfinite(x) else str(x) for x in values.double().flatten().tolist()]
    return flat[0] if len(set(flat)) == 1 else flat


def _tensor_entry(name: str, tensor: torch.Tensor, batch: int | None) -> dict:
    return {
        "name": name,
        "shape": [batch or "batch", *tensor.shape[1:]],
        "dtype": str(tensor.dtype).removeprefix("torch."),
    }


def described(
    trained: Trained, policy: TensorPolicy, specs: tuple, samples: tuple, index: int
) -> tuple[dict, dict]:
    """The observation and the action of one group (``index``, in the policy's order): the raw
    observation's spec and built-in transforms, the action's shape and encoding."""
    from torchrl.data import OneHot

    raw, action = specs
    inputs, outputs = samples
    one = raw[(0,) * (raw.ndim - len(inputs[index].shape[1:]))]
    if isinstance(action, OneHot):
        encoding = {"encoding": "one_hot", "n": int(action.shape[-1])}
    elif action.domain == "discrete":
        encoding = {"encoding": "index", "n": int(action.space.n)}
    else:
        encoding = {
            "encoding": "continuous",
            "low": _bounds(action.space.low[(0,) * (action.ndim - 1)]),
            "high": _bounds(action.space.high[(0,) * (action.ndim - 1)]),
        }
    observation = {
        "env_id": trained.cfg.env.id,
        "shape": list(one.shape),
        "dtype": str(one.dtype).removeprefix("torch."),
        "low": _bounds(one.space.low) if hasattr(one.space, "low") else None,
        "high": _bounds(one.space.high) if hasattr(one.space, "high") else None,
        "built_in_transforms": [
            {"class": type(t).__name__, **{k: v.tolist() for k, v in t.state_dict().items()}}
            for t in policy.pipeline
        ],
    }
    return observation, {"shape": list(outputs[index].shape[1:]), **encoding}


def sidecar(
    trained: Trained, policy: TensorPolicy, samples: tuple, fmt: str, name: str, batch: int | None
) -> dict:
    """What a program needs to feed the file and read its output, beyond the file itself. A
    team of several groups: ``observation`` and ``action`` per group, under ``groups``."""
    import torchrl

    import rlrun

    env = trained.make_env()
    try:
        specs = [
            (env.base_env.observation_spec[policy.in_keys[i]], env.full_action_spec[action])
            for i, action in enumerate(policy.out_keys[: policy.groups])
        ]
    finally:
        env.close()
    blocks = [described(trained, policy, spec, samples, i) for i, spec in enumerate(specs)]
    inputs, outputs = samples
    if policy.groups == 1:
        (observation, action), groups = blocks[0], None
    else:
        observation = action = None
        groups = {
            key[0]: {"observation": seen, "action": done}
            for key, (seen, done) in zip(policy.out_keys[: policy.groups], blocks, strict=True)
        }
    state = [n for n in policy.input_names[1:] if n not in ("is_init", *policy.mask_names)]
    return {
        "format": fmt,
        "file": name,
        "inputs": [
            _tensor_entry(n, t, batch) for n, t in zip(policy.input_names, inputs, strict=True)
        ],
        "outputs": [
            _tensor_entry(n, t, batch) for n, t in zip(policy.output_names, outputs, strict=True)
        ],
        "batch": batch or "any",
        "observation": observation,
        "action": action,
        "groups": groups,
        "action_mask": f"{', '.join(policy.mask_names)}: the env's action_mask, true where an "
        "action is legal; the action is the most likely legal one"
        if policy.mask_names
        else None,
        "deterministic": "the action distribution's mode (TorchRL ExplorationType.DETERMINISTIC)",
        "recurrent": {
            "state": state,
            "reset": "is_init: true on an episode's first step zeroes the state",
            "initial_state": "zeros",
        }
        if policy.recurrent
        else None,
        "source": {
            "run": str(trained.run_dir),
            "checkpoint": str(trained.checkpoint),
            "frames": trained.frames,
            "algo": trained.cfg.algo.get("name"),
        },
        "versions": {
            "rlrun": rlrun.__version__,
            "torch": torch.__version__,
            "torchrl": torchrl.__version__,
        },
    }


def export(trained: Trained, fmt: str, name: str) -> Path:
    """Write, verify, then publish ``<run>/export/policy.<ext>`` and its JSON; the file's path."""
    policy = TensorPolicy(trained).eval()
    inputs, expected = real_samples(trained, policy)
    batch = 1 if fmt == "torchscript" and policy.recurrent else None
    example = tuple(t[:batch] for t in inputs) if batch else inputs
    with tempfile.TemporaryDirectory(prefix="rlrun-export-") as tmp:
        staged = Path(tmp) / name
        try:
            with quiet_exporters():
                program = export_program(policy, example, dynamic=batch is None)
                if fmt == "onnx":
                    write_onnx(program, example, policy, staged)
                else:
                    torch.jit.trace(program.module(), example).save(str(staged))
        except Exception as err:  # the exporters' own errors: say which and why, in one line
            first = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ConfigError(
                f"format={fmt}: this policy cannot be expressed as {fmt}: {type(err).__name__}: "
                f"{first} (export needs a forward torch.export can capture: no Python branches "
                "on tensor values)"
            ) from None
        run = run_onnx(staged) if fmt == "onnx" else run_torchscript(staged)
        checked = verify(run, inputs, expected, policy.output_names, batch)
        runtime = "onnxruntime" if fmt == "onnx" else "torch.jit.load"
        specs = sidecar(trained, policy, (inputs, expected), fmt, name, batch)
        specs["verified"] = {
            "runtime": runtime,
            "against": "the in-process policy acting deterministically in its env",
            "tolerance": f"|file - in-process| <= {ATOL:g} + {RTOL:g} * |in-process| (floats); "
            "equal (integers)",
            **checked,
        }
        (Path(tmp) / f"{name}.json").write_text(json.dumps(specs, indent=2) + "\n")
        folder = trained.run_dir / "export"
        folder.mkdir(exist_ok=True)
        for file in (name, f"{name}.json"):
            shutil.move(Path(tmp) / file, folder / file)
    return folder / name
