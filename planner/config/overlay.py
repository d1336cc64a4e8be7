"""Merging a raw overlay (a variant, a user config) onto a raw card before it is validated.

A stage entry changes only the fields it gives (and `runtime` deeply); `placement` is updated key
by key, `processes` process by process; any other key replaces the card's value.
"""

from __future__ import annotations

import copy
from typing import Any

from planner.config.values import check_name, describe
from planner.errors import ConfigError, ConfigIssue


def overlay(base: dict[str, Any], layer: dict[str, Any], source: str,
            found: list[ConfigIssue] | None = None) -> dict[str, Any]:
    """Apply an overlay: stage entries change only the fields they give; other keys replace.
    With `found`, its problems are added there instead of raised, so that the caller reports
    them together with the merged config's own (every problem at once)."""
    issues: list[ConfigIssue] = [] if found is None else found
    out = copy.deepcopy(base)
    base_stages = {s.get("name"): s for s in out.get("stages", []) if isinstance(s, dict)}
    for key, value in layer.items():
        if key == "name" and value is not None:
            check_name(value, source, "name", issues, "pipeline")
        if key in ("model", "variant", "name", "description"):
            continue  # selection keys, not pipeline content
        if key == "stages":
            _overlay_stages(base_stages, value, source, issues)
        elif key in ("placement", "processes") and isinstance(value, dict) and isinstance(
                out.get(key), dict):
            out[key].update(copy.deepcopy(value))
        else:
            out[key] = copy.deepcopy(value)
    if issues and found is None:
        raise ConfigError(issues)
    return out


def _overlay_stages(base_stages: dict[Any, dict[str, Any]], value: Any, source: str,
                    issues: list[ConfigIssue]) -> None:
    """Merge each overlay stage entry onto the base stage of that name, in place."""
    if not isinstance(value, list):
        issues.append(ConfigIssue(source, "stages", f"got {describe(value)}",
                                  "a list of stage entries, e.g. "
                                  "- {name: vocoder, process: vocoder}"))
        return
    given: dict[str, int] = {}
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or "name" not in entry:
            issues.append(ConfigIssue(source, f"stages[{i}]",
                                      "an overlay stage entry must be a mapping with a name",
                                      "e.g. - {name: vocoder, process: vocoder}"))
            continue
        name = entry["name"]
        if not isinstance(name, str):
            issues.append(ConfigIssue(source, f"stages[{i}].name", f"got {describe(name)}",
                                      "the name of one of the model's stages"))
            continue
        if name in given:
            issues.append(ConfigIssue(source, f"stages[{i}].name",
                                      f"stage {name!r} is already changed by "
                                      f"stages[{given[name]}]",
                                      "give each stage one entry holding all its changes"))
            continue
        given[name] = i
        target = base_stages.get(name)
        if target is None:
            known = ", ".join(str(n) for n in base_stages)
            issues.append(ConfigIssue(source, f"stages[{i}].name",
                                      f"stage {name!r} is not a stage of this model",
                                      f"the stages are: {known}"))
            continue
        _merge_stage(target, entry)


def _merge_stage(target: dict[str, Any], entry: dict[str, Any]) -> None:
    for k, v in entry.items():
        if k == "runtime" and isinstance(v, dict) and isinstance(target.get("runtime"), dict):
            _deep_update(target["runtime"], v)
        else:
            target[k] = copy.deepcopy(v)
    # `next` and `terminal` are alternatives: giving one in an overlay drops the other.
    if "terminal" in entry and entry["terminal"]:
        target.pop("next", None)
    if "next" in entry:
        target.pop("terminal", None)


def _deep_update(dst: dict[str, Any], src: dict[str, Any]) -> None:
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)
