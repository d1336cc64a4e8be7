"""Plain data for `--format json` (and `planner.result_dict`): people read `message`, `because` and
`hint`; scripts read the structured fields of the conflict and the fix, never the prose."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from planner.pipeline import Pipeline
from planner.plan import (
    Assign,
    ComputeRequest,
    Copies,
    Diagnostic,
    Fix,
    Isolate,
    Pin,
    Plan,
    PlanWarning,
    Request,
    Result,
    Threads,
)
from planner.flags import flags

if TYPE_CHECKING:
    from planner.cards import Card


def request_dict(r: Request | ComputeRequest) -> dict[str, Any]:
    match r:
        case Isolate(stage=stage):
            return {"isolate": stage}
        case Assign(stage=stage, process=process):
            return {"assign": {"stage": stage, "process": process}}
        case Threads(stage=stage, count=count):
            return {"threads": {"stage": stage, "count": count}}
        case Copies(process=process, count=count):
            return {"copies": {"process": process, "count": count}}
        case Pin(process=process, cpus=cpus):
            return {"cpus": {"process": process, "cpus": list(cpus or ())}}
    raise TypeError(f"not a placement request: {r!r}")


def request_from_dict(data: dict[str, Any]) -> Request | ComputeRequest:
    """The inverse of `request_dict`."""
    if set(data) == {"isolate"}:
        return Isolate(str(data["isolate"]))
    if set(data) == {"assign"}:
        return Assign(str(data["assign"]["stage"]), str(data["assign"]["process"]))
    if set(data) == {"threads"}:
        return Threads(str(data["threads"]["stage"]), int(data["threads"]["count"]))
    if set(data) == {"copies"}:
        return Copies(str(data["copies"]["process"]), int(data["copies"]["count"]))
    if set(data) == {"cpus"}:
        return Pin(str(data["cpus"]["process"]), tuple(int(c) for c in data["cpus"]["cpus"]))
    raise ValueError(f"not a placement request: {data!r}")


def fix_dict(fix: Fix) -> dict[str, Any]:
    """A fix as data: the flags to drop and to add (as typed, and as request dicts), the YAML
    overlay to merge into the config, and the fix offered after "or"."""
    return {
        "drop": list(flags(fix.drop)),
        "add": list(flags(fix.add)),
        "drop_requests": [request_dict(r) for r in fix.drop],
        "add_requests": [request_dict(r) for r in fix.add],
        "config": fix.config,
        "otherwise": fix_dict(fix.otherwise) if fix.otherwise is not None else None,
    }


def _plain(value: Any) -> Any:
    """A typed conflict's fields as JSON values: requests as request dicts, tuples as lists."""
    if isinstance(value, (Isolate, Assign, Threads, Copies, Pin)):
        return request_dict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def conflict_dict(conflict: Any) -> dict[str, Any] | None:
    if conflict is None:
        return None
    return {"kind": type(conflict).__name__, **_plain(conflict)}


def diagnostic_dict(d: Diagnostic) -> dict[str, Any]:
    return {
        "code": d.code,
        "message": d.message,
        "stages": list(d.stages),
        "edge": list(d.edge) if d.edge else None,
        "gpu": d.gpu,
        "because": list(d.because),
        "hint": d.hint,
        "fix": fix_dict(d.fix) if d.fix else None,
        "rule": d.rule,
        "conflict": conflict_dict(d.conflict),
    }


def warning_dict(w: PlanWarning) -> dict[str, Any]:
    out: dict[str, Any] = {"code": w.code, "message": w.message, "stage": w.stage}
    if w.edge is not None:
        out["edge"] = list(w.edge)
    return out


def _tp_dict(plan: Plan | None) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in plan.tp_processes if plan else ():
        out.setdefault(p.stage, []).append(p.name)
    return out


