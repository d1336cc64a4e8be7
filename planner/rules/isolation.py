"""isolation-conflict: a stage asked to run alone (`--isolate-stage`) shares its process with no
other stage. "Alone" is about the process it was asked to run in, also for a no-op isolation."""

from __future__ import annotations

from planner.plan import Diagnostic
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_hint

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


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    s = rule.stage
    r = ctx.problem.request_of[s]
    proc = r.process
    others = sorted({x.stage for x in core if x.kind == "request" and x.stage != s})
    fused = [x for x in core if x.kind == "fused"]
    if fused:
        others = sorted(set(others) | {m for f in fused for m in f.group if m != s})
    if not others:
        others = sorted(t for t, p in ctx.problem.target.items() if p == proc and t != s)
    because = ctx.because_requests(core)
    if fused:
        because.append(f"fused_stages binds {', '.join(fused[0].group)} into one process")
    hint, fix = placement_hint(
        ctx.problem, ctx.nearest,
        "--isolate-stage only makes singletons; group stages with --stage-process")
    return Diagnostic(
        code=CODE,
        message=f"`{r.flag}` asks {s} to run alone, but {', '.join(others)} would share "
                f"process {proc}",
        stages=(s, *others), because=tuple(because), hint=hint, fix=fix)


RULE = RuleKind(kind="alone", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
