"""What every rule's explanation shares: the problem, the nearest feasible placement for hints,
the requests of a core, and the fractions a GPU would get. Builds data, never sentences."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.conflicts import Blame, CardTarget, EngineTarget
from planner.plan import Assign, Fix, Isolate, Request
from planner.problem import Problem, to_units
from planner.rules.base import Rule

if TYPE_CHECKING:
    from planner.solver import Assignment


def _placed(problem: Problem, a: Assignment) -> list[tuple[str, Request]]:
    """(stage, request) for each request that produces assignment `a` from the declared
    topology."""
    out: list[tuple[str, Request]] = []
    for s in problem.pipeline.stage_names:
        if s not in a.process:
            continue
        r = problem.request_of.get(s)
        if r is not None and r.alone and s in a.alone_kept and a.process[s] == r.process:
            out.append((s, Isolate(r.typed)))
        elif a.process[s] != problem.baseline.process[s]:
            out.append((s, Assign(s, a.process[s])))
    return out


def placement_requests(problem: Problem, a: Assignment) -> tuple[Request, ...]:
    """The requests that produce assignment `a` from the declared topology."""
    return tuple(r for _, r in _placed(problem, a))


def placement_edit(problem: Problem, a: Assignment) -> Fix:
    """The edit of the command's placement flags that produces assignment `a`: drop the requests
    `a` does not keep, add the ones it needs; a request it keeps stays as it was typed."""
    kept: set[str] = set()
    drop: list[Request] = []
    for r in problem.requests:
        if a.process.get(r.stage) == r.process and (not r.alone or r.stage in a.alone_kept):
            kept.add(r.stage)
        else:
            drop.append(r.request)
    add = [(s, r) for s, r in _placed(problem, a) if s not in kept]
    # A stage placed twice is placed nowhere: placing it means dropping those requests too.
    placed = {s for s, _ in add}
    drop += [r for s, r in problem.duplicates if s in placed]
    return Fix(drop=tuple(drop), add=tuple(r for _, r in add))


def fraction_overlay(values: dict[str, float]) -> dict:
    """A YAML overlay (as data) that declares these fractions."""
    return {"stages": [{"name": s, "runtime": {"resources": {"total_gpu_memory_fraction": v}}}
                       for s, v in values.items()]}


@dataclass
class Explanation:
    """Shared by the explanations of one solve: `nearest_to(keep)` is the hint search."""

    problem: Problem
    nearest_to: Callable[..., Assignment | None]

    @property
    def nearest(self) -> Assignment | None:
        return self.nearest_to()

    def nearest_requests(self, keep: frozenset[str] = frozenset()) -> tuple[Request, ...] | None:
        a = self.nearest_to(keep) if keep else self.nearest
        return None if a is None else placement_requests(self.problem, a)

    def nearest_fix(self, keep: frozenset[str] = frozenset()) -> Fix | None:
        """The edit of the command's placement flags that reaches the nearest feasible placement
        (keeping the stages in `keep` where they were asked to run); None where none exists."""
        a = self.nearest_to(keep) if keep else self.nearest
        return None if a is None else placement_edit(self.problem, a)

    def blames(self, core: list[Rule]) -> tuple[Blame, ...]:
        out = []
        for rule in core:
            if rule.kind == "request":
                r = self.problem.request_of[rule.stage]
                out.append(Blame(request=r.request, stage=r.stage, process=r.process, noop=r.noop))
        return tuple(out)

    def card_target(self) -> CardTarget | EngineTarget | None:
        pl = self.problem.pipeline
        if pl.dialect != "planner":
            return EngineTarget(pl.dialect)
        return CardTarget(pl.name, pl.variant) if pl.source.startswith("card ") else None

    def fractions_when_requested(self, gpu: int) -> dict[str, int]:
        """Fractions on a GPU as the request would set them (declared, else recommended)."""
        out = {}
        target = self.problem.target
        for s in self.problem.stages_on(gpu):
            spec = self.problem.pipeline.stage(s)
            if spec.fraction is not None:
                out[s] = to_units(spec.fraction)
                continue
            for e, units in self.problem.recommendations.get(s, []):
                if target[e[0]] != target[e[1]]:
                    out[s] = units
                    break
        return out
