"""The one YAML schema shared by model cards and user configs: reading, overlaying, validating.

Raw dicts are merged first (card, then variant, then user overlay) and validated once as a whole,
so a rule is checked in one place whatever layer a value came from.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import networkx as nx
import yaml

from planner.errors import ConfigError, ConfigIssue
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
PLACEMENT_KEYS = ("max_total_gpu_memory_fraction_per_gpu", "require_memory_fraction_for_colocation")


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read one YAML file into a dict; malformed YAML names the line."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            ConfigIssue(str(path), "", f"cannot read the file ({exc.strerror or exc})",
                        "pass an existing YAML file with --config")
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(
            ConfigIssue(str(path), "", f"malformed YAML at {where}: {problem}",
                        "fix the YAML syntax there (indentation, a missing ':' or an unclosed bracket)")
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
            issues.append(ConfigIssue(source, f"{key}.{k}" if key else str(k), "unknown key",
                                      f"allowed keys here: {names}"))


def overlay(base: dict[str, Any], layer: dict[str, Any], source: str) -> dict[str, Any]:
    """Apply an overlay: stage entries change only the fields they give; other keys replace."""
    issues: list[ConfigIssue] = []
    out = copy.deepcopy(base)
    base_stages = {s.get("name"): s for s in out.get("stages", []) if isinstance(s, dict)}
    for key, value in layer.items():
        if key in ("model", "variant", "name", "description"):
            continue  # selection keys, not pipeline content
        if key == "stages":
            if not isinstance(value, list):
                issues.append(ConfigIssue(source, "stages", "must be a list of stage entries"))
                continue
            for i, entry in enumerate(value):
                if not isinstance(entry, dict) or "name" not in entry:
                    issues.append(ConfigIssue(source, f"stages[{i}]",
                                              "an overlay stage entry must be a mapping with a name",
                                              "e.g. - {name: vocoder, process: vocoder}"))
                    continue
                name = entry["name"]
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
    if issues:
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
    issues.append(ConfigIssue(source, key, f"got {value!r}", "a stage name or a list of stage names"))
    return ()


def _fraction(value: Any, source: str, key: str, issues: list[ConfigIssue]) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) \
            or not 0 < value <= 1:
        issues.append(ConfigIssue(source, key, f"fraction {value!r} is outside (0, 1]",
                                  "a GPU memory fraction is a number greater than 0 and at most 1,"
                                  " e.g. 0.10"))
        return None
    return float(value)


def _edge(value: Any, source: str, key: str, stages: set[str],
          issues: list[ConfigIssue]) -> tuple[str, str] | None:
    if not (isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value)):
        issues.append(ConfigIssue(source, key, f"got {value!r}", "an edge is [source, target]"))
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
        issues.append(ConfigIssue(source, key, f"got {raw!r}", "each stage is a mapping with a name"))
        return None
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        issues.append(ConfigIssue(source, f"{key}.name", "missing or not a string",
                                  "every stage needs a name"))
        return None
    key = f"stages[name={name}]"
    check_keys(raw, STAGE_KEYS, source, key, issues)

    tp = raw.get("tp_size", 1)
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        issues.append(ConfigIssue(source, f"{key}.tp_size", f"got {tp!r}", "a positive integer"))
        tp = 1

    gpu = raw.get("gpu")
    gpus: tuple[int, ...] = ()
    if gpu is None:
        gpus = ()
    elif isinstance(gpu, bool):
        issues.append(ConfigIssue(source, f"{key}.gpu", f"got {gpu!r}",
                                  "a GPU id (int), a list of ids for tensor parallelism, or null"))
    elif isinstance(gpu, int):
        if tp > 1:
            issues.append(ConfigIssue(source, f"{key}.gpu",
                                      f"tensor-parallel stage (tp_size {tp}) has a single gpu {gpu}",
                                      f"list one GPU id per rank, e.g. gpu: {list(range(tp))}"))
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
        issues.append(ConfigIssue(source, f"{key}.gpu", f"got {gpu!r}",
                                  "a GPU id (int), a list of ids for tensor parallelism, or null"))
    if any(g < 0 for g in gpus):
        issues.append(ConfigIssue(source, f"{key}.gpu", "GPU ids cannot be negative"))

    process = raw.get("process")
    if process is not None and (not isinstance(process, str) or not process.strip()):
        issues.append(ConfigIssue(source, f"{key}.process", f"got {process!r}",
                                  "a non-empty process name"))
        process = None
    if process is None and tp == 1:
        issues.append(ConfigIssue(source, f"{key}.process", "missing",
                                  f"every stage with tp_size 1 declares its process, e.g. "
                                  f"process: pipeline"))

    terminal = raw.get("terminal", False)
    if not isinstance(terminal, bool):
        issues.append(ConfigIssue(source, f"{key}.terminal", f"got {terminal!r}", "true or false"))
        terminal = False
    nxt = _as_name_list(raw.get("next"), source, f"{key}.next", issues)
    if terminal and nxt:
        issues.append(ConfigIssue(source, key, "has both next and terminal: true",
                                  "a terminal stage hands off to nothing; drop one of them"))

    factory = raw.get("factory")
    if factory is not None and (not isinstance(factory, str) or ":" not in factory):
        issues.append(ConfigIssue(source, f"{key}.factory", f"got {factory!r}",
                                  "a 'package.module:callable' string"))
        factory = None
    args = raw.get("args") or {}
    if not isinstance(args, dict):
        issues.append(ConfigIssue(source, f"{key}.args", f"got {args!r}",
                                  "a mapping of keyword arguments for the factory"))
        args = {}

    fraction = None
    runtime = raw.get("runtime")
    if runtime is not None:
        if not isinstance(runtime, dict):
            issues.append(ConfigIssue(source, f"{key}.runtime", f"got {runtime!r}",
                                      "a mapping with resources"))
        else:
            check_keys(runtime, ("resources",), source, f"{key}.runtime", issues)
            res = runtime.get("resources")
            if res is not None:
                if not isinstance(res, dict):
                    issues.append(ConfigIssue(source, f"{key}.runtime.resources", f"got {res!r}",
                                              "a mapping with total_gpu_memory_fraction"))
                else:
                    check_keys(res, ("total_gpu_memory_fraction",), source,
                               f"{key}.runtime.resources", issues)
                    fraction = _fraction(res.get("total_gpu_memory_fraction"), source,
                                         f"{key}.runtime.resources.total_gpu_memory_fraction",
                                         issues)

    return StageConfig(
        name=name,
        process=process.strip() if isinstance(process, str) else None,
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


def build_pipeline(raw: dict[str, Any], *, name: str, variant: str, source: str,
                   extra_keys: dict[str, str] | None = None) -> Pipeline:
    """Validate a merged raw config and return the Pipeline, or raise ConfigError with every issue."""
    issues: list[ConfigIssue] = []
    check_keys(raw, {**PIPELINE_KEYS, **(extra_keys or {})}, source, "", issues)

    raw_stages = raw.get("stages")
    if not isinstance(raw_stages, list) or not raw_stages:
        issues.append(ConfigIssue(source, "stages", "missing or empty",
                                  "a pipeline lists its stages, each with a name and a process"))
        raise ConfigError(issues)
    stages: list[StageConfig] = []
    seen: set[str] = set()
    for i, r in enumerate(raw_stages):
        s = _stage(r, i, source, issues)
        if s is None:
            continue
        if s.name in seen:
            issues.append(ConfigIssue(source, f"stages[{i}].name", f"duplicate stage name {s.name!r}",
                                      "stage names are unique within a pipeline"))
            continue
        seen.add(s.name)
        stages.append(s)

    names = {s.name for s in stages}
    graph = nx.DiGraph()
    graph.add_nodes_from(s.name for s in stages)
    for s in stages:
        for field_name, targets in (("next", s.next), ("stream_to", s.stream_to)):
            for t in targets:
                if t not in names:
                    issues.append(ConfigIssue(source, f"stages[name={s.name}].{field_name}",
                                              f"hands off to unknown stage {t!r}",
                                              f"the stages are: {', '.join(sorted(names))}"))
                else:
                    graph.add_edge(s.name, t)
        for src in s.wait_for:
            if src not in names:
                issues.append(ConfigIssue(source, f"stages[name={s.name}].wait_for",
                                          f"waits for unknown stage {src!r}",
                                          f"the stages are: {', '.join(sorted(names))}"))
            else:
                graph.add_edge(src, s.name)
    try:
        cycle = nx.find_cycle(graph)
        loop = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        issues.append(ConfigIssue(source, "stages", f"the handoffs form a cycle: {loop}",
                                  "a pipeline is acyclic; remove one of these handoffs"))
    except nx.NetworkXNoCycle:
        pass
    handoffs = set(graph.edges)

    roles_raw = raw.get("roles") or {}
    roles: list[tuple[str, str]] = []
    if not isinstance(roles_raw, dict):
        issues.append(ConfigIssue(source, "roles", f"got {roles_raw!r}", "a mapping alias -> stage"))
    else:
        for alias, target in roles_raw.items():
            if target not in names:
                issues.append(ConfigIssue(source, f"roles.{alias}", f"names unknown stage {target!r}",
                                          f"the stages are: {', '.join(sorted(names))}"))
            else:
                roles.append((str(alias), target))

    def edges_of(key: str, items: Any) -> list[tuple[int, Any]]:
        if items is None:
            return []
        if not isinstance(items, list):
            issues.append(ConfigIssue(source, key, f"got {items!r}", "a list"))
            return []
        return list(enumerate(items))

    safe: set[tuple[str, str]] = set()
    for i, item in edges_of("process_safe_edges", raw.get("process_safe_edges")):
        e = _edge(item, source, f"process_safe_edges[{i}]", names, issues)
        if e is None:
            continue
        if e not in handoffs:
            issues.append(ConfigIssue(source, f"process_safe_edges[{i}]",
                                      f"{e[0]} -> {e[1]} is not a handoff of this pipeline",
                                      "list only edges that next, stream_to or wait_for declare"))
            continue
        safe.add(e)

    reasons: list[tuple[tuple[str, str], str]] = []
    for i, item in edges_of("unsupported_edges", raw.get("unsupported_edges")):
        key = f"unsupported_edges[{i}]"
        if not isinstance(item, dict) or "edge" not in item:
            issues.append(ConfigIssue(source, key, f"got {item!r}", "{edge: [a, b], reason: '...'}"))
            continue
        check_keys(item, ("edge", "reason"), source, key, issues)
        e = _edge(item["edge"], source, f"{key}.edge", names, issues)
        if e is None:
            continue
        if e not in handoffs:
            issues.append(ConfigIssue(source, f"{key}.edge",
                                      f"{e[0]} -> {e[1]} is not a handoff of this pipeline"))
        elif e in safe:
            issues.append(ConfigIssue(source, f"{key}.edge",
                                      f"{e[0]} -> {e[1]} is also listed in process_safe_edges",
                                      "an edge is either process-safe or unsupported"))
        else:
            reasons.append((e, str(item.get("reason") or "it carries process-local state")))

    resources: list[EdgeResources] = []
    for i, item in edges_of("process_edge_resources", raw.get("process_edge_resources")):
        key = f"process_edge_resources[{i}]"
        if not isinstance(item, dict) or "edge" not in item or "fractions" not in item:
            issues.append(ConfigIssue(source, key, f"got {item!r}",
                                      "{edge: [a, b], fractions: {stage: 0.1, ...}}"))
            continue
        check_keys(item, ("edge", "fractions"), source, key, issues)
        e = _edge(item["edge"], source, f"{key}.edge", names, issues)
        if e is not None and e not in handoffs:
            issues.append(ConfigIssue(source, f"{key}.edge",
                                      f"{e[0]} -> {e[1]} is not a handoff of this pipeline"))
            e = None
        fr = item["fractions"]
        if not isinstance(fr, dict) or not fr:
            issues.append(ConfigIssue(source, f"{key}.fractions", f"got {fr!r}",
                                      "a mapping stage -> fraction"))
            continue
        pairs: list[tuple[str, float]] = []
        for st, val in fr.items():
            if st not in names:
                issues.append(ConfigIssue(source, f"{key}.fractions.{st}",
                                          f"recommendation names unknown stage {st!r}",
                                          f"the stages are: {', '.join(sorted(names))}"))
                continue
            v = _fraction(val, source, f"{key}.fractions.{st}", issues)
            if v is not None:
                pairs.append((st, v))
        if e is not None:
            resources.append(EdgeResources(edge=e, fractions=tuple(pairs)))

    fused: list[tuple[str, ...]] = []
    in_fused: set[str] = set()
    for i, item in edges_of("fused_stages", raw.get("fused_stages")):
        key = f"fused_stages[{i}]"
        if not (isinstance(item, list) and len(item) >= 2 and all(isinstance(x, str) for x in item)):
            issues.append(ConfigIssue(source, key, f"got {item!r}", "a list of two or more stages"))
            continue
        bad = [x for x in item if x not in names]
        if bad:
            issues.append(ConfigIssue(source, key, f"names unknown stage {bad[0]!r}",
                                      f"the stages are: {', '.join(sorted(names))}"))
            continue
        tp = [x for x in item if next(s for s in stages if s.name == x).is_tp]
        if tp:
            issues.append(ConfigIssue(source, key, f"fuses tensor-parallel stage {tp[0]!r}",
                                      "a TP stage runs one process per rank and cannot be fused"))
            continue
        on = sorted({g for x in item for g in next(s for s in stages if s.name == x).gpus})
        if len(on) > 1:
            issues.append(ConfigIssue(source, key, f"fuses stages on GPUs {on}",
                                      "fused stages share one process, and one process drives one "
                                      "GPU; put them on one GPU or stop fusing them"))
            continue
        again = [x for x in item if x in in_fused]
        if again:
            issues.append(ConfigIssue(source, key, f"stage {again[0]!r} is in two fused groups",
                                      "merge the two lists into one"))
            continue
        in_fused.update(item)
        order = [s.name for s in stages]
        fused.append(tuple(sorted(dict.fromkeys(item), key=order.index)))

    pol_raw = raw.get("placement") or {}
    policy = PlacementPolicy()
    if not isinstance(pol_raw, dict):
        issues.append(ConfigIssue(source, "placement", f"got {pol_raw!r}", "a mapping"))
    else:
        check_keys(pol_raw, PLACEMENT_KEYS, source, "placement", issues)
        limit = pol_raw.get("max_total_gpu_memory_fraction_per_gpu", 1.0)
        limit_v = _fraction(limit, source, "placement.max_total_gpu_memory_fraction_per_gpu", issues)
        req = pol_raw.get("require_memory_fraction_for_colocation", True)
        if not isinstance(req, bool):
            issues.append(ConfigIssue(source, "placement.require_memory_fraction_for_colocation",
                                      f"got {req!r}", "true or false"))
            req = True
        policy = PlacementPolicy(limit_v if limit_v is not None else 1.0, req)

    if issues:
        raise ConfigError(issues)
    return Pipeline(
        name=name,
        variant=variant,
        stages=tuple(stages),
        roles=tuple(roles),
        process_safe_edges=frozenset(safe),
        unsupported_reasons=tuple(reasons),
        edge_resources=tuple(resources),
        fused_stages=tuple(fused),
        placement=policy,
        source=source,
    )
