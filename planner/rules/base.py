"""What every placement rule is made of, and one instance of a rule in a CP-SAT model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.conflicts import Conflict
    from planner.plan import Fix
    from planner.rules.context import Explanation
    from planner.solver import PlacementModel


@dataclass(frozen=True)
class Rule:
    """One instance of a rule in one model, e.g. Rule("unsafe", edge=(a, b)) or Rule("limit", gpu=0).

    Requests are instances too (kind "request"): a core names the requests that break a rule.
    """

    kind: str
    stage: str | None = None
    edge: tuple[str, str] | None = None
    gpu: int | None = None
    process: str | None = None
    group: tuple[str, ...] = ()  # a fused group's members


@dataclass(frozen=True)
class RuleKind:
    """A placement rule: its diagnostic codes, its statement, how it is encoded into the shared
    CP-SAT model (one assumption literal per instance) and how a core that breaks it is explained:
    as a typed conflict and the fix that removes it (the sentences are rendered elsewhere).

    `codes` lists every code its diagnostics may carry; `placement_hard` says whether a placement
    hint must respect it (fraction rules are fixed by a YAML line instead of a move).
    """

    kind: str
    codes: tuple[str, ...]
    statement: str
    placement_hard: bool
    encode: Callable[[PlacementModel], None]
    explain: Callable[[Explanation, Rule, list[Rule]], tuple[Conflict, Fix | None]]
