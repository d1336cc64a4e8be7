"""The text the engine writers share: the written file (`EngineFile`) and YAML written by hand, so
that a fact the target cannot say sits as a comment beside the keys it can, in a fixed order (what
they read off the plan alike is `engine_facts`)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planner.plan import Plan


@dataclass(frozen=True)
class EngineFile:
    """One plan in an engine's language."""

    format: str  # e.g. "sglang-omni"
    text: str  # the file, with a comment for everything it cannot say
    unsaid: tuple[str, ...]  # what the target cannot express, one sentence each


def written_by(what: str, plan: Plan, fmt: str) -> str:
    """A file's first sentence, less its full stop: what the file is, for which plan, and the
    command that wrote it."""
    return (f"{what} for {plan.model} (variant {plan.variant}), written by `planner solve "
            f"--format {fmt}`")


# -- YAML text, written by hand: comments where a fact cannot be said, keys in a fixed order -------
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "~"}


def scalar(value: Any) -> str:
    """One YAML value on one line: plain where YAML reads it back as the same string, JSON
    (a subset of YAML flow syntax) otherwise."""
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _YAML_WORDS:
            return value
        return json.dumps(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else json.dumps(str(value))
    if value is None:
        return "null"
    return json.dumps(value)


def block(mapping: Mapping[str, Any], indent: int = 0) -> list[str]:
    """A mapping as indented YAML lines; nested mappings as blocks, everything else inline."""
    pad = " " * indent
    out: list[str] = []
    for key, value in mapping.items():
        if isinstance(value, Mapping) and value:
            out.append(f"{pad}{scalar(str(key))}:")
            out += block(value, indent + 2)
        else:
            out.append(f"{pad}{scalar(str(key))}: {scalar(value)}")
    return out


def nested(paths: Mapping[tuple[str, ...], Any]) -> dict[str, Any]:
    """{("engine", "mem_fraction_static"): 0.35} -> {"engine": {"mem_fraction_static": 0.35}}."""
    out: dict[str, Any] = {}
    for path, value in paths.items():
        at = out
        for key in path[:-1]:
            at = at.setdefault(key, {})
        at[path[-1]] = value
    return out


def comment(text: str, indent: int = 0, width: int = 96) -> list[str]:
    """`text` as `# ` comment lines of at most `width` characters."""
    pad = " " * indent + "# "
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(pad) + len(line) + 1 + len(word) > width:
            lines.append(pad + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return lines + ([pad + line] if line else [])


def unsaid_comments(unsaid: Iterable[str]) -> list[str]:
    """Each fact the file cannot express, as a comment at its top."""
    return [line for fact in unsaid for line in comment("not expressible here: " + fact)]


def commented_commands(heading: str, commands: Iterable[str]) -> list[str]:
    """Commands to run beside the file (one server per replica), as comments after it: the file
    stays the engine's config, the commands are for whoever starts it."""
    return ["", *comment(heading), *(f"#   {c}" for c in commands)]
