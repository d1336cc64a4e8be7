"""Explain minimal cores as diagnostics, each by the module of the rule it breaks, and put them
in the one report order the rule registry defines. A diagnostic leaves here as typed values (its
conflict and fix); `planner.api`, the library's edge, words it (`render.prose`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from planner.plan import Diagnostic
from planner.problem import Problem
from planner.rules import BY_KIND, CODE_ORDER, REQUEST
from planner.rules.base import Rule
from planner.rules.context import Explanation
from planner.solver import Assignment


def report_key(d: Diagnostic) -> tuple:
    return (CODE_ORDER.index(d.code), d.subject)


def in_report_order(diagnostics: Iterable[Diagnostic]) -> tuple[Diagnostic, ...]:
    return tuple(sorted(diagnostics, key=report_key))


class Explainer:
    def __init__(self, problem: Problem, nearest: Callable[..., Assignment | None]):
        self.context = Explanation(problem, nearest)

    def explain(self, core: list[Rule]) -> Diagnostic:
        main = next(r for r in core if r.kind != REQUEST)
        kind = BY_KIND[main.kind]
        conflict, fix = kind.explain(self.context, main, core)
        return Diagnostic(
            code=conflict.code, message="", stages=conflict.stages,
            edge=getattr(conflict, "edge", None), gpu=getattr(conflict, "gpu", None),
            fix=fix, rule=kind.statement, conflict=conflict)
