"""spans-gpus: one process holds stages on at most one GPU."""

from __future__ import annotations

from collections import defaultdict

from planner.conflicts import Conflict, SpansGpus
from planner.plan import Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "spans-gpus"
STATEMENT = "one process holds stages on at most one GPU"


def encode(model) -> None:
    gpus_of_proc: dict[str, list] = defaultdict(list)
    for (proc, _), on in model.on.items():
        # A process whose copies the config places GPU by GPU runs each copy on one GPU.
        if not model.problem.devices_of(proc):
            gpus_of_proc[proc].append(on)
    for proc, ons in sorted(gpus_of_proc.items()):
        if len(ons) >= 2:
            lit = model.literal(Rule("one-gpu", process=proc))
            model.model.add(sum(ons) <= 1).only_enforce_if(lit)


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    pl = ctx.problem.pipeline
    members = tuple(s for s, p in ctx.problem.target.items() if p == rule.process)
    nearest = ctx.nearest_requests()
    conflict = SpansGpus(
        process=rule.process,
        placed=tuple((s, pl.stage(s).gpus[0]) for s in members if pl.stage(s).on_gpu),
        members=members, requests=ctx.blames(core), nearest=nearest)
    return conflict, ctx.nearest_fix()


RULE = RuleKind(kind="one-gpu", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
