"""A merged raw config checked as a whole pipeline and turned into a Pipeline.

The stages come first (each read by `stage_schema`); every other check needs their names and
handoffs: roles, process-safe and unsupported edges, edge resources, fused groups, placement,
sample rate and voices. All problems are gathered and raised together as one ConfigError.
"""

from __future__ import annotations

import graphlib
from typing import Any

from planner.config.keys import (
    DEFAULT_SAMPLE_RATE,
    PIPELINE_KEYS,
    PLACEMENT_KEYS,
    PROCESS_KEYS,
    SAMPLE_RATES,
)
from planner.config.stage_schema import read_stage
from planner.config.values import (
    check_keys,
    check_name,
    describe,
    key_path,
    read_edge,
    read_fraction,
)
from planner.errors import ConfigError, ConfigIssue
from planner.limits import MAX_COPIES, MAX_GPU_ID, shown
from planner.pipeline import MPS_MODES, EdgeResources, Pipeline, PlacementPolicy, StageConfig
from planner.plan import cpu_list


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
            self.issue(key, f"got {describe(value)}", "a list")
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
        return read_edge(value, self.source, key, self.names, self.issues)


def build_pipeline(raw: dict[str, Any], *, name: str, variant: str, source: str,
                   extra_keys: dict[str, str] | None = None) -> Pipeline:
    """Validate a merged raw config and return the Pipeline, or raise ConfigError with every
    issue."""
    scope = _Scope(source)
    check_keys(raw, {**PIPELINE_KEYS, **(extra_keys or {})}, source, "", scope.issues)
    if raw.get("name") is not None:
        check_name(raw["name"], source, "name", scope.issues, "pipeline")
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
    word_timestamps = _check_word_timestamps(scope, raw.get("word_timestamps"))
    copies, pins, devices = _check_processes(scope, raw.get("processes"))
    mps = _check_mps(scope, raw.get("mps"))
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
        word_timestamps=word_timestamps,
        process_copies=copies,
        process_cpus=pins,
        process_gpus=devices,
        mps=mps,
    )