def result_dict(result: Result) -> dict[str, Any]:
    plan = result.plan if result.ok else None
    return {
        "model": result.model,
        "variant": result.variant,
        "status": result.status,
        "changed": result.changed,
        "declared_by": result.declared_by,
        "groups": [
            {"name": g.name, "stages": list(g.stages), "gpu": g.gpu, "changed": g.changed,
             "copies": g.copies, "cpus": list(g.cpus) or None,
             "copy_cpus": [list(c) for c in g.copy_cpus()] if g.cpus else None,
             "devices": list(g.devices) or None,
             "memory_mib": plan.process_memory_mib(g.stages)}
            for g in (plan.groups if plan else ())
        ],
        "tp_processes": _tp_dict(plan),
        "stages": [
            {
                "name": s.name,
                "process": s.process,
                "gpu": s.gpu,
                "tp_size": s.tp_size,
                "fraction": s.fraction,
                "fraction_source": s.fraction_source,
                "threads": s.threads,
                "gpu_compute_fraction": s.gpu_compute_fraction,
                "host_memory_mib": s.host_memory_mib,
            }
            for s in (plan.stages if plan else ())
        ],
        # host memory of every worker process, every copy counted (None: some stage declares none)
        "memory_mib": None if plan is None else plan.memory_mib(),
        "cpu": None if plan is None or plan.cpu is None else {
            "threads": plan.cpu.threads, "cpus": plan.cpu.cpus,
            "oversubscribed": plan.cpu.oversubscribed},
        "gpus": [
            {
                "id": g.id,
                "total": g.total,
                "limit": g.limit,
                "processes": list(g.processes),
                "missing_fraction": list(g.missing_fraction),
            }
            for g in (plan.gpus if plan else ())
        ],
        "mps": None if plan is None else plan.mps,
        # keys of an engine's config the planner does not model: kept, written back out
        "carried": [] if plan is None else [{"key": c.key, "value": c.value}
                                            for c in plan.carried],
        "warnings": [warning_dict(w) for w in result.warnings],
        "diagnostics": [diagnostic_dict(d) for d in result.diagnostics],
        **({} if result.cluster is None else scale_out_dict(result)),
    }


def scale_out_dict(result: Result) -> dict[str, Any]:
    """`replicas` (logical GPU id, as a string key, -> physical GPU index on its node) and
    `cluster` (nodes and every physical GPU's total against its limit)."""
    packing, cluster = result.packing, result.cluster
    return {
        "replicas": [] if packing is None else [
            {"index": r.index, "node": r.node, "gpus": {str(l): g for l, g in r.gpus}}
            for r in packing.replicas],
        "replicas_requested": None if packing is None else packing.requested,
        "replicas_max": None if packing is None else packing.most,
        "replicas_max_proved": None if packing is None else packing.proved,
        "cluster": {
            "source": cluster.source,
            "nodes": [{"name": n.name, "gpus": n.gpus, "cpus": n.cpus} for n in cluster.nodes],
            "gpus": [] if packing is None else [
                {"node": g.node, "id": g.id, "total": round(g.total, 6), "limit": g.limit,
                 "replicas": list(g.replicas)} for g in packing.loads],
        },
    }


def result_json(result: Result) -> str:
    return json.dumps(result_dict(result), indent=2)


# -- planner show / planner models ----------------------------------------------------------------
def show_dict(pipeline: Pipeline, plan: Plan) -> dict[str, Any]:
    handoffs = pipeline.handoffs()
    return {
        "model": pipeline.name,
        "variant": pipeline.variant,
        "stages": [
            {"name": s.name, "process": plan.stage(s.name).process, "gpu": plan.stage(s.name).gpu,
             "tp_size": s.tp_size, "fraction": s.fraction, "factory": s.factory,
             "threads": plan.stage(s.name).threads}
            for s in pipeline.stages
        ],
        "handoffs": [
            {"source": u, "target": v, "kinds": list(k),
             "safe": pipeline.unsupported_reason((u, v)) is None,
             "reason": pipeline.unsupported_reason((u, v))}
            for (u, v), k in handoffs.items()
        ],
        "groups": [{"name": g.name, "stages": list(g.stages), "gpu": g.gpu, "copies": g.copies,
                    "cpus": list(g.cpus) or None} for g in plan.groups],
        "tp_processes": {p.stage: [q.name for q in plan.tp_processes if q.stage == p.stage]
                         for p in plan.tp_processes},
        "gpus": [{"id": g.id, "total": g.total, "limit": g.limit, "processes": list(g.processes),
                  "missing_fraction": list(g.missing_fraction)} for g in plan.gpus],
        "roles": dict(pipeline.roles),
        "recommendations": [
            {"edge": list(r.edge), "fractions": dict(r.fractions)} for r in pipeline.edge_resources
        ],
        "fused_stages": [list(f) for f in pipeline.fused_stages],
        "placement": {
            "max_total_gpu_memory_fraction_per_gpu":
                pipeline.placement.max_total_gpu_memory_fraction_per_gpu,
            "require_memory_fraction_for_colocation":
                pipeline.placement.require_memory_fraction_for_colocation,
        },
    }


def models_dict(cards: tuple[Card, ...]) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "display_name": c.display_name, "variants": list(c.variants),
         "model_paths": list(c.model_paths), "architectures": list(c.architectures),
         "description": c.description}
        for c in cards
    ]
