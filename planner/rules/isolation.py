"""isolation-conflict: a stage asked to run alone (`--isolate-stage`) shares its process with no
other stage. "Alone" is about the process it was asked to run in, also for a no-op isolation."""

from __future__ import annotations

from planner.conflicts import Blame, Conflict, IsolationConflict
from planner.plan import Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "isolation-conflict"
STATEMENT = "a stage asked to run alone shares its process with no other stage"


def encode(model) -> None:
    m = model.model
    for r in model.problem.requests:
        if not r.alone:
            continue
        lit = model.literal(Rule("alone", stage=r.stage, process=r.process))
        for t in model.by_process[r.process]:
            if t != r.stage:
                m.add_bool_or([~lit, ~model.x[r.stage, r.process], ~model.x[t, r.process]])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    s = rule.stage
    r = ctx.problem.request_of[s]
    others = sorted({x.stage for x in core if x.kind == "request" and x.stage != s})
    fused = next((x.group for x in core if x.kind == "fused"), ())
    if fused:
        others = sorted(set(others) | {m for x in core if x.kind == "fused" for m in x.group
                                       if m != s})
    if not others:
        others = sorted(t for t, p in ctx.problem.target.items() if p == r.process and t != s)
    nearest = ctx.nearest_requests()
    conflict = IsolationConflict(
        isolated=Blame(r.request, s, r.process, r.noop), others=tuple(others), fused_group=fused,
        requests=ctx.blames(core), nearest=nearest)
    return conflict, ctx.nearest_fix()


RULE = RuleKind(kind="alone", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
