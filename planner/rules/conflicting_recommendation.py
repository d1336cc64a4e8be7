"""conflicting-recommendation: a stage takes one recommended fraction.

Two handoffs a request splits may recommend different values for one stage; we do not guess
which split the operator meant (also when the stage declares its own value)."""

from __future__ import annotations

from planner.plan import Diagnostic
from planner.problem import SCALE
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_hint

CODE = "conflicting-recommendation"
STATEMENT = "a stage takes one recommended fraction"


def encode(model) -> None:
    m, recs = model.model, model.problem.recommendations
    for s in model.problem.pipeline.stages:
        items = recs.get(s.name, ()) if s.on_gpu else ()
        pairs = [(a, b) for i, a in enumerate(items) for b in items[i + 1:] if a[1] != b[1]]
        if pairs:
            lit = model.literal(Rule("no-conflict", stage=s.name))
            for (e1, _), (e2, _) in pairs:
                m.add_bool_or([~lit, ~model.cross[e1], ~model.cross[e2]])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    s = rule.stage
    recs = ctx.problem.recommendations.get(s, [])
    listed = "; ".join(f"{u / SCALE:g} from {e[0]} -> {e[1]}" for e, u in recs)
    because = ctx.because_requests(core)
    because.append(f"{ctx.problem.pipeline.name} recommends different fractions for {s} on the "
                   f"split handoffs: {listed}")
    hint, fix = placement_hint(ctx.problem, ctx.nearest, "split only one of those handoffs")
    return Diagnostic(
        code=CODE, message=f"stage {s} gets conflicting recommended fractions ({listed})",
        stages=(s,), because=tuple(because), hint=hint, fix=fix)


RULE = RuleKind(kind="no-conflict", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
