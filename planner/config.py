"""The one YAML schema shared by model cards and user configs: reading, overlaying, validating.

Raw dicts are merged first (card, then variant, then user overlay) and validated once as a whole,
so a rule is checked in one place whatever layer a value came from.
"""

from __future__ import annotations

import copy
import graphlib
import math
import re
from pathlib import Path
from typing import Any

import yaml

from planner.errors import ConfigError, ConfigIssue
from planner.limits import MAX_GPU_ID, MAX_TP_SIZE, shown
from planner.pipeline import EdgeResources, Pipeline, PlacementPolicy, StageConfig

PIPELINE_KEYS = {
    "name": "complete pipelines: the pipeline's name",
    "model": "overlay: the card (name, model path or architecture) to start from",
    "variant": "the card variant to start from",
    "description": "free text",
    "stages": "list of stages",
    "roles": "role alias -> stage",
    "process_safe_edges": "list of [source, target] handoffs that may cross processes",
    "unsupported_edges": "list of {edge, reason}: why a handoff must stay in one process",
    "process_edge_resources": "list of {edge, fractions}: fractions to apply when edge is split",
    "fused_stages": "list of stage lists that always share one process",
    "placement": "max_total_gpu_memory_fraction_per_gpu, require_memory_fraction_for_colocation",
    "sample_rate": "Hz of the audio the terminal stage returns (default 24000)",
    "voices": "the voice names a request may ask for (default: any)",
}
CARD_KEYS = {
    "display_name": "human name of the model",
    "model_paths": "model paths that select this card",
    "architectures": "architecture strings that select this card",
    "variants": "name -> overlay",
    "default_variant": "the variant used when none is asked for",
}
STAGE_KEYS = (
    "name", "process", "gpu", "tp_size", "next", "stream_to", "wait_for", "terminal", "factory",
    "args", "runtime",
)
DEFAULT_SAMPLE_RATE = 24_000  # the stand-in stages' rate; a card of a real model declares its own
SAMPLE_RATES = (8_000, 192_000)  # the range a sample_rate may take, in Hz
PLACEMENT_KEYS = ("max_total_gpu_memory_fraction_per_gpu", "require_memory_fraction_for_colocation")

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
        return f"got {_describe(value)}, not a name"
    if not (_PROCESS_NAME if process else _NAME).fullmatch(value):
        return f"{value!r} is not a valid name" if value else "is empty"
    return None


def key_path(parent: str, key: Any) -> str:
    """`parent.key`; a key that is not a plain name is quoted, so a path stays one readable line."""
    part = key if isinstance(key, str) and re.fullmatch(r"[A-Za-z0-9_.=-]+", key) else repr(key)
    return f"{parent}.{part}" if parent else part


def _describe(value: Any) -> str:
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


