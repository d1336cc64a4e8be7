"""`planner tune`'s JSON (every plan ranked, with what serving measured), and the flags and YAML
overlay that make the chosen placement persistent; the answer on screen is
`planner.tune.screen`'s. Drawn from tune's values (its ranking, scores and tie notes); it decides
nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planner.plan import Assign, ComputeRequest, Isolate, Plan, Request, cpu_text
from planner.flags import command_line, flags
from planner.tune.answer import recommended
from planner.tune.choose import Candidate, Choice, tie_note
from planner.tune.verify import Measured, Rows

if TYPE_CHECKING:
    from rich.console import Console

    from planner.tune.model import Prediction, Workload
    from planner.tune.profile import Profile
    from planner.tune.verify import Verdict


def persistent_overlay(plan: Plan, requests: tuple[Request | ComputeRequest, ...]
                       ) -> list[dict[str, Any]]:
    """The `stages:` entries of a config overlay that makes this placement the declared one,
    each stage's threads above one included (its groups' copies: `persistent_processes`).

    Recommended fractions apply only while a placement flag splits their handoff, so a persistent
    config declares them itself."""
    moved = {}
    for r in requests:
        match r:
            case Isolate(stage=stage):
                moved[stage] = plan.stage(stage).process or stage
            case Assign(stage=stage, process=process):
                moved[stage] = process
    entries = []
    for s in plan.stages:
        entry: dict[str, Any] = {}
        if s.name in moved:
            entry["process"] = moved[s.name]
        if s.threads > 1:
            entry["threads"] = s.threads
        if s.fraction_source == "recommended":
            entry["runtime"] = {"resources": {"total_gpu_memory_fraction": s.fraction}}
        if entry:
            entries.append({"name": s.name, **entry})
    return entries


def persistent_processes(plan: Plan) -> dict[str, dict[str, Any]]:
    """The `processes:` of a config overlay: each group run in more than one copy or pinned."""
    out: dict[str, dict[str, Any]] = {}
    for g in plan.groups:
        entry: dict[str, Any] = {}
        if g.copies > 1:
            entry["copies"] = g.copies
        if g.cpus:
            entry["cpus"] = cpu_text(g.cpus)
        if entry:
            out[g.name] = entry
    return out


def overlay_yaml(model: str, variant: str, entries: list[dict[str, Any]],
                 processes: dict[str, dict[str, Any]] | None = None) -> str:
    lines = [f"model: {model}"] + ([f"variant: {variant}"] if variant != "default" else [])
    if entries:  # copies alone change no stage
        lines.append("stages:")
    for e in entries:
        parts = [f"name: {e['name']}"]
        if "process" in e:
            parts.append(f"process: {e['process']}")
        if "threads" in e:
            parts.append(f"threads: {e['threads']}")
        if "runtime" in e:
            v = e["runtime"]["resources"]["total_gpu_memory_fraction"]
            parts.append(f"runtime: {{resources: {{total_gpu_memory_fraction: {v:g}}}}}")
        lines.append(f"  - {{{', '.join(parts)}}}")
    if processes:
        lines.append("processes:")
        for name, p in processes.items():
            parts = [f"copies: {p['copies']}"] if "copies" in p else []
            if "cpus" in p:  # quoted: a CPU list is text to YAML, which `0` alone is not
                parts.append(f"cpus: '{p['cpus']}'")
            lines.append(f"  {name}: {{{', '.join(parts)}}}")
    return "\n".join(lines)


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 2)


def _prediction_dict(p: Prediction) -> dict[str, Any]:
    return {"throughput_rps": round(p.throughput_rps, 3),
            "latency_p50_ms": round(p.latency_p50_ms, 2),
            "latency_p99_ms": round(p.latency_p99_ms, 2),
            "latency_p90_ms": _round(p.latency_p90_ms),
            "ttfa_p50_ms": _round(p.ttfa_p50_ms),
            "ttfa_p90_ms": _round(p.ttfa_p90_ms),
            "ttfa_p99_ms": _round(p.ttfa_p99_ms),
            "bottleneck": {"resource": p.bottleneck[0], "busy": p.bottleneck[1]}}


def _workload_dict(w: Workload) -> dict[str, Any]:
    if w.concurrency is not None:
        return {"loop": "closed", "concurrency": w.concurrency}
    return {"loop": "open", "rate": w.rate, "arrivals": "poisson"}


def candidate_dict(c: Candidate, measured: list[dict[str, Any]] | None) -> dict[str, Any]:
    return {
        "flags": list(flags(c.requests)),
        "groups": [{"name": g.name, "stages": list(g.stages), "copies": g.copies,
                    "cpus": list(g.cpus) or None} for g in c.plan.groups],
        "threads": {s.name: s.threads for s in c.plan.stages},
        "processes": c.processes,
        "memory_mib": c.memory_mib,
        # The last workload given (the heaviest, by convention) is the headline; all are listed.
        "predicted": _prediction_dict(c.predicted[-1]),
        "predicted_by_workload": [_prediction_dict(p) for p in c.predicted],
        "measured": None if measured is None else measured[-1],
        "measured_by_workload": measured,
    }


def choice_dict(choice: Choice, profile: Profile, why: str,
                measured: Measured | None = None,
                verdict: Verdict | None = None) -> dict[str, Any]:
    measured = measured or Measured()
    ranked = list(choice.ranked)
    best = recommended(choice, verdict)
    return {
        "model": profile.model,
        "variant": profile.variant,
        "objective": choice.objective,
        "workload": [_workload_dict(w) for w in choice.workloads],
        "profile": profile.to_dict(),
        "candidates": [{**candidate_dict(c, measured.ranked.get(i)),
                        "tie": tie_note(choice, i) or None}
                       for i, c in enumerate(ranked)],
        "excluded": [{"flags": list(flags(c.requests)), "why": reason,
                      "measured_by_workload": excluded_measured(choice, c, measured)}
                     for c, reason in choice.excluded],
        "best": 0 if best is not None else None,
        "why": why,
        # --verify: the placement that measured best (an index into candidates), by how much it
        # beat the predicted pick, and whether that is more than a tie, so `persist` is its
        "verified": None if verdict is None else {
            "best": verdict.best, "gain": round(verdict.gain, 4),
            "overturned": verdict.overturned},
        "persist": persist_dict(profile, best),
    }


def persist_dict(profile: Profile, best: Candidate | None) -> dict[str, Any] | None:
    """The flags and the config overlay that run `best` (None: nothing to run)."""
    if best is None:
        return None
    return {"flags": list(flags(best.requests)),
            "overlay": {"model": profile.model,
                        "stages": persistent_overlay(best.plan, best.requests),
                        **({"processes": procs} if (procs := persistent_processes(best.plan))
                           else {})}}


def excluded_measured(choice: Choice, c: Candidate, measured: Measured) -> Rows | None:
    """What serving measured of an excluded candidate: only the declared topology is served
    when excluded (it is the bench's baseline)."""
    if c is not choice.declared and c.requests:
        return None
    return measured.excluded_baseline


# The plan column's least width on screen: flags share a line up to it (or up to what the
# numbers leave), so a row takes a line or two.
PLAN_WIDTH = 30


def placement_cell(c: Candidate, width: int = 0) -> str:
    """The plan's flags, as many to a line as fit in `width` (0: one to a line), so a narrow
    terminal never breaks a flag from its value."""
    lines: list[str] = []
    for flag in (command_line((r,)) for r in c.requests):
        if lines and len(lines[-1]) + 1 + len(flag) <= width:
            lines[-1] += " " + flag
        else:
            lines.append(flag)
    return "\n".join(lines) or "declared"


def print_unsqueezed(console: Console, table: Any) -> None:
    """Print `table`; written to a file or a pipe, at its full width, however wide. Squeezed into
    the console's fixed width it would cut numbers to `1.…`, and no reader scrolls a file."""
    from rich.measure import Measurement

    if console.is_terminal:
        console.print(table)
        return
    natural = Measurement.get(console, console.options.update_width(10_000), table).maximum
    fixed = console.width  # print(width=) can only narrow, so widen the console for this table
    console.width = max(fixed, natural)
    try:
        console.print(table)
    finally:
        console.width = fixed
