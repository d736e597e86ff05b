"""``rlrun export RUN format=onnx|torchscript``: its command line, checked before torch is imported
(a wrong format or folder answers at once); ``rlrun/commands/export_files.py`` writes and verifies
the file."""

from __future__ import annotations

import json
import sys
from importlib.util import find_spec
from pathlib import Path

from rlrun.builders.imports import import_unprobed
from rlrun.errors import ConfigError
from rlrun.folders.run_dirs import run_config, run_folders, shown, split_options

USAGE = """\
Usage: rlrun export RUN format=onnx|torchscript [checkpoint=NAME] [KEY=VALUE ...]

Write RUN/export/policy.onnx (or policy.pt) and its JSON specs, checked against the in-process
policy on real observations.
  format=onnx          ONNX (onnxruntime runs it; pip install 'rlrun[export]')
  format=torchscript   TorchScript (torch.jit.load, libtorch)
  checkpoint=NAME      best | step_N | a checkpoint folder (default: the newest intact one)
  KEY=VALUE            a key of the run's saved config (the policy's shapes must not change)
"""
OPTIONS = ("format", "checkpoint")
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}  # the formats, and their files' suffixes


def main(args: list[str]) -> int:
    """``rlrun export``."""
    if not args or args[0] in ("--help", "-h"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    options, overrides = split_options(args[1:], OPTIONS, "export")
    fmt = options.get("format")
    if fmt not in SUFFIX:
        given = f"format={fmt} is not valid" if fmt else "format= is missing"
        raise ConfigError(f"rlrun export: {given}; use format=onnx or format=torchscript.")
    if fmt == "onnx" and not all(find_spec(m) for m in ("onnx", "onnxruntime", "onnxscript")):
        raise ConfigError("format=onnx needs the onnx packages: pip install 'rlrun[export]'.")
    if any(o.split("=", 1)[0].lstrip("+") == "device" for o in overrides):
        raise ConfigError("rlrun export loads the policy on the CPU; drop device=.")
    path = Path(args[0]).expanduser().absolute()
    (run_dir, *more) = run_folders(path, "export")
    if more or run_dir != path:
        raise ConfigError(
            f"rlrun export {path}: a sweep folder; export one of its jobs ({run_dir})."
        )
    cfg = run_config(run_dir, overrides, "cpu")  # its keys checked before torch is imported
    loading = import_unprobed("rlrun.commands.loading")  # TorchRL, without its probes
    from rlrun.commands.export_files import export

    trained = loading.rebuild(run_dir, cfg, options.get("checkpoint"))
    path = export(trained, fmt, f"policy{SUFFIX[fmt]}")
    specs = json.loads(Path(f"{path}.json").read_text())
    diffs = ", ".join(f"{k} {v:.2g}" for k, v in specs["verified"]["max_abs_diff"].items())
    print(f"rlrun export: {shown(path)} ({specs['verified']['runtime']}) and {path.name}.json")
    print(
        f"rlrun export: verified on {specs['verified']['rows']} real observations of "
        f"{trained.cfg.env.id} against the in-process policy: max |difference| {diffs}"
    )
    return 0
