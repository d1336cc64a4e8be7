"""Every placement rule, one module each: its code, its statement, its CP-SAT encoding and its
explanation. `REGISTRY` is the one order in which broken rules are explained and reported.

Adding a rule: write a module with `encode(model)` (one assumption literal per instance, via
`model.literal(Rule(kind, ...))`) and `explain(ctx, rule, core) -> Diagnostic`, wrap them in a
`RuleKind`, and put it in `REGISTRY` where its diagnostics belong in the report order.
"""

from __future__ import annotations

from planner.rules import (
    conflicting_recommendation,
    cpu_limit,
    cpu_pins,
    fusion,
    gpu_limit,
    isolation,
    missing_fraction,
    one_gpu,
    rank_names,
    unsupported_handoff,
)
from planner.rules.base import Rule, RuleKind

REGISTRY: tuple[RuleKind, ...] = (
    unsupported_handoff.RULE,
    conflicting_recommendation.RULE,
    gpu_limit.RULE,
    one_gpu.RULE,
    rank_names.TAKEN,
    rank_names.SHARED,
    missing_fraction.RULE,
    isolation.RULE,
    fusion.RULE,
    cpu_limit.RULE,
    cpu_pins.RULE,
)
BY_KIND: dict[str, RuleKind] = {r.kind: r for r in REGISTRY}
# A request is not a rule: it is what a core blames.
REQUEST = "request"

# Codes that only request parsing and config loading produce, before any rule is checked.
REQUEST_CODES = ("invalid-assignment", "unknown-stage", "duplicate-assignment", "tp-stage",
                 "invalid-compute")
CONFIG_CODES = ("invalid-config",)


# The report order of placement diagnostics follows the registry (a rule with several codes,
# fusion, reports each where an earlier rule already placed it).
PLACEMENT_CODES = tuple(dict.fromkeys(c for r in REGISTRY for c in r.codes))
# Cluster capacity is checked once a replica itself is valid, so it reports last.
CLUSTER_CODES = ("insufficient-capacity",)
CODE_ORDER = REQUEST_CODES + CONFIG_CODES + PLACEMENT_CODES + CLUSTER_CODES


def rank(rule: Rule) -> int:
    kinds = [r.kind for r in REGISTRY]
    return kinds.index(rule.kind) if rule.kind in kinds else len(kinds)


__all__ = ["REGISTRY", "BY_KIND", "CODE_ORDER", "Rule", "RuleKind", "rank"]
