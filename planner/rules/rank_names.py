"""process-name-conflict for tensor-parallel ranks: rank processes are named
`<process>_tp<rank>`; no process group may take such a name, and two TP stages may not produce
the same rank names."""

from __future__ import annotations

from planner.plan import Diagnostic, Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, config_hint, placement_hint

CODE = "process-name-conflict"


def encode_taken(model) -> None:
    for name, owners in sorted(model.problem.rank_names.items()):
        if name in model.by_process:
            lit = model.literal(Rule("name", process=name, stage=owners[0]))
            for s in model.by_process[name]:
                model.model.add_implication(lit, ~model.x[s, name])


def explain_taken(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    proc = rule.process
    because = ctx.because_requests(core)
    because.append(f"{proc} is the process of rank {proc.rsplit('_tp', 1)[-1]} of "
                   f"tensor-parallel stage {rule.stage}")
    hint, fix = placement_hint(ctx.problem, ctx.nearest, "choose another process name")
    stages = tuple(sorted(r.stage for r in core if r.kind == "request"))
    return Diagnostic(
        code=CODE,
        message=f"process name {proc} is already taken by a tensor-parallel rank of {rule.stage}",
        stages=stages or (rule.stage,), because=tuple(because), hint=hint, fix=fix)


def encode_shared(model) -> None:
    for name, owners in sorted(model.problem.rank_names.items()):
        if len(owners) > 1:
            model.model.add_bool_or([~model.literal(Rule("tp-names", process=name,
                                                         stage=owners[1]))])


def explain_shared(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    owners = ctx.problem.rank_names[rule.process]
    later = owners[-1]
    return Diagnostic(
        code=CODE,
        message=f"tensor-parallel stages {' and '.join(owners)} both name a rank process "
                f"{rule.process}",
        stages=tuple(sorted(owners)),
        because=((f"TP rank processes are named <process>_tp<rank>, and {', '.join(owners)} "
                  f"share one process name"),),
        hint=f"give {later} its own process name; " + config_hint(
            ctx.problem, f"stages:\n  - {{name: {later}, process: {later}}}"),
        fix=Fix(config={"stages": [{"name": later, "process": later}]}))


TAKEN = RuleKind(kind="name", codes=(CODE,),
                 statement="a process name is not a tensor-parallel rank name",
                 placement_hard=True, encode=encode_taken, explain=explain_taken)
SHARED = RuleKind(kind="tp-names", codes=(CODE,),
                  statement="two tensor-parallel stages have distinct rank names",
                  placement_hard=True, encode=encode_shared, explain=explain_shared)
