"""over-limit: the fractions on one GPU add up to at most the placement limit.

Counted per GPU, also when one process holds every stage on it; a TP stage's fraction counts on
each of its GPUs."""

from __future__ import annotations

import math

from planner.plan import Diagnostic, Fix
from planner.problem import SCALE, to_units
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, config_hint, yaml_fractions

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


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    g = rule.gpu
    values = ctx.fractions_when_requested(g)
    total = sum(values.values())
    limit = ctx.problem.limit_units
    excess = total - limit
    parts = ", ".join(f"{s} {u / SCALE:g}" for s, u in values.items())
    because = ctx.because_requests(core)
    because.append(f"the stages on GPU {g} take {parts}, together {total / SCALE:.3f}")
    because.append(f"placement.max_total_gpu_memory_fraction_per_gpu is {limit / SCALE:.3f}")
    # Shrink the largest fraction by the excess (rounded up to 0.001), or all proportionally.
    step = math.ceil(excess / 1000) * 1000
    biggest = max(values, key=lambda s: (values[s], s))
    if values[biggest] - step > 0:
        new = {biggest: (values[biggest] - step) / SCALE}
    else:
        scale = limit / total
        new = {s: math.floor(u * scale / 1000) / 1000 for s, u in values.items()}
    text, overlay = yaml_fractions(new)
    return Diagnostic(
        code=CODE,
        message=f"GPU {g} would be at {total / SCALE:.3f} of its memory, over the limit "
                f"{limit / SCALE:.3f} by {excess / SCALE:.3f}",
        stages=tuple(sorted(values)), gpu=g, because=tuple(because),
        hint=f"shrink GPU {g} by at least {excess / SCALE:.3f}; " + config_hint(ctx.problem, text),
        fix=Fix(config=overlay))


RULE = RuleKind(kind="limit", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