def _check_name(value: Any, source: str, key: str, issues: list[ConfigIssue], what: str,
                *, process: bool = False) -> bool:
    problem = name_problem(value, process=process)
    if problem is None:
        return True
    allowed = f"a {what} name uses {PROCESS_NAME_CHARS if process else NAME_CHARS}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        allowed += f"; quote a number to use it as a name, e.g. '{value}'"
    issues.append(ConfigIssue(source, key, problem, allowed))
    return False


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping gives one key twice; plain YAML would silently keep the last."""


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise DuplicateKeyError("while constructing a mapping", node.start_mark,
                                                f"key {key!r} is given twice", key_node.start_mark)
                    seen.add(key)
                except TypeError:
                    pass  # an unhashable key: the base class says so with its line
        return super().construct_mapping(node, deep=deep)


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
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
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
                        "fix the YAML syntax there (indentation, a missing ':' or an unclosed bracket)")
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


def check_keys(data: dict[str, Any], allowed: dict[str, str] | tuple[str, ...], source: str,
               key: str, issues: list[ConfigIssue]) -> None:
    for k in data:
        if k not in allowed:
            names = ", ".join(sorted(allowed))
            issues.append(ConfigIssue(source, key_path(key, k), "unknown key",
                                      f"allowed keys here: {names}"))


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
            _check_name(value, source, "name", issues, "pipeline")
        if key in ("model", "variant", "name", "description"):
            continue  # selection keys, not pipeline content
        if key == "stages":
            if not isinstance(value, list):
                issues.append(ConfigIssue(source, "stages", f"got {_describe(value)}",
                                          "a list of stage entries, e.g. "
                                          "- {name: vocoder, process: vocoder}"))
                continue
            given: dict[str, int] = {}
            for i, entry in enumerate(value):
                if not isinstance(entry, dict) or "name" not in entry:
                    issues.append(ConfigIssue(source, f"stages[{i}]",
                                              "an overlay stage entry must be a mapping with a name",
                                              "e.g. - {name: vocoder, process: vocoder}"))
                    continue
                name = entry["name"]
                if not isinstance(name, str):
                    issues.append(ConfigIssue(source, f"stages[{i}].name",
                                              f"got {_describe(name)}",
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
        elif key == "placement" and isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = copy.deepcopy(value)
    if issues and found is None:
        raise ConfigError(issues)
    return out


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


def _as_name_list(value: Any, source: str, key: str, issues: list[ConfigIssue]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    issues.append(ConfigIssue(source, key, f"got {_describe(value)}",
                              "a stage name or a list of stage names"))
    return ()


_FRACTION_ALLOWED = "a GPU memory fraction is a number greater than 0 and at most 1, e.g. 0.10"
# PyYAML resolves YAML 1.1 floats, which need a '.': `1e-1` and `1E-2` are read as strings.
_EXPONENT_WITHOUT_DOT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


def _fraction(value: Any, source: str, key: str, issues: list[ConfigIssue]) -> float | None:
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
        issues.append(ConfigIssue(source, key, f"got {_describe(value)}, not a number",
                                  _FRACTION_ALLOWED))
        return None
    # Compared as it is: math.isnan or float() of a 400-digit integer raises OverflowError.
    if not 0 < value <= 1:  # also NaN
        issues.append(ConfigIssue(source, key, f"fraction {shown(value)} is outside (0, 1]",
                                  _FRACTION_ALLOWED))
        return None
    return float(value)


def _example_ids(n: int) -> str:
    return str(list(range(n))) if n <= 8 else f"[0, 1, ..., {n - 1}]"


def _edge(value: Any, source: str, key: str, stages: set[str],
          issues: list[ConfigIssue]) -> tuple[str, str] | None:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        issues.append(ConfigIssue(source, key, f"got {_describe(value)}",
                                  "an edge is [source, target]"))
        return None
    for name in value:
        if name not in stages:
            issues.append(ConfigIssue(source, key, f"edge names unknown stage {name!r}",
                                      f"the stages are: {', '.join(sorted(stages))}"))
            return None
    return (value[0], value[1])


def _stage(raw: Any, i: int, source: str, issues: list[ConfigIssue]) -> StageConfig | None:
    key = f"stages[{i}]"
    if not isinstance(raw, dict):
        issues.append(ConfigIssue(source, key, f"got {_describe(raw)}",
                                  "each stage is a mapping with a name"))
        return None
    if "name" not in raw:
        issues.append(ConfigIssue(source, f"{key}.name", "missing", "every stage needs a name"))
        return None
    name = raw["name"]
    if not _check_name(name, source, f"{key}.name", issues, "stage"):
        return None
    key = f"stages[name={name}]"
    check_keys(raw, STAGE_KEYS, source, key, issues)

    tp = raw.get("tp_size", 1)
    if isinstance(tp, bool) or not isinstance(tp, int) or not 1 <= tp <= MAX_TP_SIZE:
        issues.append(ConfigIssue(source, f"{key}.tp_size", f"got {_describe(tp)}",
                                  f"a whole number from 1 to {MAX_TP_SIZE}"))
        tp = 1

    gpu = raw.get("gpu")
    gpus: tuple[int, ...] = ()
    if gpu is None:
        gpus = ()
    elif isinstance(gpu, bool):
        issues.append(ConfigIssue(source, f"{key}.gpu", f"got {_describe(gpu)}",
                                  "a GPU id (int), a list of ids for tensor parallelism, or null"))
    elif isinstance(gpu, int):
        if tp > 1:
            issues.append(ConfigIssue(source, f"{key}.gpu",
                                      f"tensor-parallel stage (tp_size {tp}) has a single gpu {gpu}",
                                      f"list one GPU id per rank, e.g. gpu: {_example_ids(tp)}"))
        gpus = (gpu,)
    elif isinstance(gpu, list) and all(isinstance(g, int) and not isinstance(g, bool) for g in gpu):
        gpus = tuple(gpu)
        if len(gpus) != tp:
            issues.append(ConfigIssue(source, f"{key}.gpu",
                                      f"lists {len(gpus)} GPU ids but tp_size is {tp}",
                                      "give exactly one GPU id per tensor-parallel rank"))
        if len(set(gpus)) != len(gpus):
            issues.append(ConfigIssue(source, f"{key}.gpu", f"repeats a GPU id in {list(gpus)}",
                                      "each tensor-parallel rank needs its own GPU"))
    else:
        issues.append(ConfigIssue(source, f"{key}.gpu", f"got {_describe(gpu)}",
                                  "a GPU id (int), a list of ids for tensor parallelism, or null"))
    if any(g < 0 for g in gpus):
        issues.append(ConfigIssue(source, f"{key}.gpu", "GPU ids cannot be negative"))
    elif any(g > MAX_GPU_ID for g in gpus):
        issues.append(ConfigIssue(source, f"{key}.gpu",
                                  f"GPU id {shown(max(gpus))} is above {MAX_GPU_ID}",
                                  f"GPU ids count from 0 on each machine, up to {MAX_GPU_ID}"))
    if tp > 1 and gpu is None:
        issues.append(ConfigIssue(source, f"{key}.gpu",
                                  f"tensor-parallel stage (tp_size {tp}) lists no GPUs",
                                  f"list one GPU id per rank, e.g. gpu: {_example_ids(tp)}"))

    process = raw.get("process")
    if isinstance(process, str):
        process = process.strip()
    if process is not None and not _check_name(process, source, f"{key}.process", issues,
                                               "process", process=True):
        process = ""  # reported; not "missing" as well
    if process is None and tp == 1:
        issues.append(ConfigIssue(source, f"{key}.process", "missing",
                                  f"every stage with tp_size 1 declares its process, e.g. "
                                  f"process: pipeline"))

    terminal = raw.get("terminal", False)
    if not isinstance(terminal, bool):
        issues.append(ConfigIssue(source, f"{key}.terminal", f"got {_describe(terminal)}",
                                  "true or false"))
        terminal = False
    nxt = _as_name_list(raw.get("next"), source, f"{key}.next", issues)
    if terminal and nxt:
        issues.append(ConfigIssue(source, key, "has both next and terminal: true",
                                  "a terminal stage hands off to nothing; drop one of them"))

    factory = raw.get("factory")
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        issues.append(ConfigIssue(source, f"{key}.factory", f"got {_describe(factory)}",
                                  "a 'package.module:callable' string"))
        factory = None
    args = raw.get("args")
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        issues.append(ConfigIssue(source, f"{key}.args", f"got {_describe(args)}",
                                  "a mapping of keyword arguments for the factory"))
        args = {}
    elif any(not isinstance(k, str) for k in args):
        bad_key = next(k for k in args if not isinstance(k, str))
        issues.append(ConfigIssue(source, f"{key}.args", f"has the key {_describe(bad_key)}",
                                  "keyword argument names are strings (quote such a key)"))
        args = {}

    fraction = None
    runtime = raw.get("runtime")
    if runtime is not None:
        if not isinstance(runtime, dict):
            issues.append(ConfigIssue(source, f"{key}.runtime", f"got {_describe(runtime)}",
                                      "a mapping with resources"))
        else:
            check_keys(runtime, ("resources",), source, f"{key}.runtime", issues)
            res = runtime.get("resources")
            if res is not None:
                if not isinstance(res, dict):
                    issues.append(ConfigIssue(source, f"{key}.runtime.resources",
                                              f"got {_describe(res)}",
                                              "a mapping with total_gpu_memory_fraction"))
                else:
                    check_keys(res, ("total_gpu_memory_fraction",), source,
                               f"{key}.runtime.resources", issues)
                    fraction = _fraction(res.get("total_gpu_memory_fraction"), source,
                                         f"{key}.runtime.resources.total_gpu_memory_fraction",
                                         issues)

    return StageConfig(
        name=name,
        process=process or None,
        gpus=gpus,
        tp_size=tp,
        next=nxt,
        stream_to=_as_name_list(raw.get("stream_to"), source, f"{key}.stream_to", issues),
        wait_for=_as_name_list(raw.get("wait_for"), source, f"{key}.wait_for", issues),
        terminal=terminal,
        factory=factory,
        args=tuple(sorted(args.items())),
        fraction=fraction,
    )


class _Scope:
    """What every check of one pipeline shares: where it came from, the issues found so far, and
    the stages and handoffs once they are known."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.issues: list[ConfigIssue] = []
        self.stages: list[StageConfig] = []
        self.names: set[str] = set()
        self.handoffs: set[tuple[str, str]] = set()

    def issue(self, key: str, problem: str, allowed: str = "") -> None:
        self.issues.append(ConfigIssue(self.source, key, problem, allowed))

    @property
    def known(self) -> str:
        return f"the stages are: {', '.join(sorted(self.names))}"

    def items(self, key: str, value: Any) -> list[tuple[int, Any]]:
        """The entries of a list-valued key (absent: none)."""
        if value is None:
            return []
        if not isinstance(value, list):
            self.issue(key, f"got {_describe(value)}", "a list")
            return []
        return list(enumerate(value))

    def listed_twice(self, e: tuple[str, str], key: str, first: dict[tuple[str, str], str]) -> bool:
        if e in first:
            self.issue(key, f"{e[0]} -> {e[1]} is listed twice",
                       f"keep one entry for it (the other is {first[e]})")
            return True
        first[e] = key
        return False

    def edge(self, value: Any, key: str) -> tuple[str, str] | None:
        return _edge(value, self.source, key, self.names, self.issues)


