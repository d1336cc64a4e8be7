"""spans-gpus: one process holds stages on at most one GPU."""

from __future__ import annotations

from collections import defaultdict

from planner.plan import Diagnostic
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, placement_hint

CODE = "spans-gpus"
STATEMENT = "one process holds stages on at most one GPU"


def encode(model) -> None:
    gpus_of_proc: dict[str, list] = defaultdict(list)
    for (proc, _), on in model.on.items():
        gpus_of_proc[proc].append(on)
    for proc, ons in sorted(gpus_of_proc.items()):
        if len(ons) >= 2:
            lit = model.literal(Rule("one-gpu", process=proc))
            model.model.add(sum(ons) <= 1).only_enforce_if(lit)


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    proc, pl = rule.process, ctx.problem.pipeline
    members = [s for s, p in ctx.problem.target.items() if p == proc]
    placed = ", ".join(f"{s} (GPU {pl.stage(s).gpus[0]})" for s in members if pl.stage(s).on_gpu)
    gpus = sorted({pl.stage(s).gpus[0] for s in members if pl.stage(s).on_gpu})
    because = ctx.because_requests(core)
    because.append(f"process {proc} would hold {placed}, and one process drives one GPU")
    hint, fix = placement_hint(ctx.problem, ctx.nearest,
                               "keep the stages of each GPU in their own process")
    return Diagnostic(
        code=CODE, message=f"process {proc} would span GPUs {', '.join(map(str, gpus))}",
        stages=tuple(sorted(members)), because=tuple(because), hint=hint, fix=fix)


RULE = RuleKind(kind="one-gpu", codes=(CODE,), statement=STATEMENT, placement_hard=True,
                encode=encode, explain=explain)
