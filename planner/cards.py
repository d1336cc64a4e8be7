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

from planner.config import CARD_KEYS, build_pipeline, overlay, read_yaml, sglang_omni
from planner.errors import ConfigError, ConfigIssue
from planner.pipeline import Carried, Pipeline
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

    @property
    def config_classes(self) -> dict[str, str]:
        """sglang-omni config class (`config_cls`) -> the variant of this card it selects."""
        return dict(self.raw.get("config_classes") or {})

    def config_class(self, variant: str) -> str | None:
        """The sglang-omni config class of a variant, if the card names one."""
        return next((c for c, v in self.config_classes.items() if v == variant), None)

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


def find_config_class(name: str, source: str) -> tuple[Card, str]:
    """The card and variant an sglang-omni `config_cls` names."""
    for card in all_cards():
        if name in card.config_classes:
            return card, card.config_classes[name]
    known = ", ".join(c for card in all_cards() for c in card.config_classes)
    raise ConfigError(ConfigIssue(
        source, "config_cls", f"no built-in model card has the sglang-omni config class "
        f"{name!r}", f"use one of {known}, or name the model with model_path"))


@dataclass(frozen=True)
class _Layer:
    """A user's layer over the card: its raw overlay in the planner's schema, and what an
    sglang-omni dialect carried."""

    raw: dict[str, Any]
    source: str
    carried: tuple[Carried, ...] = ()
    engine: bool = False  # read from sglang-omni's dialect
    default_threads: int | None = None


def _read_user(config: str | Path | dict[str, Any] | None) -> tuple[dict[str, Any] | None, str]:
    if config is None:
        return None, "<config>"
    if isinstance(config, dict):
        return config, "<config>"
    return read_yaml(config), str(config)


def _engine_layer(raw: dict[str, Any], source: str, found: list[ConfigIssue]) -> _Layer:
    """An sglang-omni config as a planner overlay: `config_cls` / `model_path` select the card
    (and variant) as `model` / `variant` would."""
    reading, issues = sglang_omni.read(raw, source)
    found += issues
    overlay = dict(reading.overlay)
    carried = reading.carried
    if reading.config_cls and "model" not in overlay:
        try:
            card, variant = find_config_class(reading.config_cls, source)
        except ConfigError:
            if reading.model_path is None:
                raise
            card = variant = None  # an sglang-omni class we do not know: kept as written
            carried += (Carried(("config_cls",), reading.config_cls),)
        if card is not None:
            by_path = (find_card(reading.model_path, source, "model_path")
                       if reading.model_path else card)
            if by_path.name != card.name:
                found.append(ConfigIssue(source, "model_path", f"selects card {by_path.name!r} "
                                         f"but config_cls {reading.config_cls} is card "
                                         f"{card.name!r}", "drop one of the two"))
            overlay["model"] = card.name
            # The planner's own `variant:` is the finer choice: a card variant sglang-omni has
            # no class for is written as its card's class and `variant:` (render.sglang_omni).
            overlay.setdefault("variant", variant)
    if "model" not in overlay and reading.model_path:
        overlay["model"] = reading.model_path
    return _Layer(overlay, source, carried, True, reading.default_threads)


def load_pipeline(model_path: str | None = None, config: str | Path | dict[str, Any] | None = None,
                  variant: str | None = None, overrides: dict[str, Any] | None = None) -> Pipeline:
    """Resolve what the user asked for into one validated Pipeline, or raise ConfigError.

    `config` is in the planner's schema or sglang-omni's dialect (`planner.config.sglang_omni`);
    `overrides` are stage fields from the command line, as sglang-omni's dotted flags write them
    (`{"stages": {"vocoder": {"gpu_memory_fraction": 0.1}}}`), applied over the config."""
    user, source = _read_user(config)
    found: list[ConfigIssue] = []
    layer = None if user is None else (_engine_layer(user, source, found)
                                       if sglang_omni.speaks(user) else _Layer(user, source))
    flags = None
    if overrides:
        reading, issues = sglang_omni.read(overrides, FLAGS)
        found += issues
        flags = _Layer(reading.overlay, FLAGS, reading.carried, True)
    engine = (layer is not None and layer.engine) or flags is not None
    try:
        pipeline = _load(model_path, variant, layer, flags, found)
    except ConfigError as err:
        if not engine:
            raise
        given = {f"--{name}.{field}" for name, fields in (overrides or {}).get("stages", {}).items()
                 if isinstance(fields, dict) for field in fields}
        raise ConfigError(_in_dialect(err.issues, layer, flags, given)) from None
    carried = {c.path: c for c in (*(layer.carried if layer else ()),
                                   *(flags.carried if flags else ()))}
    return replace(pipeline, carried=tuple(carried.values()),
                   dialect=sglang_omni.DIALECT if engine else pipeline.dialect)


FLAGS = "command line"


