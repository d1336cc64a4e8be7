"""Which config line declared each stage's process.

An overlay or a variant is checked like a request against the card's declared topology: when it
moves a stage away from where the card puts it and so splits an unsafe handoff, the diagnostic
names the YAML line that did it. (A complete pipeline's own layout is the baseline, not checked.) Runs only on configs that already validated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from planner.pipeline import Pipeline, ProcessLine


def _lines_of(label: str, layer: Mapping[str, Any]) -> dict[str, ProcessLine]:
    out: dict[str, ProcessLine] = {}
    for i, entry in enumerate(layer.get("stages") or ()):
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and "process" in entry:
            out[entry["name"]] = ProcessLine(label, f"stages[{i}].process", str(entry["process"]))
    return out


def overlay_lines(pipeline: Pipeline, card_stages: Sequence[Any],
                  layers: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[tuple[str, ProcessLine], ...]:
    """Lines of the layers (variant, then user overlay; the last one wins) that leave a stage in
    another process than the card's own declaration."""
    card_process = {e.get("name"): e.get("process") for e in card_stages if isinstance(e, Mapping)}
    last: dict[str, ProcessLine] = {}
    for label, layer in layers:
        last.update(_lines_of(label, layer))
    return tuple((s.name, last[s.name]) for s in pipeline.stages
                 if s.name in last and not s.is_tp and s.process != card_process.get(s.name))