def build_pipeline(raw: dict[str, Any], *, name: str, variant: str, source: str,
                   extra_keys: dict[str, str] | None = None) -> Pipeline:
    """Validate a merged raw config and return the Pipeline, or raise ConfigError with every issue."""
    scope = _Scope(source)
    check_keys(raw, {**PIPELINE_KEYS, **(extra_keys or {})}, source, "", scope.issues)
    if raw.get("name") is not None:
        _check_name(raw["name"], source, "name", scope.issues, "pipeline")
    _check_stages(scope, raw.get("stages"))
    _check_handoffs(scope)
    roles = _check_roles(scope, raw.get("roles"))
    safe = _check_safe_edges(scope, raw.get("process_safe_edges"))
    reasons = _check_unsupported_edges(scope, raw.get("unsupported_edges"), safe)
    resources = _check_edge_resources(scope, raw.get("process_edge_resources"))
    fused = _check_fused_stages(scope, raw.get("fused_stages"))
    policy = _check_placement(scope, raw.get("placement"))
    sample_rate = _check_sample_rate(scope, raw.get("sample_rate"))
    voices = _check_voices(scope, raw.get("voices"))
    if scope.issues:
        raise ConfigError(scope.issues)
    return Pipeline(
        name=name,
        variant=variant,
        stages=tuple(scope.stages),
        roles=roles,
        process_safe_edges=frozenset(safe),
        unsupported_reasons=reasons,
        edge_resources=resources,
        fused_stages=fused,
        placement=policy,
        source=source,
        sample_rate=sample_rate,
        voices=voices,
    )


