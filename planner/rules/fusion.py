"""Fused stages (`fused_stages`) always share one process.

Moving part of a fused group away is an `isolation-conflict` when a member was asked to run alone,
and a `process-name-conflict` otherwise (the request only names another process for part of it)."""

from __future__ import annotations

from planner.conflicts import Conflict, FusedSplit
from planner.plan import Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODES = ("isolation-conflict", "process-name-conflict")
STATEMENT = "fused stages always share one process"


def encode(model) -> None:
    m, domains = model.model, model.domains
    for group in model.problem.pipeline.fused_stages:
        lit = model.literal(Rule("fused", stage=group[0], group=tuple(group)))
        for a, b in zip(group, group[1:]):
            for proc in set(domains[a]) | set(domains[b]):
                xa, xb = model.x.get((a, proc)), model.x.get((b, proc))
                if xa is not None and xb is not None:
                    m.add(xa == xb).only_enforce_if(lit)
                else:
                    m.add_bool_or([~lit, ~(xa if xa is not None else xb)])


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    group = rule.group
    moved = tuple(sorted(m for m in group if m in ctx.problem.request_of))
    nearest = ctx.nearest_requests()
    conflict = FusedSplit(
        group=group, moved=moved, partners=tuple(m for m in group if m not in moved),
        isolating=any(ctx.problem.request_of[s].alone for s in moved), requests=ctx.blames(core),
        nearest=nearest)
    return conflict, ctx.nearest_fix()


RULE = RuleKind(kind="fused", codes=CODES, statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
