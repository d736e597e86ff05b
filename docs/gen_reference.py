"""The reference pages, generated at every ``make docs`` from the code, so they are never written
twice: every config key (its default and comment from ``rlrun/conf/**/*.yaml``, its type, range
and choices from ``rlrun/config.py``), every command's help (``rlrun/cli.py``'s ``SUBCOMMANDS``)
and the ``rlrun.load`` API (mkdocstrings).

mkdocs-gen-files runs this file during the build; ``tests/test_docs.py`` imports it to check
that every key has a comment.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import sys
import types
import typing
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from rlrun.cli import SUBCOMMANDS
from rlrun.commandline import register_configs
from rlrun.config import RootConfig

CONF = Path(__file__).resolve().parent.parent / "rlrun" / "conf"
KEY_LINE = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z_+][\w.+/-]*):(?P<rest>.*)$")
# groups whose options are whole presets or plugin settings, not keys of rlrun's schema
PRESET_GROUPS = ("experiment", "hparams_search")


def split_comment(text: str) -> tuple[str, str | None]:
    """``value  # comment`` split at the first ``#`` outside quotes that follows a space."""
    quote = None
    for i, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or text[i - 1] == " "):
            return text[:i].strip(), text[i + 1 :].strip()
    return text.strip(), None


def yaml_comments(path: Path) -> tuple[str, dict[str, str]]:
    """A YAML file's header comment and each key's comment by dotted path (a comment line
    indented under a key's comment continues it); keys of the defaults list are skipped."""
    header: list[str] = []
    comments: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last: str | None = None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            if not stack and last is None:
                if not stripped.startswith("# @package"):
                    header.append(stripped[1:].strip())
            elif last is not None and line.startswith(" ") and last in comments:
                comments[last] += " " + stripped[1:].strip()
            continue
        match = KEY_LINE.match(line)
        if not match:
            continue
        indent = len(match["indent"])
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"]))
        last = ".".join(key for _, key in stack)
        _, comment = split_comment(match["rest"])
        if comment and not last.startswith("defaults"):
            comments[last] = comment
    return " ".join(header), comments


def options(group: Path) -> list[Path]:
    """A group's option files (``_base.yaml`` holds defaults, it is not an option)."""
    return sorted(p for p in group.glob("*.yaml") if not p.name.startswith("_"))


def schema_of(group: str, option: Path) -> type | None:
    """The dataclass that types an option: the ``rlrun_*_schema`` its defaults list names,
    else the root schema's field for the group."""
    raw = OmegaConf.load(option)
    for entry in raw.get("defaults", []):
        if isinstance(entry, str) and entry.startswith("rlrun_"):
            node = ConfigStore.instance().load(f"{group}/{entry}.yaml").node
            return OmegaConf.get_type(node)
    field = {f.name: f for f in dataclasses.fields(RootConfig)}.get(group)
    factory = field.default_factory if field else None
    return factory if dataclasses.is_dataclass(factory) else None


def type_name(hint: Any) -> tuple[str, str]:
    """A type hint as (type, allowed choices)."""
    members = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    optional = " | None" if type(None) in members else ""
    base = next(m for m in members if m is not type(None))
    if isinstance(base, type) and issubclass(base, Enum):
        return "choice" + optional, ", ".join(f"`{m.value}`" for m in base)
    if dataclasses.is_dataclass(base):
        return "mapping" + optional, ""
    if typing.get_origin(base) is None:
        return getattr(base, "__name__", str(base)) + optional, ""
    return str(base).replace("typing.", "") + optional, ""


