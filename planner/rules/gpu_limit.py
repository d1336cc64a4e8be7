"""over-limit: the fractions on one GPU add up to at most the placement limit.

Counted per GPU, also when one process holds every stage on it; a TP stage's fraction counts on
each of its GPUs."""

from __future__ import annotations

import math

from planner.conflicts import Conflict, OverLimit
from planner.plan import Fix
from planner.problem import SCALE, to_units
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, fraction_overlay

CODE = "over-limit"
STATEMENT = "the fractions on one GPU add up to at most the placement limit"


def encode(model) -> None:
    p, m = model.problem, model.model
    for g in p.gpu_ids:
        on_stages = p.stages_on(g)
        most = 0  # the largest total any placement could give this GPU
        for s in on_stages:
            spec = p.pipeline.stage(s)
            if spec.fraction is not None:
                most += to_units(spec.fraction)
            else:
                most += max((u for _, u in p.recommendations.get(s, ())), default=0)
        if most <= p.limit_units:
            continue
        lit = model.literal(Rule("limit", gpu=g))
        total = sum(model.frac[s] for s in on_stages)
        if isinstance(total, int):  # every fraction declared: the rule is simply violated
            m.add_bool_or([~lit])
        else:
            m.add(total <= p.limit_units).only_enforce_if(lit)


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    values = ctx.fractions_when_requested(rule.gpu)
    total = sum(values.values())
    limit = ctx.problem.limit_units
    # Shrink the largest fraction by the excess (rounded up to 0.001), or all proportionally.
    step = math.ceil((total - limit) / 1000) * 1000
    biggest = max(values, key=lambda s: (values[s], s))
    if values[biggest] - step > 0:
        new = {biggest: (values[biggest] - step) / SCALE}
    else:
        scale = limit / total
        new = {s: math.floor(u * scale / 1000) / 1000 for s, u in values.items()}
    conflict = OverLimit(
        gpu=rule.gpu, fractions=tuple((s, u / SCALE) for s, u in values.items()),
        total=total / SCALE, limit=limit / SCALE, requests=ctx.blames(core),
        proposal=tuple(new.items()), card=ctx.card_target())
    return conflict, Fix(config=fraction_overlay(new))


RULE = RuleKind(kind="limit", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
