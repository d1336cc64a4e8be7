"""missing-fraction: every stage on a GPU shared by several processes declares a fraction.

A GPU is shared when two or more processes use it (each TP rank counts); enforced only while
`placement.require_memory_fraction_for_colocation` is true."""

from __future__ import annotations

import math

from planner.plan import Diagnostic, Fix
from planner.problem import SCALE, to_units
from planner.rules.base import Rule, RuleKind
from planner.rules.context import Explanation, config_hint, yaml_fractions
from planner.topology import tp_rank_names

CODE = "missing-fraction"
STATEMENT = "every stage on a GPU shared by several processes declares a fraction"


def encode(model) -> None:
    p, m = model.problem, model.model
    if not p.pipeline.placement.require_memory_fraction_for_colocation:
        return
    for g in p.gpu_ids:
        on_stages = p.stages_on(g)
        tp_ranks = sum(1 for s in on_stages if s in p.tp_stages)
        ons = model.processes_on[g]
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


def explain(ctx: Explanation, rule: Rule, core: list[Rule]) -> Diagnostic:
    g, p = rule.gpu, ctx.problem
    pl, target = p.pipeline, p.target
    have = ctx.fractions_when_requested(g)
    missing = sorted(s for s in p.stages_on(g) if s not in have)
    on = p.stages_on(g)
    procs = sorted({target[s] for s in on if s in target}
                   | {tp_rank_names(pl, s)[pl.stage(s).gpus.index(g)]
                      for s in on if s in p.tp_stages})
    because = ctx.because_requests(core)
    if not because:
        because.append(f"the declared topology already runs {', '.join(procs)} on GPU {g}")
    because.append("placement.require_memory_fraction_for_colocation is true")
    if any(r.kind == "request" for r in core):
        because.append(f"{pl.name} recommends no fraction for {', '.join(missing)} on this split")
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
    text, overlay = yaml_fractions({s: proposal[s] for s in missing})
    return Diagnostic(
        code=CODE,
        message=f"GPU {g} is shared by processes {', '.join(procs)}, but "
                f"{', '.join(missing)} declare{'s' if len(missing) == 1 else ''} no GPU memory "
                f"fraction",
        stages=tuple(missing), gpu=g, because=tuple(because),
        hint="declare runtime.resources.total_gpu_memory_fraction for each (sized to your "
             "models; these shares fit the limit); " + config_hint(p, text),
        fix=Fix(config=overlay))


RULE = RuleKind(kind="fractions", codes=(CODE,), statement=STATEMENT, placement_hard=False,
                encode=encode, explain=explain)
