"""`--format dot`: the stages clustered by process, for Graphviz."""

from __future__ import annotations

from planner.pipeline import Pipeline
from planner.plan import Plan


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
        copies = f" x{g.copies} copies" if g.copies > 1 else ""
        lines.append(f"    label={_dot_id(f'{g.name} ({gpu}){copies}')};")
        if g.changed:
            lines.append("    style=bold;")
        for s in g.stages:
            n = plan.stage(s).threads
            label = f" [label={_dot_id(f'{s} ({n} threads)')}]" if n > 1 else ""
            lines.append(f"    {_dot_id(s)}{label};")
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
