"""Built-in model cards (`models/*.yaml`) and how a model path, a config, and a variant select one."""

from __future__ import annotations

import copy
import functools
import json
import zlib
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

from planner.config import CARD_KEYS, build_pipeline, overlay, read_yaml
from planner.errors import ConfigError, ConfigIssue
from planner.pipeline import Pipeline
from planner.provenance import overlay_lines

DEFAULT_VARIANT = "default"
MIRROR = "cards.json"  # the cards as parsed, checked by CRC: see planner.card_mirror


@dataclass(frozen=True)
class Card:
    name: str
    display_name: str
    model_paths: tuple[str, ...]
    architectures: tuple[str, ...]
    variants: tuple[str, ...]  # default first
    default_variant: str
    description: str
    raw: dict[str, Any]

    @property
    def selectors(self) -> tuple[str, ...]:
        return (self.name, *self.model_paths, *self.architectures)

    def variant_description(self, variant: str) -> str:
        v = (self.raw.get("variants") or {}).get(variant) or {}
        return str(v.get("description", ""))


@functools.cache
def _mirror() -> dict[str, Any]:
    try:
        return json.loads(resources.files("models").joinpath(MIRROR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _parse(entry: Any) -> dict[str, Any]:
    """A card file's content: from the JSON mirror while the file is what it mirrors, else its
    YAML. Built-in cards are ours and well-formed: libyaml's safe loader where present, the
    pure-Python one otherwise; user files go through config.read_yaml's strict loader."""
    data = entry.read_bytes()
    kept = _mirror().get(entry.name)
    if kept is not None and kept.get("crc32") == zlib.crc32(data):
        return copy.deepcopy(kept["card"])
    import yaml

    return yaml.load(data, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506


def _read_card(entry: Any) -> Card:
    raw = _parse(entry)
    variants = raw.get("variants") or {}
    default = raw.get("default_variant", DEFAULT_VARIANT)
    names = [default] + [v for v in variants if v != default]
    return Card(
        name=raw["name"],
        display_name=raw.get("display_name", raw["name"]),
        model_paths=tuple(raw.get("model_paths") or ()),
        architectures=tuple(raw.get("architectures") or ()),
        variants=tuple(names),
        default_variant=default,
        description=str(raw.get("description", "")),
        raw=raw,
    )


@functools.cache
def all_cards() -> tuple[Card, ...]:
    """Every card shipped in the `models` package, sorted by name."""
    entries = sorted(resources.files("models").iterdir(), key=lambda e: e.name)
    return tuple(_read_card(e) for e in entries if e.name.endswith(".yaml"))


@functools.cache
def _card_in_file_named(name: str) -> Card | None:
    """The card in `models/NAME.yaml` if that file exists and declares that name: a card asked
    for by name reads one file, not all of them (a third of `planner solve`'s own cold start)."""
    if "/" in name or name.startswith("."):
        return None
    entry = resources.files("models").joinpath(f"{name}.yaml")
    if not entry.is_file():
        return None
    card = _read_card(entry)
    return card if card.name == name else None


def find_card(model_path: str, source: str = "--model-path", key: str = "") -> Card:
    """Card name, model path or architecture; exact match first, then case-insensitive.

    `source` and `key` say where the selector was written, for the error: a flag or a file's key."""
    named = _card_in_file_named(model_path)
    if named is not None:
        return named
    cards = all_cards()
    for card in cards:
        if model_path in card.selectors:
            return card
    folded = model_path.casefold()
    for card in cards:
        if folded in (s.casefold() for s in card.selectors):
            return card
    known = ", ".join(c.name for c in cards)
    other = ("describe the pipeline in a YAML file and pass --config FILE"
             if source.startswith("--") else "drop `model:` and describe the whole pipeline with `name:` and `stages:`")
    raise ConfigError(ConfigIssue(
        source, key, f"no built-in model card matches {model_path!r}",
        f"use a card name ({known}), one of its model paths or architectures (see `planner models`),"
        f" or {other}"))


def card_pipeline_raw(card: Card, variant: str | None, source: str = "--variant",
                      key: str = "") -> tuple[dict[str, Any], str]:
    chosen = variant or card.default_variant
    if chosen not in card.variants:
        raise ConfigError(ConfigIssue(
            source, key, f"model card {card.name!r} has no variant {chosen!r}",
            f"its variants are: {', '.join(card.variants)}"))
    base = {k: v for k, v in card.raw.items() if k not in CARD_KEYS}
    layer = (card.raw.get("variants") or {}).get(chosen) or {}
    layer = {k: v for k, v in layer.items() if k != "description"}
    return overlay(base, layer, f"card {card.name} variant {chosen}"), chosen


def load_pipeline(model_path: str | None = None, config: str | Path | dict[str, Any] | None = None,
                  variant: str | None = None) -> Pipeline:
    """Resolve what the user asked for into one validated Pipeline, or raise ConfigError."""
    user: dict[str, Any] | None = None
    source = "<config>"
    if config is not None:
        if isinstance(config, dict):
            user = config
        else:
            source = str(config)
            user = read_yaml(config)

    if user is not None:
        selector = user.get("model")
        if selector is not None and (not isinstance(selector, str) or not selector.strip()):
            raise ConfigError(ConfigIssue(source, "model", f"got {selector!r}",
                                          "a card name, model path or architecture string"))
        if user.get("variant") is not None and not isinstance(user["variant"], str):
            raise ConfigError(ConfigIssue(source, "variant", f"got {user['variant']!r}",
                                          "the name of one of the card's variants"))
        # A flag wins over the file; an error blames whichever of the two was used.
        v = variant or user.get("variant")
        v_blame = ("--variant", "") if variant else (source, "variant")
        if selector is None and model_path is None:
            # A complete pipeline of its own.
            if "variant" in user:
                raise ConfigError(ConfigIssue(source, "variant", "a variant needs a model to apply to",
                                              "add `model: <card>` or drop `variant`"))
            name = user.get("name")
            if not isinstance(name, str) or not name:
                raise ConfigError(ConfigIssue(
                    source, "name", "a complete pipeline needs a name (or `model:` to overlay a card)",
                    "add e.g. `name: my-pipeline`, or `model: qwen3-tts` to start from a card"))
            # Its declared topology is the baseline: nothing in it is checked like a request.
            return build_pipeline(user, name=name, variant=DEFAULT_VARIANT, source=source)
        card = (find_card(selector, source, "model") if selector
                else find_card(model_path))  # type: ignore[arg-type]
        if selector and model_path and find_card(model_path).name != card.name:
            raise ConfigError(ConfigIssue(
                source, "model", f"selects card {card.name!r} but --model-path selects "
                f"{find_card(model_path).name!r}", "drop one of the two"))
        base, chosen = card_pipeline_raw(card, v, *v_blame)
        # An entry the overlay cannot apply (an unknown stage) must not hide what is wrong with
        # the rest: the merged config is checked too and every problem reported at once.
        skipped: list[ConfigIssue] = []
        merged = overlay(base, user, source, skipped)
        try:
            pipeline = build_pipeline(merged, name=card.name, variant=chosen,
                                      source=f"{source} (over card {card.name})")
        except ConfigError as err:
            raise ConfigError(skipped + err.issues) from None
        if skipped:
            raise ConfigError(skipped)
        lines = overlay_lines(pipeline, card.raw["stages"],
                              [*_variant_layer(card, chosen), (source, user)])
        # The config declares the layout when it moves a stage or sets its compute otherwise.
        moved = any(line.source == source for _, line in lines) or _compute_of(pipeline) != \
            _compute_of(build_pipeline(base, name=card.name, variant=chosen, source=source))
        return replace(pipeline, over_card=True, model_paths=card.model_paths, process_lines=lines,
                       declared_by="config" if moved else "card")

    if model_path is None:
        raise ConfigError(ConfigIssue("command line", "", "no model given",
                                      "pass --model-path MODEL (see `planner models`) or --config FILE"))
    card = find_card(model_path)
    base, chosen = card_pipeline_raw(card, variant)
    pipeline = build_pipeline(base, name=card.name, variant=chosen, source=f"card {card.name}")
    lines = overlay_lines(pipeline, card.raw["stages"], _variant_layer(card, chosen))
    return replace(pipeline, over_card=True, model_paths=card.model_paths, process_lines=lines,
                   declared_by="card")


def _compute_of(pipeline: Pipeline) -> tuple:
    """Each stage's threads, and the copies and CPUs of each process a stage runs in."""
    used = {s.process or s.name for s in pipeline.stages}
    return (tuple((s.name, s.threads or 1) for s in pipeline.stages),
            tuple(sorted((p, n) for p, n in pipeline.process_copies if p in used and n != 1)),
            tuple(sorted((p, c) for p, c in pipeline.process_cpus if p in used)))


def _variant_layer(card: Card, variant: str) -> list[tuple[str, dict[str, Any]]]:
    layer = (card.raw.get("variants") or {}).get(variant)
    return [(f"variant {variant} of card {card.name}", layer)] if layer else []
