"""Fused stages (`fused_stages`) always share one process.

Moving part of a fused group away is an `isolation-conflict` when a member was asked to run alone,
and a `process-name-conflict` otherwise (the request only names another process for part of it)."""

from __future__ import annotations

from planner.plan import Diagnostic
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_hint

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


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    group = rule.group
    moved = sorted(m for m in group if m in ctx.problem.request_of)
    isolates = [s for s in moved if ctx.problem.request_of[s].alone]
    because = ctx.because_requests(core)
    because.append(f"fused_stages binds {', '.join(group)} into one process")
    hint, fix = placement_hint(ctx.problem, ctx.nearest, "move the fused stages together")
    partners = [m for m in group if m not in moved]
    return Diagnostic(
        code=CODES[0] if isolates else CODES[1],
        message=f"{', '.join(moved) or group[0]} cannot leave fused partner"
                f"{'s' if len(partners) > 1 else ''} {', '.join(partners)}",
        stages=tuple(sorted(group)), because=tuple(because), hint=hint, fix=fix)


RULE = RuleKind(kind="fused", codes=CODES, statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
