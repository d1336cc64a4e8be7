"""Reading one YAML file into a dict, refusing a key given twice in one mapping.

Every way a file can fail to read (missing, not UTF-8, malformed, a duplicated key, a value PyYAML
cannot construct, a top level that is not a mapping) becomes one ConfigError naming the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from planner.errors import ConfigError, ConfigIssue


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read one YAML file into a dict; malformed YAML names the line."""
    p = Path(path)
    try:
        data_bytes = p.read_bytes()
    except OSError as exc:
        raise ConfigError(
            ConfigIssue(str(path), "", f"cannot read the file ({exc.strerror or exc})",
                        "pass an existing YAML file with --config")
        ) from None
    try:
        text = data_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data_bytes.count(b"\n", 0, exc.start) + 1
        raise ConfigError(
            ConfigIssue(str(path), "", f"is not UTF-8 text (byte 0x{data_bytes[exc.start]:02x} on "
                                       f"line {line} cannot be decoded)",
                        "save the file as UTF-8")
        ) from None
    import yaml  # here: `planner solve` on a built-in card never reads YAML (planner.cards)

    from planner.config.strict_yaml import DuplicateKeyError, StrictLoader

    try:
        data = yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except DuplicateKeyError as exc:
        raise ConfigError(
            ConfigIssue(str(path), "", f"{exc.problem} at {_where(exc.problem_mark)}",
                        "give each key once in a mapping (YAML would keep only the last)")
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = " ".join((getattr(exc, "problem", None) or str(exc)).split())
        raise ConfigError(
            ConfigIssue(str(path), "", f"malformed YAML at {_where(mark)}: {problem}",
                        "fix the YAML syntax there (indentation, a missing ':' or an unclosed "
                        "bracket)")
        ) from None
    except Exception as exc:  # noqa: BLE001 - PyYAML's constructors raise ValueError and others
        # e.g. `2001-13-01` is read as a date and fails; `!!float abc` fails to convert.
        raise ConfigError(
            ConfigIssue(str(path), "", f"a value cannot be read ({type(exc).__name__}: "
                                       f"{' '.join(str(exc).split())})",
                        "quote values that only look like dates or numbers, and fix or drop "
                        "explicit !! tags")
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(ConfigIssue(str(path), "", f"the top level is a {type(data).__name__}",
                                      "a config is a mapping with keys such as model, stages"))
    return data
