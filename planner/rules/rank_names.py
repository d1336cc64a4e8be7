"""process-name-conflict for tensor-parallel ranks: rank processes are named
`<process>_tp<rank>`; no process group may take such a name, and two TP stages may not produce
the same rank names."""

from __future__ import annotations

from planner.conflicts import Conflict, RankNameTaken, SharedRankNames
from planner.plan import Fix
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation

CODE = "process-name-conflict"


def encode_taken(model) -> None:
    for name, owners in sorted(model.problem.rank_names.items()):
        if name in model.by_process:
            lit = model.literal(Rule("name", process=name, stage=owners[0]))
            for s in model.by_process[name]:
                model.model.add_implication(lit, ~model.x[s, name])


def explain_taken(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    nearest = ctx.nearest_requests()
    conflict = RankNameTaken(process=rule.process, tp_stage=rule.stage,
                             requests=ctx.blames(core), nearest=nearest)
    return conflict, ctx.nearest_fix()


def encode_shared(model) -> None:
    for name, owners in sorted(model.problem.rank_names.items()):
        if len(owners) > 1:
            model.model.add_bool_or([~model.literal(Rule("tp-names", process=name,
                                                         stage=owners[1]))])


def explain_shared(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    owners = tuple(ctx.problem.rank_names[rule.process])
    later = owners[-1]
    conflict = SharedRankNames(process=rule.process, tp_stages=owners, rename=later,
                               card=ctx.card_target())
    return conflict, Fix(config={"stages": [{"name": later, "process": later}]})


TAKEN = RuleKind(kind="name", codes=(CODE,),
                 statement="a process name is not a tensor-parallel rank name",
                 placement_hard=True, encode=encode_taken, explain=explain_taken)
SHARED = RuleKind(kind="tp-names", codes=(CODE,),
                  statement="two tensor-parallel stages have distinct rank names",
                  placement_hard=True, encode=encode_shared, explain=explain_shared)