def _check_stages(scope: _Scope, raw_stages: Any) -> None:
    """Every stage valid on its own, names unique; nothing else can be checked without them."""
    if not isinstance(raw_stages, list) or not raw_stages:
        scope.issue("stages", "missing or empty",
                    "a pipeline lists its stages, each with a name and a process")
        raise ConfigError(scope.issues)
    for i, r in enumerate(raw_stages):
        s = _stage(r, i, scope.source, scope.issues)
        if s is None:
            continue
        if s.name in scope.names:
            scope.issue(f"stages[{i}].name", f"duplicate stage name {s.name!r}",
                        "stage names are unique within a pipeline")
            continue
        scope.names.add(s.name)
        scope.stages.append(s)


def _check_handoffs(scope: _Scope) -> None:
    """`next`, `stream_to` and `wait_for` name known stages, and the handoffs form no cycle."""
    order: dict[str, set[str]] = {s.name: set() for s in scope.stages}  # stage -> its sources
    for s in scope.stages:
        for field_name, targets in (("next", s.next), ("stream_to", s.stream_to)):
            for t in targets:
                if t not in scope.names:
                    scope.issue(f"stages[name={s.name}].{field_name}",
                                f"hands off to unknown stage {t!r}", scope.known)
                else:
                    scope.handoffs.add((s.name, t))
                    order[t].add(s.name)
        for src in s.wait_for:
            if src not in scope.names:
                scope.issue(f"stages[name={s.name}].wait_for", f"waits for unknown stage {src!r}",
                            scope.known)
            else:
                scope.handoffs.add((src, s.name))
                order[s.name].add(src)
    try:
        tuple(graphlib.TopologicalSorter(order).static_order())
    except graphlib.CycleError as err:
        # graphlib lists each stage before the one it hands off to; start at the earliest stage.
        cycle = list(err.args[1][:-1])
        order = [s.name for s in scope.stages]
        first = cycle.index(min(cycle, key=order.index))
        loop = " -> ".join(cycle[first:] + cycle[:first] + [cycle[first]])
        scope.issue("stages", f"the handoffs form a cycle: {loop}",
                    "a pipeline is acyclic; remove one of these handoffs")


