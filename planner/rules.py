"""Every placement rule in one place: what it is called, which diagnostic code it maps to, and
what it means. The solver gives each instance of a rule its own assumption literal; the
diagnostics module explains a conflict by the rules in its minimal core.
"""

from __future__ import annotations

from dataclasses import dataclass

# kind -> (diagnostic code, one-line statement of the rule)
RULES: dict[str, tuple[str, str]] = {
    "request": ("", "a --stage-process/--isolate-stage request places a stage in a process"),
    "alone": ("isolation-conflict", "a stage asked to run alone shares its process with no other stage"),
    "fused": ("isolation-conflict", "fused stages always share one process"),
    "unsafe": ("unsupported-handoff", "a handoff the model does not declare process-safe stays in one "
                                      "process"),
    "no-conflict": ("conflicting-recommendation", "a stage takes one recommended fraction"),
    "limit": ("over-limit", "the fractions on one GPU add up to at most the placement limit"),
    "one-gpu": ("spans-gpus", "one process holds stages on at most one GPU"),
    "name": ("process-name-conflict", "a process name is not a tensor-parallel rank name"),
    "tp-names": ("process-name-conflict", "two tensor-parallel stages have distinct rank names"),
    "fractions": ("missing-fraction", "every stage on a GPU shared by several processes declares a "
                                      "fraction"),
}

# The conventions' order of diagnostics, by rule kind: broken rules are explained in this order.
PRIORITY = ("unsafe", "no-conflict", "limit", "one-gpu", "name", "tp-names", "fractions", "alone",
            "fused")

# Rules a placement hint must respect. Fraction rules are left out: a YAML line fixes those
# without moving any stage, so the nearest placement need not avoid them.
PLACEMENT_HARD = ("unsafe", "no-conflict", "one-gpu", "name", "tp-names", "fused")


@dataclass(frozen=True)
class Rule:
    """One instance of a rule, e.g. ("unsafe", edge=(a, b)) or ("limit", gpu=0)."""

    kind: str
    stage: str | None = None
    edge: tuple[str, str] | None = None
    gpu: int | None = None
    process: str | None = None

    @property
    def code(self) -> str:
        return RULES[self.kind][0]

    def rank(self) -> int:
        return PRIORITY.index(self.kind) if self.kind in PRIORITY else len(PRIORITY)
