"""What every rule's explanation shares: the problem, the nearest feasible placement for hints,
the requests of a core in words, and the fractions a GPU would get."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planner.plan import Assign, Fix, Isolate, Request
from planner.problem import Problem, to_units
from planner.render.flags import flags
from planner.rules.base import Rule

if TYPE_CHECKING:
    from planner.solver import Assignment


def quoted(requests: tuple[Request, ...]) -> str:
    return "`" + " ".join(flags(requests)) + "`"


def placement_requests(problem: Problem, a: Assignment) -> tuple[Request, ...]:
    """The requests that produce assignment `a` from the declared topology."""
    out: list[Request] = []
    for s in problem.pipeline.stage_names:
        if s not in a.process:
            continue
        r = problem.request_of.get(s)
        if r is not None and r.alone and s in a.alone_kept and a.process[s] == r.process:
            out.append(Isolate(r.typed))
        elif a.process[s] != problem.baseline.process[s]:
            out.append(Assign(s, a.process[s]))
    return tuple(out)


def placement_hint(problem: Problem, nearest: Assignment | None, what: str) -> tuple[str, Fix | None]:
    if nearest is None:
        return (f"no placement near this request avoids the conflict; {what}", None)
    requests = placement_requests(problem, nearest)
    if not requests:
        return (f"{what}: drop the placement flags (the declared topology is valid)",
                Fix(requests=()))
    return (f"{what}: run with {quoted(requests)} instead", Fix(requests=requests))


def yaml_fractions(values: dict[str, float]) -> tuple[str, dict]:
    lines = ["stages:"]
    overlay: dict = {"stages": []}
    for s, v in values.items():
        lines.append(f"  - {{name: {s}, runtime: {{resources: {{total_gpu_memory_fraction: {v:g}}}}}}}")
        overlay["stages"].append(
            {"name": s, "runtime": {"resources": {"total_gpu_memory_fraction": v}}})
    return "\n".join(lines), overlay


def config_hint(problem: Problem, yaml_text: str) -> str:
    """Where the YAML goes: the user's config, or a new overlay on the card they started from."""
    pl = problem.pipeline
    if pl.source.startswith("card "):
        return (f"put this in a YAML file and pass it with --config:\nmodel: {pl.name}\n"
                + (f"variant: {pl.variant}\n" if pl.variant != "default" else "") + yaml_text)
    return f"add to your --config YAML:\n{yaml_text}"


@dataclass
class Explanation:
    """Shared by the explanations of one solve: `nearest(keep)` is the hint search."""

    problem: Problem
    nearest_to: Callable[..., Assignment | None]

    @property
    def nearest(self) -> Assignment | None:
        return self.nearest_to()

    def because_requests(self, core: list[Rule]) -> list[str]:
        out = []
        for rule in core:
            if rule.kind == "request":
                r = self.problem.request_of[rule.stage]
                if r.noop:
                    continue
                where = f"its own process {r.process}" if r.alone else f"process {r.process}"
                alias = f" (role {r.typed} of {r.stage})" if r.typed != r.stage else ""
                out.append(f"`{r.flag}` puts {r.stage}{alias} in {where}")
        return out

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