def schema_rows(schema: type, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """``(key, type, range, choices)`` of every field of a dataclass, nested ones flattened."""
    hints = typing.get_type_hints(schema)
    for field in dataclasses.fields(schema):
        key = prefix + field.name
        kind, choices = type_name(hints[field.name])
        limits = field.metadata.get("range")
        yield key, kind, str(limits) if limits else "", choices
        inner = [a for a in typing.get_args(hints[field.name]) if dataclasses.is_dataclass(a)]
        if inner:
            yield from schema_rows(inner[0], key + ".")


def value_at(cfg: Any, key: str) -> Any:
    """The value at a dotted key of a raw YAML node, or ``...`` when absent."""
    node = cfg
    for part in key.split("."):
        if not OmegaConf.is_dict(node) or part not in node:
            return ...
        node = node._get_node(part)
    return OmegaConf.to_container(node) if OmegaConf.is_config(node) else node._value()


def typed(value: Any) -> str:
    """A YAML value in flow style, as it would be typed on the command line."""
    if isinstance(value, bool) or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, list):
        return "[" + ", ".join(typed(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {typed(v)}" for k, v in value.items()) + "}"
    return str(value)


def shown(value: Any) -> str:
    """A value for a table cell (``...``: none)."""
    return "" if value is ... else f"`{typed(value)}`".replace("|", "\\|")


def cell(text: str | None) -> str:
    """Text made safe inside a Markdown table cell."""
    return (text or "").replace("|", "\\|")


def group_page(group: Path, name: str, missing: list[str]) -> str:
    """One config group: its keys (default, type, range, choices, comment) and its options."""
    base = group / "_base.yaml"
    files = ([base] if base.exists() else []) + options(group)
    parsed = {f: (*yaml_comments(f), OmegaConf.load(f)) for f in files}
    lines = [f"## `{name}`", ""]
    if base.exists():
        lines += [parsed[base][0], ""]
    by_schema: dict[type | None, list[Path]] = {}
    for option in options(group):
        by_schema.setdefault(schema_of(name, option), []).append(option)
    for schema, members in by_schema.items():
        if schema is None:  # plugin settings, hooks: each option's own keys
            for option in members:
                header, comments, raw = parsed[option]
                for key in raw:  # a hook's file: its header says what the hook is
                    comments.setdefault(str(key), header)
                lines += [f"### `{name}={option.stem}`", "", header, ""]
                lines += key_table(name, [option], parsed, plain_rows(parsed[option][2]), missing)
            continue
        sources = files if len(by_schema) == 1 else [*members, *files]
        if len(by_schema) > 1:
            lines += [f"### Keys of {', '.join(f'`{name}={m.stem}`' for m in members)}", ""]
        lines += key_table(name, sources, parsed, schema_rows(schema), missing)
    lines += ["### Options", "", "| option | sets | what it is |", "|---|---|---|"]
    for option in options(group):
        header, _, raw = parsed[option]
        sets = ", ".join(
            f"`{k}={shown(v)[1:-1]}`"
            for k, v in flat(OmegaConf.to_container(raw)).items()
            if not k.startswith("defaults")
        )
        lines.append(f"| `{name}={option.stem}` | {cell(sets)} | {cell(header)} |")
    return "\n".join(lines) + "\n"


def key_table(
    group: str,
    sources: list[Path],
    parsed: dict[Path, tuple[str, dict[str, str], Any]],
    rows: Iterator[tuple[str, str, str, str]],
    missing: list[str],
) -> list[str]:
    """A table of keys: the default is the first source's value, the comment the first found
    on the key or a key above it (``missing`` gets the keys that have none)."""
    lines = ["| key | default | type | allowed | what it does |", "|---|---|---|---|---|"]
    for key, kind, limits, choices in rows:
        above = [".".join(key.split(".")[:n]) for n in range(key.count(".") + 1, 0, -1)]
        comment = next((parsed[f][1][k] for k in above for f in sources if k in parsed[f][1]), None)
        if comment is None:
            missing.append(f"{group}.{key}")
        found = (value_at(parsed[f][2], key) for f in sources)
        default = next((v for v in found if v is not ...), ...)
        allowed = " ".join(filter(None, [choices, limits]))
        row = [f"`{group}.{key}`", shown(default), cell(kind), allowed, cell(comment)]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


def flat(node: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{dotted key: leaf value}``."""
    if not isinstance(node, dict) or not node:
        return {prefix[:-1]: node} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flat(value, f"{prefix}{key}."))
    return out


def plain_rows(raw: Any) -> Iterator[tuple[str, str, str, str]]:
    """Rows of an option without a schema (hooks, Hydra's launchers): its leaf keys."""
    for key in flat(OmegaConf.to_container(raw)):
        if not key.startswith("defaults") and key != "_target_":
            yield key, "", "", ""


FIELD_COMMENT = re.compile(r"^    (?P<key>\w+): [^#]*#\s*(?P<comment>.*)$")


def schema_comments(schema: type) -> dict[str, str]:
    """A dataclass's fields' trailing comments in ``rlrun/config.py``: the only place where a
    block that no ``_base.yaml`` holds (a preset's ``reference:``) documents its keys."""
    import inspect

    found = (FIELD_COMMENT.match(line) for line in inspect.getsource(schema).splitlines())
    return {m["key"]: m["comment"] for m in found if m}


def block_section(name: str, schema: type, missing: list[str]) -> list[str]:
    """The keys of a top-level block typed by ``schema`` (no group, no YAML defaults)."""
    comments = schema_comments(schema)
    lines = ["", f"## `{name}`", "", cell(schema.__doc__ and " ".join(schema.__doc__.split())), ""]
    lines += ["| key | type | allowed | what it does |", "|---|---|---|---|"]
    for key, kind, limits, choices in schema_rows(schema, f"{name}."):
        short = key.rsplit(".", 1)[1]
        if short not in comments:
            missing.append(key)
        allowed = ", ".join(x for x in (limits, choices) if x)
        lines.append(f"| `{key}` | {cell(kind)} | {allowed} | {cell(comments.get(short))} |")
    return lines


def root_page(missing: list[str]) -> str:
    """The top-level keys of ``config.yaml`` and the groups it composes."""
    header, comments = yaml_comments(CONF / "config.yaml")
    raw = OmegaConf.load(CONF / "config.yaml")
    lines = [
        "# Configuration",
        "",
        "Generated from `rlrun/conf/` (defaults and comments) and `rlrun/config.py` (types,",
        "ranges, choices) at every `make docs`. Override any key on the command line:",
        "`rlrun +experiment=ppo optim.lr=1e-3`; pick a group's option: `rlrun env=pendulum`.",
        "",
        header,
        "",
        "## Top-level keys",
        "",
        "| key | default | type | allowed | what it does |",
        "|---|---|---|---|---|",
    ]
    for field in dataclasses.fields(RootConfig):
        if field.name not in raw:
            continue  # a group: its own section
        kind, choices = type_name(typing.get_type_hints(RootConfig)[field.name])
        if field.name not in comments:
            missing.append(field.name)
        row = [f"`{field.name}`", shown(value_at(raw, field.name)), cell(kind), choices]
        lines.append("| " + " | ".join([*row, cell(comments.get(field.name))]) + " |")
    hints = typing.get_type_hints(RootConfig)
    for field in dataclasses.fields(RootConfig):
        inner = [a for a in typing.get_args(hints[field.name]) if dataclasses.is_dataclass(a)]
        if field.name in raw and inner:
            lines += block_section(field.name, inner[0], missing)
    lines += ["", "## Groups", "", "| group | default option |", "|---|---|"]
    for entry in OmegaConf.to_container(raw.defaults):
        for group, option in entry.items() if isinstance(entry, dict) else ():
            page = "presets.md" if group in PRESET_GROUPS else ""
            lines.append(f"| [`{group}`]({page}#{group.replace('/', '')}) | {shown(option)} |")
    return "\n".join(lines) + "\n"


def presets_page() -> str:
    """The experiment presets and search presets, each file shown as it is."""
    lines = ["# Presets", "", "Each preset, as its file in `rlrun/conf/` holds it.", ""]
    for name in PRESET_GROUPS:
        lines += [f"## `{name}`", ""]
        for option in options(CONF / name):
            header, _ = yaml_comments(option)
            lines += [f"### `+{name}={option.stem}`", "", header, "", "```yaml"]
            lines += [option.read_text().rstrip(), "```", ""]
    return "\n".join(lines)


def config_pages() -> tuple[dict[str, str], list[str]]:
    """``{path: markdown}`` of the config reference, and the keys that have no comment."""
    register_configs()
    missing: list[str] = []
    text = root_page(missing)
    groups = sorted(p for p in CONF.iterdir() if p.is_dir() and not p.name.startswith("_"))
    groups = [g for g in groups if g.name not in PRESET_GROUPS and g.name != "hydra"]
    groups += sorted((CONF / "hydra").iterdir())
    for group in groups:
        name = group.relative_to(CONF).as_posix()
        text += "\n" + group_page(group, name, missing)
    return {"reference/config.md": text, "reference/presets.md": presets_page()}, missing


def help_of(*args: str) -> str:
    """What ``rlrun ARGS --help`` prints, from the installed console script's module."""
    done = subprocess.run(
        [sys.executable, "-m", "rlrun", *args, "--help"], capture_output=True, text=True
    )
    return done.stdout or done.stderr


def commands_page() -> str:
    """``rlrun --help`` and each subcommand's help and module docstring."""
    lines = ["# Commands", "", "Generated from each command's own `--help`.", "", "## `rlrun`", ""]
    lines += ["```text", help_of().rstrip(), "```", ""]
    for name, module in SUBCOMMANDS.items():
        doc = sys.modules[module].__doc__ if module in sys.modules else None
        if doc is None:
            __import__(module)
            doc = sys.modules[module].__doc__ or ""
        lines += [f"## `rlrun {name}`", "", f"`{module}`: " + doc.strip(), ""]
        lines += ["```text", help_of(name).rstrip(), "```", ""]
    return "\n".join(lines)


def algorithms_page() -> str:
    """Every shipped algorithm as its declaration states it (``rlrun/algorithms/<name>.py``)."""
    from rlrun.algorithms import shipped

    lines = [
        "# Algorithms",
        "",
        "Generated from each algorithm's declaration (`ALGORITHM` in",
        "`rlrun/algorithms/<name>.py`), which validation and the recipe read too. `algo=<name>`",
        "picks one; your own:",
        "[Your own algorithm](../guides/algorithms.md).",
        "",
        "| algorithm | what it is | actions | data | agents | recurrent | Ray learners |"
        " CUDA graphs | networks (`policy._target_: null`) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, a in shipped().items():
        data = a.data.value.replace("_", "-") + ("" if a.collects else ", dataset only")
        yes = {True: "yes", False: "-"}
        agents = ("a team, in groups" if a.groups else "a team") if a.multi_agent else "one"
        row = [f"`{name}`", a.summary, ", ".join(a.actions), data, agents, yes[a.sequences],
               yes[a.ray_learners], yes[a.cudagraphs], f"`{a.networks}`"]  # fmt: skip
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


API_PAGE = """# Python API

A trained run, loaded in Python: `rlrun.load` (`rlrun/commands/loading.py`).

::: rlrun.commands.loading.load

::: rlrun.commands.loading.TrainedPolicy
    options:
      members: false
"""


def pages() -> tuple[dict[str, str], list[str]]:
    """Every generated page by path, and the config keys without a comment."""
    found, missing = config_pages()
    found["reference/commands.md"] = commands_page()
    found["reference/algorithms.md"] = algorithms_page()
    found["reference/api.md"] = API_PAGE
    return found, missing


if __name__ in ("__main__", "<run_path>"):  # mkdocs-gen-files runs it with run_path
    import mkdocs_gen_files

    generated, undocumented = pages()
    for path, text in generated.items():
        with mkdocs_gen_files.open(path, "w") as out:
            out.write(text)
    if undocumented:  # a warning fails `mkdocs build --strict`
        logging.getLogger("mkdocs").warning(
            "config keys without a comment in rlrun/conf: %s", ", ".join(undocumented)
        )
