"""Every command the docs show runs: the shell blocks of README.md and docs/ are run, page by
page, as a reader would type them (with a tiny budget), and the site builds in strict mode.

In a ```` ```bash ```` block each line is a command; in a ```` ```console ```` block each
``$ `` line is, and the lines under it are output that must appear (a shown ``error:`` means the
command must fail). ``RUN`` (or an ``outputs/<date>/<time>-<tag>`` folder) stands for the run
the page trained last, ``SWEEP`` (or ``outputs/multirun/...``) for its last sweep. A block
preceded by ``<!-- docs-test: skip REASON -->`` is not run and ``<!-- docs-test: cuda -->``
runs only where CUDA is (a page's such commands as one test, in order); each skipped command is
a skipped test of its own, so the summary lists it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from rlrun.cli import SUBCOMMANDS

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BIN = Path(sys.executable).parent
# mkdocs-material's notice about MkDocs 2, printed at every build
QUIET_MKDOCS = {"NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"}
OFFLINE = {"WANDB_MODE": "offline", "WANDB_SILENT": "true"}
# what a training command gets last: two batches of the PPO presets (a report needs two points)
BUDGET = ["trainer.total_frames=1024", "trainer.progress_bar=false"]
EVAL_BUDGET = "max_steps=50"  # what `rlrun eval` gets: short episodes (MuJoCo's run 1000 steps)
DIRECTIVE = re.compile(r"<!--\s*docs-test:\s*(?P<kind>skip|cuda)\s*(?P<why>.*?)\s*-->")
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w-]*)")
STAMP = r"\d{4}-\d\d-\d\d/\d\d-\d\d-\d\d-[0-9a-f]{6}"  # a run folder's date/time-tag
RUN_PATH = re.compile(rf"(?<![\w/])(?:outputs/{STAMP}|RUN)\b")
SWEEP_PATH = re.compile(rf"(?<![\w/])(?:outputs/multirun/{STAMP}|SWEEP)\b")
# the tutorial's pages share runs (a command typed again is not run again): one worker runs
# them in order; the other pages go to the other worker, with the site's build
TUTORIAL = (
    "README.md",
    "index.md",
    "getting-started.md",
    "mujoco.md",
    "errors.md",
    "batch.md",
    "recurrent.md",
)


@dataclass(frozen=True)
class Command:
    """One command of a page, what it must print, and whether it runs here."""

    page: str
    line: int
    text: str
    expected: tuple[str, ...] = ()
    skip: str | None = None
    cuda: bool = False

    def __str__(self) -> str:
        return f"{self.page}:{self.line}: {self.text}"


def blocks(page: Path) -> list[tuple[int, str, list[tuple[int, str]], re.Match | None]]:
    """``(line, language, [(line, text)], directive)`` of each fenced block of a page."""
    found = []
    lines = page.read_text().splitlines()
    directive, i = None, 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            if lines[i].strip():
                directive = DIRECTIVE.search(lines[i])
            i += 1
            continue
        start, body = i + 1, []
        i += 1
        while not lines[i].strip().startswith("```"):
            body.append((i + 1, lines[i][len(fence["indent"]) :]))
            i += 1
        found.append((start, fence["lang"], body, directive))
        directive, i = None, i + 1
    return found


def commands(page: Path) -> list[Command]:
    """The commands of a page's ``bash`` and ``console`` blocks, in order."""
    name = page.relative_to(ROOT).as_posix()
    found: list[Command] = []
    for _, lang, body, directive in blocks(page):
        skip = directive["why"] or "skipped" if directive and directive["kind"] == "skip" else None
        cuda = bool(directive and directive["kind"] == "cuda")
        if lang == "bash":
            for number, text in body:
                if text.strip() and not text.lstrip().startswith("#"):
                    found.append(Command(name, number, text.strip(), (), skip, cuda))
        elif lang == "console":
            for number, text in body:
                if text.startswith("$ "):
                    found.append(Command(name, number, text[2:].strip(), (), skip, cuda))
                elif text.strip() not in ("", "...") and found:
                    found[-1] = replace(found[-1], expected=(*found[-1].expected, text.strip()))
    return found


def budgeted(tokens: list[str]) -> list[str]:
    """A training ``rlrun`` command with :data:`BUDGET` after its last override (Hydra takes
    overrides as one block, so not after ``--cfg`` or ``--config-dir``); ``rlrun eval`` with
    :data:`EVAL_BUDGET` unless it sets ``max_steps``."""
    if "rlrun" not in tokens:
        return tokens
    at = tokens.index("rlrun")  # also python -m rlrun
    rest = tokens[at + 1 :]
    if rest[:1] == ["eval"] and not any(t.startswith("max_steps=") for t in rest):
        return [*tokens, EVAL_BUDGET]
    if not rest or rest[0] in SUBCOMMANDS or rest[0] in ("--help", "-h", "--hydra-help"):
        return tokens
    overrides = [i for i, t in enumerate(rest) if "=" in t and not t.startswith("-")]
    end = at + 1 + (overrides[-1] + 1 if overrides else len(rest))
    return [*tokens[:end], *BUDGET, *tokens[end:]]


