"""over-limit: the fractions on one GPU add up to at most the placement limit.

Counted per GPU, also when one process holds every stage on it; a TP stage's fraction counts on
each of its GPUs, and a stage's fraction counts once for every copy of its process on that GPU
(every copy on its declared GPU, or where the config's `gpus` / sglang-omni's `replica_devices`
put each)."""

from __future__ import annotations

import math

from planner.conflicts import Conflict, OverLimit
from planner.plan import Fix
from planner.problem import SCALE, to_units
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, fraction_overlay

CODE = "over-limit"
STATEMENT = "the fractions on one GPU add up to at most the placement limit"


def _copies(model, s: str, g: int) -> dict[str, int]:
    """How many copies of the stage hold memory on GPU `g` in each process the solver may put
    it in (a TP rank: once on each of its GPUs)."""
    p = model.problem
    return ({proc: p.copies_on(s, proc, g) for proc in model.domains.get(s, ())}
            or {"": p.copies_on(s, None, g)})


def _with_copies(model, s: str, g: int):
    """The stage's fraction counted once per copy it has on GPU `g`, for the process the solver
    puts it in."""
    copies = _copies(model, s, g)
    frac = model.frac[s]
    if len(set(copies.values())) == 1:
        return next(iter(copies.values())) * frac
    m = model.model
    parts = []
    for proc, n in copies.items():
        z = m.new_int_var(0, n * SCALE, f"copied[{s},{proc},{g}]")
        m.add(z == n * frac).only_enforce_if(model.x[s, proc])
        m.add(z == 0).only_enforce_if(~model.x[s, proc])
        parts.append(z)
    return sum(parts)


def encode(model) -> None:
    p, m = model.problem, model.model
    for g in p.gpu_ids:
        on_stages = p.stages_on(g)
        most = 0  # the largest total any placement could give this GPU
        for s in on_stages:
            spec = p.pipeline.stage(s)
            n = max(_copies(model, s, g).values())
            if spec.fraction is not None:
                most += n * to_units(spec.fraction)
            else:
                most += n * max((u for _, u in p.recommendations.get(s, ())), default=0)
        if most <= p.limit_units:
            continue
        lit = model.literal(Rule("limit", gpu=g))
        total = sum(_with_copies(model, s, g) for s in on_stages)
        if isinstance(total, int):  # every fraction declared: the rule is simply violated
            m.add_bool_or([~lit])
        else:
            m.add(total <= p.limit_units).only_enforce_if(lit)


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    p = ctx.problem
    values = ctx.fractions_when_requested(rule.gpu)
    copies = {s: p.copies_on(s, p.target.get(s), rule.gpu) for s in values}
    values = {s: u for s, u in values.items() if copies[s]}
    total = sum(copies[s] * u for s, u in values.items())
    limit = p.limit_units
    # Shrink the largest share by the excess (rounded up to 0.001), or all proportionally.
    biggest = max(values, key=lambda s: (copies[s] * values[s], s))
    step = math.ceil((total - limit) / copies[biggest] / 1000) * 1000
    if values[biggest] - step > 0:
        new = {biggest: (values[biggest] - step) / SCALE}
    else:
        scale = limit / total
        new = {s: math.floor(u * scale / 1000) / 1000 for s, u in values.items()}
    conflict = OverLimit(
        gpu=rule.gpu, fractions=tuple((s, u / SCALE) for s, u in values.items()),
        total=total / SCALE, limit=limit / SCALE, requests=ctx.blames(core),
        proposal=tuple(new.items()), card=ctx.card_target(),
        copies=tuple((s, n) for s, n in copies.items() if n > 1))
    return conflict, Fix(config=fraction_overlay(new))


RULE = RuleKind(kind="limit", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
