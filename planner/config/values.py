"""Checks of one raw YAML value: names, keys, GPU memory fractions, stage lists and edges.

Each check appends a ConfigIssue naming the key and what is allowed, instead of raising, so that
a config's problems are all reported at once; `describe` shows a bad value as its author wrote it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from planner.errors import ConfigIssue
from planner.limits import shown

# Names travel into flags (`--stage-process STAGE=PROCESS`), DOT, tables, metrics labels and output
# folders, so they keep to a set that needs no quoting anywhere. A process name may also hold `=`:
# `--stage-process STAGE=PROCESS` splits at the first `=` only.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_PROCESS_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=-]*")
NAME_CHARS = "ASCII letters, digits, '_', '-' and '.', not starting with '-' or '.'"
PROCESS_NAME_CHARS = ("ASCII letters, digits, '_', '-', '.' and '=', not starting with '-', '.' "
                      "or '='")


def name_problem(value: Any, *, process: bool = False) -> str | None:
    """Why `value` cannot be a stage, role, pipeline (or, with process=True, process) name."""
    if not isinstance(value, str):
        return f"got {describe(value)}, not a name"
    if not (_PROCESS_NAME if process else _NAME).fullmatch(value):
        return f"{value!r} is not a valid name" if value else "is empty"
    return None


def key_path(parent: str, key: Any) -> str:
    """`parent.key`; a key that is not a plain name is quoted, so a path stays one readable line."""
    part = key if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.=-]+", key) else repr(key)
    return f"{parent}.{part}" if parent else part


def describe(value: Any) -> str:
    """A value as the YAML author would recognise it, with its type when that is the surprise."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, (int, float)):
        return shown(value)
    if isinstance(value, dict):
        return f"a mapping {_short(value)}"
    if isinstance(value, list):
        return f"a list {_short(value)}"
    return f"a {type(value).__name__} {_short(value)}"


def _short(value: Any, limit: int = 60) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def check_name(value: Any, source: str, key: str, issues: list[ConfigIssue], what: str,
               *, process: bool = False) -> bool:
    problem = name_problem(value, process=process)
    if problem is None:
        return True
    allowed = f"a {what} name uses {PROCESS_NAME_CHARS if process else NAME_CHARS}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        allowed += f"; quote a number to use it as a name, e.g. '{value}'"
    issues.append(ConfigIssue(source, key, problem, allowed))
    return False


def check_keys(data: dict[str, Any], allowed: dict[str, str] | tuple[str, ...], source: str,
               key: str, issues: list[ConfigIssue]) -> None:
    for k in data:
        if k not in allowed:
            names = ", ".join(sorted(allowed))
            issues.append(ConfigIssue(source, key_path(key, k), "unknown key",
                                      f"allowed keys here: {names}"))


def as_name_list(value: Any, source: str, key: str, issues: list[ConfigIssue]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    issues.append(ConfigIssue(source, key, f"got {describe(value)}",
                              "a stage name or a list of stage names"))
    return ()


_FRACTION_ALLOWED = "a GPU memory fraction is a number greater than 0 and at most 1, e.g. 0.10"
# PyYAML resolves YAML 1.1 floats, which need a '.': `1e-1` and `1E-2` are read as strings.
_EXPONENT_WITHOUT_DOT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


def read_fraction(value: Any, source: str, key: str,
                  issues: list[ConfigIssue]) -> float | None:
    """A GPU memory fraction in (0, 1], or None (absent, or reported)."""
    if value is None:
        return None
    if isinstance(value, str):
        # A number that YAML read as text: say so, and how to write it, instead of "out of range".
        try:
            number = float(value)
        except ValueError:
            number = None
        if number is not None and math.isfinite(number):
            why = ("YAML reads exponent notation without a '.' as text"
                   if _EXPONENT_WITHOUT_DOT.fullmatch(value.strip()) else "it is quoted")
            issues.append(ConfigIssue(source, key,
                                      f"got the string {value!r}, not a number ({why})",
                                      f"write the number unquoted, e.g. {number!r}"))
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        issues.append(ConfigIssue(source, key, f"got {describe(value)}, not a number",
                                  _FRACTION_ALLOWED))
        return None
    # Compared as it is: math.isnan or float() of a 400-digit integer raises OverflowError.
    if not 0 < value <= 1:  # also NaN
        issues.append(ConfigIssue(source, key, f"fraction {shown(value)} is outside (0, 1]",
                                  _FRACTION_ALLOWED))
        return None
    return float(value)


def read_edge(value: Any, source: str, key: str, stages: set[str],
              issues: list[ConfigIssue]) -> tuple[str, str] | None:
    """A `[source, target]` pair of known stages, or None (reported)."""
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        issues.append(ConfigIssue(source, key, f"got {describe(value)}",
                                  "an edge is [source, target]"))
        return None
    for name in value:
        if name not in stages:
            issues.append(ConfigIssue(source, key, f"edge names unknown stage {name!r}",
                                      f"the stages are: {', '.join(sorted(stages))}"))
            return None
    return (value[0], value[1])