@dataclass
class Reader:
    """A reader working through pages in one folder: the last run and sweep they made, and
    the commands already run (each distinct command runs once)."""

    cwd: Path
    run: Path | None = None
    sweep: Path | None = None
    done: dict[str, tuple[subprocess.CompletedProcess, Path | None, Path | None]] = field(
        default_factory=dict
    )

    def folders(self, pattern: str) -> set[Path]:
        return {p for p in self.cwd.glob(pattern) if p.is_dir()}

    def type(self, command: Command, budget: bool = True) -> subprocess.CompletedProcess:
        """Run ``command`` as the page shows it, its placeholders filled in (with
        :data:`BUDGET` if ``budget`` and it trains)."""
        line = shlex.join(shlex.split(command.text, comments=True))
        for pattern, folder in ((SWEEP_PATH, self.sweep), (RUN_PATH, self.run)):
            if pattern.search(line):
                assert folder is not None, f"{command}: the page made no such folder before"
                line = pattern.sub(str(folder.relative_to(self.cwd)), line)
        tokens = shlex.split(line)
        line = shlex.join(budgeted(tokens) if budget else tokens)
        if line in self.done:
            done, self.run, self.sweep = self.done[line]
            return done
        runs, sweeps = self.folders("outputs/2*/*"), self.folders("outputs/multirun/*/*")
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", **OFFLINE}
        done = subprocess.run(
            ["bash", "-c", line], cwd=self.cwd, capture_output=True, text=True, timeout=300, env=env
        )
        new = sorted(self.folders("outputs/2*/*") - runs)
        self.run = new[-1] if new else self.run
        new = sorted(self.folders("outputs/multirun/*/*") - sweeps)
        self.sweep = new[-1] if new else self.sweep
        self.done[line] = (done, self.run, self.sweep)
        return done


READERS: dict[str, Reader] = {}


def group_of(page: Path) -> str:
    """The xdist group of a page: :data:`TUTORIAL` or the others."""
    return "docs-tutorial" if page.name in TUTORIAL else "docs-guides"


def page_params() -> list:
    return [
        pytest.param(page, id=page.name, marks=pytest.mark.xdist_group(group_of(page)))
        for page in PAGES
    ]


@pytest.mark.parametrize("page", page_params())
def test_page_commands_run(page: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Each command a page shows exits as shown (0, or non-zero under an ``error:`` line) and
    prints the output shown under it."""
    group = group_of(page)
    if group not in READERS:
        cwd = tmp_path_factory.mktemp(group)
        (cwd / "examples").symlink_to(ROOT / "examples")
        READERS[group] = Reader(cwd)
    reader = READERS[group]
    for command in commands(page):
        if command.skip or command.cuda:
            continue
        fails = any("error:" in line for line in command.expected)
        started = time.monotonic()
        before = set(reader.cwd.rglob(".hydra"))  # the run and sweep folders so far
        done = reader.type(command, budget=not fails)  # a shown mistake is run as it is
        output = done.stdout + done.stderr
        took = time.monotonic() - started
        assert (done.returncode != 0) == fails, (
            f"{command}: exit {done.returncode} ({took:.1f} s)\n{output}"
        )
        if fails:  # a refusal leaves no run folder behind (docs/guides/errors.md)
            assert set(reader.cwd.rglob(".hydra")) == before, f"{command}: left a run folder"
        for line in command.expected:
            assert " ".join(line.split()) in " ".join(output.split()), (
                f"{command}: {line!r}\n{output}"
            )


def not_run() -> list:
    """Every command the docs show but do not run here, as a skipped test that says why."""
    return [
        pytest.param(c, id=f"{c.page}:{c.line}") for page in PAGES for c in commands(page) if c.skip
    ]


@pytest.mark.parametrize("command", not_run())
def test_commands_not_run_here(command: Command) -> None:
    """Listed in the summary: a command shown but not run here, and why."""
    pytest.skip(f"{command}: {command.skip}")


def cuda_pages() -> list:
    """Each page with ``cuda`` commands, as one test: they run in order (one may resume the
    run of the one before), whatever worker the test lands on."""
    return [
        pytest.param(page, id=page.name)
        for page in PAGES
        if any(c.cuda and not c.skip for c in commands(page))
    ]


@pytest.mark.cuda
@pytest.mark.parametrize("page", cuda_pages())
def test_cuda_commands(page: Path, tmp_path: Path) -> None:
    """A page's ``cuda`` commands, run where CUDA is (``pytest -m cuda``)."""
    reader = Reader(tmp_path)
    for command in commands(page):
        if command.cuda and not command.skip:
            done = reader.type(command)
            assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"


def test_every_block_says_its_language() -> None:
    """A code block without a language would escape the run: each one names it."""
    bare = [f"{p.name}:{line}" for p in PAGES for line, lang, _, _ in blocks(p) if not lang]
    assert not bare, f"fenced blocks without a language (bash, console, text, yaml, python): {bare}"


def generator():
    """``docs/gen_reference.py``, imported as mkdocs-gen-files runs it."""
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "docs/gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_config_key_has_a_comment() -> None:
    """The generated reference documents each key by its YAML comment: none may lack one."""
    pages, missing = generator().config_pages()
    assert not missing, f"config keys without a comment in rlrun/conf: {missing}"
    assert "`env.id`" in pages["reference/config.md"]


@pytest.mark.xdist_group("docs-guides")
def test_site_builds_strict(tmp_path: Path) -> None:
    """``make docs``: a broken link, a page missing from the nav or an undocumented key fails."""
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ, **QUIET_MKDOCS},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "reference" / "config" / "index.html").is_file()
    assert (tmp_path / "site" / "benchmarks" / "mujoco_learning.png").is_file()
