"""missing-fraction: every stage on a GPU shared by several processes declares a fraction.

A GPU is shared when two or more processes use it (each TP rank counts), counted by name: a group
given a TP rank's name is that name's conflict (`rank_names`), not a second process beside the
rank. Enforced only while `placement.require_memory_fraction_for_colocation` is true."""

from __future__ import annotations

import math

from planner.conflicts import Conflict, MissingFraction
from planner.plan import Fix
from planner.problem import SCALE, Problem, to_units
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, fraction_overlay
from planner.topology import tp_rank_names

CODE = "missing-fraction"
STATEMENT = "every stage on a GPU shared by several processes declares a fraction"


def encode(model) -> None:
    p, m = model.problem, model.model
    if not p.pipeline.placement.require_memory_fraction_for_colocation:
        return
    for g in p.gpu_ids:
        on_stages = p.stages_on(g)
        ranks = _rank_names_on(p, g)
        tp_ranks = len(ranks)
        ons = [on for proc, on in model.processes_on[g].items() if proc not in ranks]
        lacking = [s for s in on_stages if model.has[s] is not True]
        if not lacking or len(ons) + tp_ranks < 2:
            continue
        lit = model.literal(Rule("fractions", gpu=g))
        shared = None
        if ons:
            shared = m.new_bool_var(f"shared[{g}]")
            m.add(sum(ons) + tp_ranks <= 1).only_enforce_if(~shared)
        for s in lacking:
            has = model.has[s]
            clause = [~lit] + ([~shared] if shared is not None else [])
            clause += [has] if has is not False else []
            m.add_bool_or(clause)


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> tuple[Conflict, Fix | None]:
    g, p = rule.gpu, ctx.problem
    pl, target = p.pipeline, p.target
    have = ctx.fractions_when_requested(g)
    on = p.stages_on(g)
    missing = sorted(s for s in on if s not in have)
    procs = sorted({target[s] for s in on if s in target} | _rank_names_on(p, g))
    # Proposed values: the card's own recommendation where it has one, else an even share of
    # what is left under the limit.
    known = {}
    for res in pl.edge_resources:
        for s, v in res.fractions:
            known.setdefault(s, v)
    proposal = {s: known[s] for s in missing if s in known}
    rest = [s for s in missing if s not in proposal]
    if rest:
        left = p.limit_units - sum(have.values()) - sum(to_units(v) for v in proposal.values())
        share = max(math.floor(left / len(rest) / 10_000) * 10_000, 10_000)
        proposal.update({s: share / SCALE for s in rest})
    ordered = {s: proposal[s] for s in missing}
    conflict = MissingFraction(
        model=pl.name, gpu=g, processes=tuple(procs), missing=tuple(missing),
        requests=ctx.blames(core), requested=any(r.kind == "request" for r in core),
        proposal=tuple(ordered.items()), card=ctx.card_target())
    return conflict, Fix(config=fraction_overlay(ordered))


def _rank_names_on(p: Problem, g: int) -> set[str]:
    """The processes of the TP ranks that run on GPU `g`."""
    return {tp_rank_names(p.pipeline, s)[p.pipeline.stage(s).gpus.index(g)]
            for s in p.stages_on(g) if s in p.tp_stages}


RULE = RuleKind(kind="fractions", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
