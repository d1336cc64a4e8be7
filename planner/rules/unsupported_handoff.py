"""unsupported-handoff: a handoff the model does not declare process-safe stays in one process.

Checked for the handoffs a request newly splits, and for unsafe handoffs the declared topology
itself splits (a config, a variant or a complete pipeline moved a stage): those are blamed on the
YAML line, as a request would be."""

from __future__ import annotations

from planner.plan import Diagnostic, Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_requests, placement_hint, quoted

CODE = "unsupported-handoff"
STATEMENT = "a handoff the model does not declare process-safe stays in one process"


def encode(model) -> None:
    p = model.problem
    for e in p.splittable_edges + p.declared_unsafe_splits:
        if p.pipeline.unsupported_reason(e) is not None:
            model.model.add_implication(model.literal(Rule("unsafe", edge=e)), ~model.cross[e])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    if rule.edge in ctx.problem.declared_unsafe_splits:
        return _declared(ctx, rule)
    u, v = rule.edge
    pl = ctx.problem.pipeline
    reason = pl.unsupported_reason(rule.edge)
    because = ctx.because_requests(core)
    because.append(f"{pl.name} needs {u} -> {v} inside one process: {reason}")
    hint, fix = placement_hint(ctx.problem, ctx.nearest, f"keep {u} and {v} in one process")
    # When the nearest fix undoes a move, also show how to make that move with its partner.
    moved = frozenset(r.stage for r in core if r.kind == "request")
    nearest = ctx.nearest
    if moved and nearest is not None and any(
            nearest.process[s] != ctx.problem.target[s] for s in moved):
        along = ctx.nearest_to(moved)
        if along is not None:
            names = ", ".join(sorted(moved))
            hint += (f"; or, to keep {names} where you asked, move the partner along: "
                     f"{quoted(placement_requests(ctx.problem, along))}")
    return Diagnostic(
        code=CODE,
        message=f"the request splits {u} -> {v}, which {pl.name} does not support across "
                f"processes",
        stages=(u, v), edge=rule.edge, because=tuple(because), hint=hint, fix=fix)


def _declared(ctx: Explanation, rule: Rule) -> Diagnostic:
    """The config itself splits an unsafe handoff: blame the YAML line(s) that moved a stage, and
    fix it in the config (or, for one run, with flags)."""
    u, v = rule.edge
    p = ctx.problem
    pl, base = p.pipeline, p.baseline.process
    lines = {s: pl.process_line(s) for s in (u, v) if pl.process_line(s) is not None}
    because = [f"{line} puts {s} in process {base[s]}" for s, line in lines.items()]
    for s in (u, v):
        if s in lines:
            continue
        if s in p.baseline.fused_group:
            because.append(f"fused_stages puts {s} in process {base[s]} with "
                           f"{', '.join(m for m in p.baseline.fused_group[s] if m != s)}")
        else:
            because.append(f"{s} stays in process {base[s]} as {pl.source} declares")
    because.append(f"{pl.name} needs {u} -> {v} inside one process: "
                   f"{pl.unsupported_reason(rule.edge)}")
    sources = sorted({line.source for line in lines.values()}) or [pl.source]
    who = " and ".join(sources)
    message = f"{who} splits {u} -> {v}, which {pl.name} does not support across processes"
    # Prefer moving what a config line moved and keeping what the card placed.
    kept = frozenset(s for s in (u, v) if s not in lines and s not in p.request_of)
    nearest = (ctx.nearest_to(kept) if lines and kept else None) or ctx.nearest
    if nearest is None:
        return Diagnostic(code=CODE, message=message, stages=(u, v), edge=rule.edge,
                          because=tuple(because), hint=f"keep {u} and {v} in one process in {who}")
    # The fix persists that placement in the config; flags are then no longer needed.
    moves = {s: nearest.process[s] for s in pl.stage_names
             if s in nearest.process and nearest.process[s] != base[s]}
    # A generated fused-group name exists only while its members disagree: joining it in YAML
    # means naming it for the members too.
    declared = {st.process for st in pl.stages}
    for group in pl.fused_stages:
        name = base[group[0]]
        if name in moves.values() and name not in declared:
            moves.update({m: name for m in group})
    entries = [{"name": s, "process": moves[s]} for s in pl.stage_names if s in moves]
    text = "stages:\n" + "\n".join(f"  - {{name: {e['name']}, process: {e['process']}}}"
                                    for e in entries)
    hint = f"keep {u} and {v} in one process: set in {who}:\n{text}"
    if p.requests:
        hint += "\nand drop the placement flags"
    hint += f"\nor, for one run, use {quoted(placement_requests(p, nearest))}"
    return Diagnostic(code=CODE, message=message, stages=(u, v), edge=rule.edge,
                      because=tuple(because), hint=hint, fix=Fix(requests=(), config={"stages": entries}))


RULE = RuleKind(kind="unsafe", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