def _check_stages(scope: _Scope, raw_stages: Any) -> None:
    """Every stage valid on its own, names unique; nothing else can be checked without them."""
    if not isinstance(raw_stages, list) or not raw_stages:
        scope.issue("stages", "missing or empty",
                    "a pipeline lists its stages, each with a name and a process")
        raise ConfigError(scope.issues)
    for i, r in enumerate(raw_stages):
        s = read_stage(r, i, scope.source, scope.issues)
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
        scope.issue("roles", f"got {describe(roles_raw)}", "a mapping alias -> stage")
        return ()
    for alias, target in roles_raw.items():
        if not check_name(alias, scope.source, key_path("roles", alias), scope.issues, "role"):
            continue
        if not isinstance(target, str):
            scope.issue(key_path("roles", alias), f"got {describe(target)}",
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
            scope.issue(key, f"got {describe(item)}", "{edge: [a, b], reason: '...'}")
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
            scope.issue(key, f"got {describe(item)}",
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
            scope.issue(f"{key}.fractions", f"got {describe(fr)}", "a mapping stage -> fraction")
            continue
        pairs: list[tuple[str, float]] = []
        for st, val in fr.items():
            if st not in scope.names:
                scope.issue(key_path(f"{key}.fractions", st),
                            f"recommendation names unknown stage {st!r}", scope.known)
                continue
            v = read_fraction(val, scope.source, key_path(f"{key}.fractions", st),
                              scope.issues)
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
        if not (isinstance(item, list) and len(item) >= 2
                and all(isinstance(x, str) for x in item)):
            scope.issue(key, f"got {describe(item)}", "a list of two or more stages")
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
        scope.issue("placement", f"got {describe(pol_raw)}", "a mapping")
        return PlacementPolicy()
    check_keys(pol_raw, PLACEMENT_KEYS, scope.source, "placement", scope.issues)
    limit = pol_raw.get("max_total_gpu_memory_fraction_per_gpu", 1.0)
    limit_v = read_fraction(limit, scope.source,
                            "placement.max_total_gpu_memory_fraction_per_gpu", scope.issues)
    req = pol_raw.get("require_memory_fraction_for_colocation", True)
    if not isinstance(req, bool):
        scope.issue("placement.require_memory_fraction_for_colocation", f"got {describe(req)}",
                    "true or false")
        req = True
    return PlacementPolicy(limit_v if limit_v is not None else 1.0, req)


def _check_sample_rate(scope: _Scope, value: Any) -> int:
    if value is None:
        return DEFAULT_SAMPLE_RATE
    low, high = SAMPLE_RATES
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        scope.issue("sample_rate", f"got {describe(value)}",
                    f"a whole number of Hz from {low} to {high}, e.g. 22050")
        return DEFAULT_SAMPLE_RATE
    return value


def _check_voices(scope: _Scope, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    scope.issue("voices", f"got {describe(value)}",
                "a non-empty list of voice names, e.g. [joe]; leave it out to accept any voice")
    return ()


def _check_word_timestamps(scope: _Scope, value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    scope.issue("word_timestamps", f"got {describe(value)}",
                "true when the card's stages yield word timings (`words`), else leave it out")
    return False


def _check_mps(scope: _Scope, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):  # YAML 1.1 reads a bare `on` / `off` as true / false
        return "on" if value else "off"
    if value in MPS_MODES:
        return value
    scope.issue("mps", f"got {describe(value)}", f"one of {', '.join(MPS_MODES)}")
    return None


def _check_processes(scope: _Scope, value: Any) -> tuple[tuple[tuple[str, int], ...],
                                                      tuple[tuple[str, tuple[int, ...]], ...],
                                                      tuple[tuple[str, tuple[int, ...]], ...]]:
    """`processes: {NAME: {copies: N, cpus: CPUS, gpus: [IDS]}}`: copies, pinned CPUs and the
    GPU of each copy per group. A name no stage runs in is allowed (a variant or a placement
    flag may create that process); it then has no effect."""
    if value is None:
        return (), (), ()
    example = "e.g. processes: {vocoder: {copies: 2}}"
    if not isinstance(value, dict):
        scope.issue("processes", f"got {describe(value)}", f"a mapping of process name -> "
                    f"{{copies: N}}, {example}")
        return (), (), ()
    out, pins, devices = [], [], []
    for name, entry in value.items():
        key = f"processes.{name}"
        if not check_name(name, scope.source, key, scope.issues, "process", process=True):
            continue
        if not isinstance(entry, dict):
            scope.issue(key, f"got {describe(entry)}", f"a mapping with copies, {example}")
            continue
        check_keys(entry, PROCESS_KEYS, scope.source, key, scope.issues)
        if "cpus" in entry:
            cpus = entry["cpus"]
            # YAML reads `cpus: 0` as a number and `cpus: 0-1` or `0,2` as text
            parsed = (cpu_list(str(cpus)) if isinstance(cpus, (int, str))
                      and not isinstance(cpus, bool) else None)
            if parsed is None:
                scope.issue(f"{key}.cpus", f"got {shown(cpus)}",
                            "the CPUs its copies may run on, as taskset reads them: "
                            f"e.g. processes: {{{name}: {{cpus: 0-1}}}} or {{cpus: '0,2'}}")
            else:
                pins.append((name, parsed))
        gpus = _copy_gpus(scope, key, entry.get("gpus"))
        n = entry.get("copies", len(gpus) if gpus else 1)
        if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_COPIES:
            scope.issue(f"{key}.copies", f"got {shown(n)}",
                        f"a whole number of copies from 1 to {MAX_COPIES}, {example}")
            continue
        if gpus and len(gpus) != n:
            scope.issue(f"{key}.gpus", f"lists {len(gpus)} GPU{'s' if len(gpus) != 1 else ''} "
                        f"for {n} cop{'ies' if n != 1 else 'y'}",
                        f"give one GPU id per copy, e.g. gpus: {[gpus[0]] * n}")
            continue
        out.append((name, n))
        if gpus:
            devices.append((name, gpus))
    return tuple(out), tuple(pins), tuple(devices)


def _copy_gpus(scope: _Scope, key: str, value: Any) -> tuple[int, ...]:
    """`gpus: [1, 2]`: the GPU of each copy, in copy order; () when absent or reported."""
    if value is None:
        return ()
    if (isinstance(value, list) and value and all(
            isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= MAX_GPU_ID
            for g in value)):
        return tuple(value)
    scope.issue(f"{key}.gpus", f"got {shown(value)}",
                f"a list of GPU ids from 0 to {MAX_GPU_ID}, one per copy, e.g. gpus: [0, 1]")
    return ()
