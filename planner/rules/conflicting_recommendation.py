"""conflicting-recommendation: a stage takes one recommended fraction.

Two handoffs a request splits may recommend different values for one stage; we do not guess
which split the operator meant (also when the stage declares its own value)."""

from __future__ import annotations

from planner.conflicts import Conflict, ConflictingRecommendation
from planner.plan import Fix
from planner.problem import SCALE
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

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


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    recs = ctx.problem.recommendations.get(rule.stage, [])
    nearest = ctx.nearest_requests()
    conflict = ConflictingRecommendation(
        model=ctx.problem.pipeline.name, stage=rule.stage,
        recommendations=tuple((e, u / SCALE) for e, u in recs), requests=ctx.blames(core),
        nearest=nearest)
    return conflict, ctx.nearest_fix()


RULE = RuleKind(kind="no-conflict", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
