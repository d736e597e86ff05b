"""The package's shape, checked: layers imported downward only, an algorithm named only in its
own module, a front end that answers without torch."""

from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

from rlrun.algorithms import shipped

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "rlrun"
BIN = Path(sys.executable).parent


def _skipped_lines(tree: ast.AST) -> set[int]:
    """Lines whose words are not rlrun's: docstrings (prose may name an algorithm) and imports
    of other packages (TorchRL's ``torchrl.objectives.ppo``)."""
    skipped = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = body[0] if body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    skipped.update(range(first.lineno, first.end_lineno + 1))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            modules.append(getattr(node, "module", None) or "rlrun")
            if not any(m.split(".")[0] == "rlrun" for m in modules):
                skipped.update(range(node.lineno, node.end_lineno + 1))
    return skipped


@functools.cache
def _tokens(path: Path) -> tuple[tokenize.TokenInfo, ...]:
    """The tokens of ``path`` outside its docstrings and other packages' imports, read once:
    the check asks each file about every algorithm's name."""
    source = path.read_text()
    skipped = _skipped_lines(ast.parse(source))
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return tuple(tok for tok in tokens if tok.start[0] not in skipped)


def mentions(path: Path, name: str, root: Path = ROOT, identifiers: bool = True) -> list[str]:
    """Where the code of ``path`` names algorithm ``name``: in a string (``"sac"``,
    ``"algo=sac"``, ``"rlrun.algorithms.sac"``; a preset, ``+experiment=sac``, is a YAML file
    of its own) or, with ``identifiers``, in a name (``make_sac_networks``); comments,
    docstrings and other packages' imports aside."""
    word = re.compile(rf"(?<!\w)(?<!experiment=){re.escape(name)}(?!\w)")
    found = []
    for tok in _tokens(path):
        if tok.type == tokenize.STRING and word.search(tok.string):
            found.append(f"{path.relative_to(root)}:{tok.start[0]}: {tok.string[:60]}")
        elif identifiers and tok.type == tokenize.NAME and name in tok.string.lower().split("_"):
            found.append(f"{path.relative_to(root)}:{tok.start[0]}: {tok.string}")
    return found


def test_an_algorithm_is_named_only_in_its_own_module() -> None:
    """No table, branch or import elsewhere in rlrun lists an algorithm: validation, the
    recipe, the learners and the docs read each algorithm's declaration."""
    names = set(shipped())
    assert {"ppo", "sac", "dqn"} <= names, names  # the test looks at real names
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        # an algorithm's module may use any words of its own (CQL's behaviour-cloning term,
        # ``bc_steps``), but not name another algorithm in a string or an import
        own = path.parent == PACKAGE / "algorithms"
        for name in names - {path.stem}:
            offenders += mentions(path, name, identifiers=not own)
            if own and f"rlrun.algorithms.{name}" in path.read_text():
                offenders.append(f"{path.relative_to(ROOT)}: imports rlrun.algorithms.{name}")
    assert not offenders, "algorithm names outside their module:\n" + "\n".join(offenders)


def test_the_check_sees_a_name(tmp_path: Path) -> None:
    """A table of names and a name-bearing factory are found; prose and comments are not."""
    planted = tmp_path / "table.py"
    planted.write_text(
        '"""About sac."""\n\nON_POLICY = ("ppo", "a2c")  # ppo\nmake_sac_networks = 1\n'
    )
    found = mentions(planted, "ppo", tmp_path) + mentions(planted, "sac", tmp_path)
    assert [m.split(": ", 1)[1] for m in found] == ['"ppo"', "make_sac_networks"]


def test_layers_import_downward_without_circles() -> None:
    """import-linter's contracts (pyproject.toml): cli > commands > run | commandline >
    validation > checks > algorithms > builders > folders > config | errors > compat, and no
    package whose modules import each other in a circle."""
    proc = subprocess.run(
        [BIN / "lint-imports", "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_the_front_end_reads_every_declaration_without_torch() -> None:
    """Config mistakes answer before torch, TensorDict or TorchRL are imported: the console
    script, the command-line checks and every algorithm's declaration are light."""
    code = (
        "import sys\n"
        "import rlrun.cli, rlrun.commandline, rlrun.validation\n"
        "from rlrun.algorithms import shipped\n"
        "assert all(a.schema for a in shipped().values())\n"
        "heavy = sorted(m for m in ('torch', 'tensordict', 'torchrl') if m in sys.modules)\n"
        "print(','.join(heavy))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "", f"imported at start: {proc.stdout.strip()}"


def test_a_run_imports_no_optional_package_it_does_not_use(workdir: Path) -> None:
    """TorchRL probes Ray, MuJoCo and torchsnapshot as its modules are imported; a PPO run on
    CartPole, and its evaluation, import none of them (``rlrun/builders/imports.py``
    ``unprobed``). A sweep keeps Ray's probe: its later jobs, in the same process, may use Ray.
    The MuJoCo, Ray and torchsnapshot tests run with them. Python's garbage collector is paused
    while they import torch and TorchRL (``collection_paused``; unpaused, 6 full passes walked
    the imports), then runs, with what was imported frozen out of its passes. A run keeps
    ``trainer.num_threads`` (1) to its end, a ParallelEnv's included: TorchRL raised it to 2
    when the collector closed the env after the last batch (``set_num_threads_kept``)."""
    code = (
        "import atexit, gc, runpy, sys\n"
        "probes = ('ray', 'mujoco', 'torchsnapshot', 'torchrl')\n"
        "atexit.register(lambda: print('imported:', *[m for m in probes if m in sys.modules],"
        " file=sys.stderr))\n"
        "atexit.register(lambda: print('gc:', gc.isenabled(), gc.get_freeze_count(),"
        " gc.get_stats()[2]['collections'], file=sys.stderr))\n"
        "atexit.register(lambda: print('threads:', sys.modules['torch'].get_num_threads(),"
        " file=sys.stderr))\n"
        "runpy.run_module('rlrun', run_name='__main__')\n"
    )
    tiny = ["+experiment=ppo", "trainer.total_frames=256", "collector.frames_per_batch=256",
            "trainer.progress_bar=false"]  # fmt: skip
    for args, imported, threads in (
        ([*tiny, "env.parallel=true", "env.num_envs=2", "hydra.run.dir=run"], "torchrl", "1"),
        (["eval", "run", "episodes=1"], "torchrl", None),
        (["-m", *tiny, "seed=0,1", "hydra.sweep.dir=sweep"], "ray torchrl", None),  # jobs: forks
    ):
        proc = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=workdir, capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        said = proc.stderr.strip().splitlines()
        assert said[-1] == f"imported: {imported}", proc.stderr[-2000:]
        enabled, frozen, full_passes = said[-2].split()[1:]
        assert enabled == "True" and int(frozen) > 100_000 and int(full_passes) <= 2, proc.stderr
        assert threads is None or said[-3] == f"threads: {threads}", proc.stderr[-2000:]