def _check_roles(scope: _Scope, roles_raw: Any) -> tuple[tuple[str, str], ...]:
    roles_raw = {} if roles_raw is None else roles_raw
    roles: list[tuple[str, str]] = []
    if not isinstance(roles_raw, dict):
        scope.issue("roles", f"got {_describe(roles_raw)}", "a mapping alias -> stage")
        return ()
    for alias, target in roles_raw.items():
        if not _check_name(alias, scope.source, key_path("roles", alias), scope.issues, "role"):
            continue
        if not isinstance(target, str):
            scope.issue(key_path("roles", alias), f"got {_describe(target)}",
                        "a role names one stage, e.g. vocoder: vocoder")
        elif target not in scope.names:
            scope.issue(key_path("roles", alias), f"names unknown stage {target!r}", scope.known)
        else:
            roles.append((alias, target))
    return tuple(roles)


def _check_safe_edges(scope: _Scope, value: Any) -> set[tuple[str, str]]:
    safe: set[tuple[str, str]] = set()
    first: dict[tuple[str, str], str] = {}
    for i, item in scope.items("process_safe_edges", value):
        key = f"process_safe_edges[{i}]"
        e = scope.edge(item, key)
        if e is None or scope.listed_twice(e, key, first):
            continue
        if e not in scope.handoffs:
            scope.issue(key, f"{e[0]} -> {e[1]} is not a handoff of this pipeline",
                        "list only edges that next, stream_to or wait_for declare")
            continue
        safe.add(e)
    return safe


def _check_unsupported_edges(scope: _Scope, value: Any, safe: set[tuple[str, str]]
                             ) -> tuple[tuple[tuple[str, str], str], ...]:
    reasons: list[tuple[tuple[str, str], str]] = []
    first: dict[tuple[str, str], str] = {}
    for i, item in scope.items("unsupported_edges", value):
        key = f"unsupported_edges[{i}]"
        if not isinstance(item, dict) or "edge" not in item:
            scope.issue(key, f"got {_describe(item)}", "{edge: [a, b], reason: '...'}")
            continue
        check_keys(item, ("edge", "reason"), scope.source, key, scope.issues)
        e = scope.edge(item["edge"], f"{key}.edge")
        if e is None or scope.listed_twice(e, f"{key}.edge", first):
            continue
        if e not in scope.handoffs:
            scope.issue(f"{key}.edge", f"{e[0]} -> {e[1]} is not a handoff of this pipeline")
        elif e in safe:
            scope.issue(f"{key}.edge", f"{e[0]} -> {e[1]} is also listed in process_safe_edges",
                        "an edge is either process-safe or unsupported")
        else:
            reasons.append((e, str(item.get("reason") or "it carries process-local state")))
    return tuple(reasons)


