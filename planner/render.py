"""Rendering: rich tables, JSON and Graphviz DOT. Reads plans and diagnostics; decides nothing."""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from planner.cards import Card
from planner.pipeline import Pipeline
from planner.plan import Diagnostic, Plan, Result, PlanWarning

BAR_WIDTH = 24


def _frac(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def usage_bar(total: float, limit: float) -> Text:
    filled = min(BAR_WIDTH, round(BAR_WIDTH * total / limit)) if limit else BAR_WIDTH
    style = "red" if total > limit + 1e-9 else ("yellow" if total > 0.95 * limit else "green")
    bar = Text("[")
    bar.append("#" * filled, style=style)
    bar.append("." * (BAR_WIDTH - filled), style="dim")
    bar.append(f"] {total:.3f} / {limit:.3f}")
    return bar


def plan_tables(plan: Plan, *, show_changed: bool) -> list[Any]:
    t = Table(title="process groups", title_justify="left", show_lines=False)
    t.add_column("process", style="bold")
    t.add_column("stages")
    t.add_column("GPU", justify="right")
    t.add_column("fractions")
    if show_changed:
        t.add_column("changed")
    for g in plan.groups:
        fr = ", ".join(
            f"{s} {_frac(plan.stage(s).fraction)}" + (
                "*" if plan.stage(s).fraction_source == "recommended" else "")
            for s in g.stages if plan.stage(s).gpus)
        row = [g.name, ", ".join(g.stages), "CPU" if g.gpu is None else str(g.gpu), fr or "-"]
        if show_changed:
            row.append("yes" if g.changed else "")
        t.add_row(*row)
    for p in plan.tp_processes:
        s = plan.stage(p.stage)
        row = [p.name, f"{p.stage} (TP rank {p.rank}/{s.tp_size})", str(p.gpu),
               f"{p.stage} {_frac(s.fraction)}"]
        if show_changed:
            row.append("")
        t.add_row(*row)
    out: list[Any] = [t]
    if plan.gpus:
        gt = Table(title="GPU memory (fractions)", title_justify="left")
        gt.add_column("GPU", justify="right")
        gt.add_column("usage against limit")
        gt.add_column("processes")
        gt.add_column("missing fraction")
        for g in plan.gpus:
            gt.add_row(str(g.id), usage_bar(g.total, g.limit), ", ".join(g.processes),
                       ", ".join(g.missing_fraction) or "")
        out.append(gt)
    if any(s.fraction_source == "recommended" for s in plan.stages):
        out.append(Text("* recommended fraction applied because the request splits its handoff",
                        style="dim"))
    return out


def _subject(d: Diagnostic) -> str:
    if d.edge:
        return f"{d.edge[0]} -> {d.edge[1]}"
    if d.gpu is not None:
        return f"GPU {d.gpu}"
    return ", ".join(d.stages)


def diagnostic_text(d: Diagnostic) -> Text:
    t = Text()
    t.append(f"error[{d.code}]", style="bold red")
    subject = _subject(d)
    t.append(f" {subject}\n" if subject else "\n")
    if d.because:
        facts = list(d.because)
        joined = facts[0] if len(facts) == 1 else ", ".join(facts[:-1]) + " and " + facts[-1]
        t.append(f"  Because {joined}, {d.message}.\n")
    else:
        t.append(f"  {d.message}\n")
    if d.hint:
        lines = d.hint.splitlines()
        t.append("  hint: ", style="bold cyan")
        t.append(lines[0] + "\n")
        for line in lines[1:]:
            t.append("        " + line + "\n")
    return t


def warning_text(w: PlanWarning) -> Text:
    t = Text()
    t.append(f"warning[{w.code}]", style="bold yellow")
    t.append(f": {w.message}")
    return t


def render_result(console: Console, result: Result) -> None:
    head = Text()
    head.append(result.model or "request", style="bold")
    if result.variant and result.model:
        head.append(f" (variant {result.variant})")
    head.append(": ")
    style = {"ok": "green", "infeasible": "red", "error": "red"}[result.status]
    head.append(result.status, style=f"bold {style}")
    if result.ok:
        head.append(" - " + ("changed from the declared topology" if result.changed
                             else "the declared topology, unchanged"))
    console.print(head)
    if result.ok and result.plan:
        console.print(Group(*plan_tables(result.plan, show_changed=True)))
    for w in result.warnings:
        console.print(warning_text(w))
    for d in result.diagnostics:
        console.print(diagnostic_text(d))


def result_json(result: Result) -> str:
    return json.dumps(result.to_dict(), indent=2)


def _dot_id(s: str) -> str:
    """A DOT double-quoted string. Names are validated upstream; this keeps any text well-formed:
    a backslash or quote cannot end the string early, and a line break cannot split a statement."""
    out = s.replace("\\", "\\\\").replace('"', '\\"')
    out = out.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n")
    return '"' + "".join(c if c.isprintable() else " " for c in out) + '"'


def plan_dot(plan: Plan, pipeline: Pipeline | None = None) -> str:
    lines = [f"digraph {_dot_id(plan.model)} {{", "  rankdir=LR;", "  node [shape=box];"]
    for i, g in enumerate(plan.groups):
        gpu = "CPU" if g.gpu is None else f"GPU {g.gpu}"
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_dot_id(f'{g.name} ({gpu})')};")
        if g.changed:
            lines.append("    style=bold;")
        for s in g.stages:
            lines.append(f"    {_dot_id(s)};")
        lines.append("  }")
    for i, p in enumerate(plan.tp_processes):
        lines.append(f"  subgraph cluster_tp_{i} {{ label={_dot_id(f'{p.name} (GPU {p.gpu})')}; "
                     f"{_dot_id(p.stage + f'#{p.rank}')} [label={_dot_id(p.stage)}]; }}")
    tp = {p.stage for p in plan.tp_processes}
    for h in plan.handoffs:
        attrs = []
        if h.crosses:
            attrs.append("style=dashed")
        if pipeline is not None and pipeline.unsupported_reason((h.source, h.target)) is not None:
            attrs.append("color=red")
        if h.streaming:
            attrs.append('label="stream"')
        srcs = [f"{h.source}#{p.rank}" for p in plan.tp_processes if p.stage == h.source] \
            if h.source in tp else [h.source]
        dsts = [f"{h.target}#{p.rank}" for p in plan.tp_processes if p.stage == h.target] \
            if h.target in tp else [h.target]
        for a in srcs:
            for b in dsts:
                lines.append(f"  {_dot_id(a)} -> {_dot_id(b)}" +
                             (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines)


# -- planner show / planner models ----------------------------------------------------------------
def show_dict(pipeline: Pipeline, plan: Plan) -> dict[str, Any]:
    handoffs = pipeline.handoffs()
    return {
        "model": pipeline.name,
        "variant": pipeline.variant,
        "stages": [
            {"name": s.name, "process": plan.stage(s.name).process, "gpu": plan.stage(s.name).gpu,
             "tp_size": s.tp_size, "fraction": s.fraction, "factory": s.factory}
            for s in pipeline.stages
        ],
        "handoffs": [
            {"source": u, "target": v, "kinds": list(k),
             "safe": pipeline.unsupported_reason((u, v)) is None,
             "reason": pipeline.unsupported_reason((u, v))}
            for (u, v), k in handoffs.items()
        ],
        "groups": [{"name": g.name, "stages": list(g.stages), "gpu": g.gpu} for g in plan.groups],
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


def render_show(console: Console, pipeline: Pipeline, plan: Plan) -> None:
    console.print(Text.assemble((pipeline.name, "bold"), f" (variant {pipeline.variant})"))
    st = Table(title="stages", title_justify="left")
    for col in ("stage", "process", "GPU", "tp", "fraction", "factory"):
        st.add_column(col)
    for s in pipeline.stages:
        p = plan.stage(s.name)
        gpu = "CPU" if not s.gpus else ", ".join(map(str, s.gpus))
        st.add_row(s.name, p.process, gpu, str(s.tp_size), _frac(s.fraction), s.factory or "-")
    console.print(st)
    ht = Table(title="handoffs", title_justify="left")
    for col in ("edge", "kind", "across processes"):
        ht.add_column(col)
    for (u, v), kinds in pipeline.handoffs().items():
        reason = pipeline.unsupported_reason((u, v))
        ht.add_row(f"{u} -> {v}", ", ".join(kinds),
                   Text("safe", style="green") if reason is None
                   else Text(f"unsupported: {reason}", style="red"))
    console.print(ht)
    if pipeline.edge_resources:
        rt = Table(title="recommended fractions (applied when a request splits the edge)",
                   title_justify="left")
        rt.add_column("edge")
        rt.add_column("fractions")
        for r in pipeline.edge_resources:
            rt.add_row(f"{r.edge[0]} -> {r.edge[1]}",
                       ", ".join(f"{s} {v:.2f}" for s, v in r.fractions))
        console.print(rt)
    if pipeline.roles:
        console.print("roles: " + ", ".join(f"{a} -> {t}" for a, t in pipeline.roles))
    console.print(Group(*plan_tables(plan, show_changed=False)))


def models_dict(cards: tuple[Card, ...]) -> list[dict[str, Any]]:
    return [
        {"name": c.name, "display_name": c.display_name, "variants": list(c.variants),
         "model_paths": list(c.model_paths), "architectures": list(c.architectures),
         "description": c.description}
        for c in cards
    ]


def render_models(console: Console, cards: tuple[Card, ...]) -> None:
    t = Table(title="built-in model cards", title_justify="left", show_lines=True)
    t.add_column("card", style="bold")
    t.add_column("model")
    t.add_column("variants")
    t.add_column("selected by (--model-path)", overflow="fold")
    for c in cards:
        t.add_row(c.name, c.display_name, ", ".join(c.variants),
                  "\n".join([*c.model_paths, *c.architectures]) or c.name)
    console.print(t)