def _in_dialect(issues: list[ConfigIssue], layer: _Layer | None, flags: _Layer | None,
                given: set[str]) -> list[ConfigIssue]:
    """The issues of an sglang-omni config or dotted flags, with the key paths written there; a
    value a dotted flag set (the last layer) is blamed on the flag."""
    out = []
    flag_names = [e["name"] for e in flags.raw.get("stages", [])] if flags else []
    for issue in issues:
        as_flag = sglang_omni.their_issue(issue, flag_names, flags=True)
        if flags is not None and (issue.source == FLAGS or as_flag.key in given):
            out.append(replace(as_flag, source=FLAGS))
        elif layer is not None and layer.engine and issue.source.startswith(layer.source):
            names = [e["name"] for e in layer.raw.get("stages", [])]
            out.append(sglang_omni.their_issue(issue, names))
        else:
            out.append(issue)
    return out


def _load(model_path: str | None, variant: str | None, layer: _Layer | None,
          flags: _Layer | None, found: list[ConfigIssue]) -> Pipeline:
    user = None if layer is None else layer.raw
    source = "<config>" if layer is None else layer.source
    if user is not None:
        selector = user.get("model")
        if selector is not None and (not isinstance(selector, str) or not selector.strip()):
            raise ConfigError(found + [ConfigIssue(source, "model", f"got {selector!r}",
                                                   "a card name, model path or architecture "
                                                   "string")])
        if user.get("variant") is not None and not isinstance(user["variant"], str):
            raise ConfigError(found + [ConfigIssue(source, "variant", f"got {user['variant']!r}",
                                                   "the name of one of the card's variants")])
        # A flag wins over the file; an error blames whichever of the two was used.
        v = variant or user.get("variant")
        v_blame = ("--variant", "") if variant else (source, "variant")
        if selector is None and model_path is None:
            if layer.engine:  # sglang-omni takes a pipeline's stages from its config class
                raise ConfigError(found + [ConfigIssue(
                    source, "config_cls", "names no model", "an sglang-omni config names its "
                    "model with config_cls or model_path, e.g. model_path: fishaudio/s2-pro "
                    "(or pass --model-path)")])
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
            raw = user if flags is None else overlay(user, flags.raw, FLAGS, found)
            if found:
                raise ConfigError(found)
            return build_pipeline(raw, name=name, variant=DEFAULT_VARIANT, source=source)
        card = (find_card(selector, source, "model") if selector
                else find_card(model_path))  # type: ignore[arg-type]
        if selector and model_path and find_card(model_path).name != card.name:
            raise ConfigError(ConfigIssue(
                source, "model", f"selects card {card.name!r} but --model-path selects "
                f"{find_card(model_path).name!r}", "drop one of the two"))
        base, chosen = card_pipeline_raw(card, v, *v_blame)
        if layer is not None and layer.default_threads is not None:
            user = sglang_omni.with_default_threads(
                user, tuple(s["name"] for s in base["stages"]), layer.default_threads)
        layers = [(source, user)]
    else:
        if model_path is None:
            raise ConfigError(ConfigIssue("command line", "", "no model given",
                                          "pass --model-path MODEL (see `planner models`) or "
                                          "--config FILE"))
        card = find_card(model_path)
        base, chosen = card_pipeline_raw(card, variant)
        source = f"card {card.name}"
        layers = []
    if flags is not None:
        layers.append((FLAGS, flags.raw))
    # An entry an overlay cannot apply (an unknown stage) must not hide what is wrong with the
    # rest: the merged config is checked too and every problem reported at once.
    merged = base
    for label, raw in layers:
        merged = overlay(merged, raw, label, found)
    where = source if user is None else f"{source} (over card {card.name})"
    try:
        pipeline = build_pipeline(merged, name=card.name, variant=chosen, source=where)
    except ConfigError as err:
        raise ConfigError(found + err.issues) from None
    if found:
        raise ConfigError(found)
    lines = overlay_lines(pipeline, card.raw["stages"], [*_variant_layer(card, chosen), *layers])
    if layer is not None and layer.engine:
        names = [e["name"] for e in user.get("stages", [])]
        lines = tuple((s, replace(line, key=sglang_omni.their_key(line.key, names)))
                      if line.source == source else (s, line) for s, line in lines)
    # The config declares the layout when it moves a stage or sets its compute otherwise.
    moved = user is not None and (
        any(line.source in (source, FLAGS) for _, line in lines)
        or _compute_of(pipeline) != _compute_of(build_pipeline(base, name=card.name,
                                                               variant=chosen, source=where)))
    return replace(pipeline, over_card=True, model_paths=card.model_paths, process_lines=lines,
                   declared_by="config" if moved else "card")


def _compute_of(pipeline: Pipeline) -> tuple:
    """Each stage's threads, and the copies and CPUs of each process a stage runs in."""
    used = {s.process or s.name for s in pipeline.stages}
    return (tuple((s.name, s.threads or 1) for s in pipeline.stages),
            tuple(sorted((p, n) for p, n in pipeline.process_copies if p in used and n != 1)),
            tuple(sorted((p, c) for p, c in pipeline.process_cpus if p in used)))


def _variant_layer(card: Card, variant: str) -> list[tuple[str, dict[str, Any]]]:
    layer = (card.raw.get("variants") or {}).get(variant)
    return [(f"variant {variant} of card {card.name}", layer)] if layer else []