def _check_edge_resources(scope: _Scope, value: Any) -> tuple[EdgeResources, ...]:
    resources: list[EdgeResources] = []
    first: dict[tuple[str, str], str] = {}
    for i, item in scope.items("process_edge_resources", value):
        key = f"process_edge_resources[{i}]"
        if not isinstance(item, dict) or "edge" not in item or "fractions" not in item:
            scope.issue(key, f"got {_describe(item)}",
                        "{edge: [a, b], fractions: {stage: 0.1, ...}}")
            continue
        check_keys(item, ("edge", "fractions"), scope.source, key, scope.issues)
        e = scope.edge(item["edge"], f"{key}.edge")
        if e is not None and scope.listed_twice(e, f"{key}.edge", first):
            e = None
        elif e is not None and e not in scope.handoffs:
            scope.issue(f"{key}.edge", f"{e[0]} -> {e[1]} is not a handoff of this pipeline")
            e = None
        fr = item["fractions"]
        if not isinstance(fr, dict) or not fr:
            scope.issue(f"{key}.fractions", f"got {_describe(fr)}", "a mapping stage -> fraction")
            continue
        pairs: list[tuple[str, float]] = []
        for st, val in fr.items():
            if st not in scope.names:
                scope.issue(key_path(f"{key}.fractions", st),
                            f"recommendation names unknown stage {st!r}", scope.known)
                continue
            v = _fraction(val, scope.source, key_path(f"{key}.fractions", st), scope.issues)
            if v is not None:
                pairs.append((st, v))
        if e is not None:
            resources.append(EdgeResources(edge=e, fractions=tuple(pairs)))
    return tuple(resources)


def _check_fused_stages(scope: _Scope, value: Any) -> tuple[tuple[str, ...], ...]:
    fused: list[tuple[str, ...]] = []
    in_fused: set[str] = set()
    by_name = {s.name: s for s in scope.stages}
    order = [s.name for s in scope.stages]
    for i, item in scope.items("fused_stages", value):
        key = f"fused_stages[{i}]"
        if not (isinstance(item, list) and len(item) >= 2 and all(isinstance(x, str) for x in item)):
            scope.issue(key, f"got {_describe(item)}", "a list of two or more stages")
            continue
        twice = [x for x in dict.fromkeys(item) if item.count(x) > 1]
        if twice:
            scope.issue(key, f"names stage {twice[0]!r} twice",
                        "list each stage once; a fused group has two or more stages")
            continue
        bad = [x for x in item if x not in scope.names]
        if bad:
            scope.issue(key, f"names unknown stage {bad[0]!r}", scope.known)
            continue
        tp = [x for x in item if by_name[x].is_tp]
        if tp:
            scope.issue(key, f"fuses tensor-parallel stage {tp[0]!r}",
                        "a TP stage runs one process per rank and cannot be fused")
            continue
        on = sorted({g for x in item for g in by_name[x].gpus})
        if len(on) > 1:
            scope.issue(key, f"fuses stages on GPUs {on}",
                        "fused stages share one process, and one process drives one GPU; put them "
                        "on one GPU or stop fusing them")
            continue
        again = [x for x in item if x in in_fused]
        if again:
            scope.issue(key, f"stage {again[0]!r} is in two fused groups",
                        "merge the two lists into one")
            continue
        in_fused.update(item)
        fused.append(tuple(sorted(item, key=order.index)))
    return tuple(fused)


def _check_placement(scope: _Scope, value: Any) -> PlacementPolicy:
    pol_raw = {} if value is None else value
    if not isinstance(pol_raw, dict):
        scope.issue("placement", f"got {_describe(pol_raw)}", "a mapping")
        return PlacementPolicy()
    check_keys(pol_raw, PLACEMENT_KEYS, scope.source, "placement", scope.issues)
    limit = pol_raw.get("max_total_gpu_memory_fraction_per_gpu", 1.0)
    limit_v = _fraction(limit, scope.source, "placement.max_total_gpu_memory_fraction_per_gpu",
                        scope.issues)
    req = pol_raw.get("require_memory_fraction_for_colocation", True)
    if not isinstance(req, bool):
        scope.issue("placement.require_memory_fraction_for_colocation", f"got {_describe(req)}",
                    "true or false")
        req = True
    return PlacementPolicy(limit_v if limit_v is not None else 1.0, req)


def _check_sample_rate(scope: _Scope, value: Any) -> int:
    if value is None:
        return DEFAULT_SAMPLE_RATE
    low, high = SAMPLE_RATES
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        scope.issue("sample_rate", f"got {_describe(value)}",
                    f"a whole number of Hz from {low} to {high}, e.g. 22050")
        return DEFAULT_SAMPLE_RATE
    return value


def _check_voices(scope: _Scope, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    scope.issue("voices", f"got {_describe(value)}",
                "a non-empty list of voice names, e.g. [joe]; leave it out to accept any voice")
    return ()
