"""unsupported-handoff: a handoff the model does not declare process-safe stays in one process.

Checked for the handoffs a request newly splits, and for unsafe handoffs the declared topology
itself splits (a config, a variant or a complete pipeline moved a stage): those are blamed on the
YAML line, as a request would be."""

from __future__ import annotations

from dataclasses import replace

from planner.conflicts import (
    Conflict, DeclaredSplit, EngineTarget, MovedBy, Stay, UnsupportedHandoff,
)
from planner.plan import Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_edit, placement_requests

CODE = "unsupported-handoff"
STATEMENT = "a handoff the model does not declare process-safe stays in one process"


def encode(model) -> None:
    p = model.problem
    for e in p.splittable_edges + p.declared_unsafe_splits:
        if p.pipeline.unsupported_reason(e) is not None:
            model.model.add_implication(model.literal(Rule("unsafe", edge=e)), ~model.cross[e])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    if rule.edge in ctx.problem.declared_unsafe_splits:
        return _declared(ctx, rule)
    pl = ctx.problem.pipeline
    nearest = ctx.nearest_requests()
    fix = ctx.nearest_fix()
    # When the nearest fix undoes a move, also offer that move with its partner brought along.
    moved = tuple(sorted(r.stage for r in core if r.kind == "request"))
    along = None
    a = ctx.nearest
    if moved and a is not None and any(a.process[s] != ctx.problem.target[s] for s in moved):
        along = ctx.nearest_requests(frozenset(moved))
        if fix is not None and along is not None:
            fix = replace(fix, otherwise=ctx.nearest_fix(frozenset(moved)))
    conflict = UnsupportedHandoff(
        model=pl.name, edge=rule.edge, reason=pl.unsupported_reason(rule.edge) or "",
        requests=ctx.blames(core), nearest=nearest, moved=moved if along is not None else (),
        along=along)
    return conflict, fix


def _declared(ctx: Explanation, rule: Rule) -> tuple[Conflict, Fix | None]:
    """The config itself splits an unsafe handoff: blame the YAML line(s) that moved a stage, as a
    request would be blamed, and fix it in the config (or, for one run, with requests)."""
    u, v = rule.edge
    p = ctx.problem
    pl, base = p.pipeline, p.baseline.process
    lines = tuple(MovedBy(s, pl.process_line(s), base[s]) for s in (u, v)
                  if pl.process_line(s) is not None)
    named = {m.stage for m in lines}
    stays = tuple(Stay(s, base[s], tuple(m for m in p.baseline.fused_group.get(s, ()) if m != s))
                  for s in (u, v) if s not in named)
    # Prefer moving what a config line moved and keeping what the card placed.
    kept = frozenset(s.stage for s in stays if s.stage not in p.request_of)
    a = (ctx.nearest_to(kept) if lines and kept else None) or ctx.nearest
    placement = None
    if a is not None:
        moves = {s: a.process[s] for s in pl.stage_names
                 if s in a.process and a.process[s] != base[s]}
        # A generated fused-group name exists only while its members disagree: joining it in
        # YAML means naming it for the members too.
        declared = {st.process for st in pl.stages}
        for group in pl.fused_stages:
            name = base[group[0]]
            if name in moves.values() and name not in declared:
                moves.update({m: name for m in group})
        placement = tuple((s, moves[s]) for s in pl.stage_names if s in moves)
    conflict = DeclaredSplit(
        model=pl.name, edge=rule.edge, reason=pl.unsupported_reason(rule.edge) or "", lines=lines,
        stays=stays, declared_by=pl.source,
        blamed=tuple(sorted({m.line.source for m in lines})) or (pl.source,),
        placement=placement,
        nearest=None if a is None else placement_requests(p, a),
        card=target if isinstance(target := ctx.card_target(), EngineTarget) else None)
    if a is None or placement is None:
        return conflict, None
    # The YAML that joins the stages again, with the flags that would undo it dropped; or, for
    # one run, the flags alone.
    edit = placement_edit(p, a)
    fix = Fix(drop=edit.drop, config={"stages": [{"name": s, "process": q} for s, q in placement]},
              otherwise=edit)
    return conflict, fix


RULE = RuleKind(kind="unsafe", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
