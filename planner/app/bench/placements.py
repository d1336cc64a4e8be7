"""Which placements to compare: the declared topology, single isolations, user flags, or every
feasible partition of the stages into processes. The solver decides feasibility; nothing here
re-implements a placement rule."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import planner
from planner import Isolate, Pipeline, Plan, Request, Result
from planner.app.bench.exits import BenchError
from planner.app.bench.measure import ideal_throughput

BASELINE = "declared"
MAX_ENUMERATED_UNITS = planner.MAX_ENUMERATED_UNITS
# A row's name, placement or --url server alike.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:@-]*$")


class PlacementError(BenchError):
    """A placement the user asked for cannot be benchmarked. Its exit code is `planner solve`'s
    for the same placement: 1 infeasible, 2 invalid."""


@dataclass(frozen=True)
class Placement:
    name: str
    requests: tuple[Request, ...]  # what produces it from the declared topology
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (process, stages) in plan order
    tp_stages: tuple[tuple[str, tuple[str, ...]], ...]  # (stage, rank process names)
    copies: tuple[int, ...] = ()  # of each group, in `groups` order (empty: one each)
    threads: tuple[tuple[str, int], ...] = ()  # (stage, intra-op threads) where more than one
    cpus: tuple[tuple[int, ...], ...] = ()  # each group's pinned CPUs, in `groups` order (empty: none)

    @property
    def flags(self) -> tuple[str, ...]:
        """As `planner solve` takes them, e.g. ("--isolate-stage vocoder",)."""
        return planner.flags(self.requests)

    @property
    def group_copies(self) -> tuple[int, ...]:
        """The copies of each group, in `groups` order."""
        return self.copies or (1,) * len(self.groups)

    @property
    def process_count(self) -> int:
        """OS processes serving a request's stages: every copy of a group, every TP rank."""
        return sum(self.group_copies) + sum(len(ranks) for _, ranks in self.tp_stages)

    def resource_copies(self) -> dict[str, int]:
        """How many copies of each group's serial resource run (the ideal bound divides by it)."""
        return {name: n for (name, _), n in zip(self.groups, self.group_copies) if n != 1}

    @property
    def signature(self) -> frozenset:
        """What performance depends on (names do not): which stages share a process, how many
        copies of it run, the CPUs it is pinned to, and each stage's threads."""
        threads = dict(self.threads)
        pins = self.cpus or ((),) * len(self.groups)
        return frozenset((frozenset(stages), n, pinned,
                          frozenset((s, threads.get(s, 1)) for s in stages))
                         for (_, stages), n, pinned in zip(self.groups, self.group_copies, pins))

    @property
    def is_baseline(self) -> bool:
        return self.name == BASELINE

    def resources(self) -> dict[str, tuple[str, ...]]:
        """Serial resources for the ideal bound: each process group, and each TP stage (its ranks
        run in lock step, so together they are one resource)."""
        out = {name: stages for name, stages in self.groups}
        out.update({f"{stage} (tp)": (stage,) for stage, _ in self.tp_stages})
        return out

    def ideal_rps(self, per_request_s: Mapping[str, float | None]) -> float | None:
        """The ideal throughput bound (`measure.ideal_throughput`) of stages that took
        `per_request_s` each, run as this placement runs them: its serial resources and copies."""
        return ideal_throughput(per_request_s, self.resources(), self.resource_copies())

    def describe(self) -> str:
        return " | ".join("+".join(stages) for _, stages in self.groups)


def from_plan(name: str, requests: Sequence[Request], plan: Plan) -> Placement:
    tp: dict[str, list[str]] = {}
    for p in plan.tp_processes:
        tp.setdefault(p.stage, []).append(p.name)
    return Placement(name=name, requests=tuple(requests),
                     groups=tuple((g.name, tuple(g.stages)) for g in plan.groups),
                     tp_stages=tuple((s, tuple(r)) for s, r in tp.items()),
                     copies=tuple(g.copies for g in plan.groups),
                     cpus=tuple(g.cpus for g in plan.groups) if any(g.cpus for g in plan.groups)
                     else (),
                     threads=tuple((s.name, s.threads) for s in plan.stages if s.threads != 1))


def solve_requests(pipeline: Pipeline, requests: Sequence[Request]) -> Result:
    return planner.solve_pipeline(pipeline, requests=requests)


def _first_problem(result: Result) -> str:
    d = result.diagnostics[0] if result.diagnostics else None
    if d is None:
        return f"the solver answered {result.status}"
    hint = f" (hint: {d.hint})" if d.hint else ""
    because = f" because {d.because[0]}" if d.because else ""
    return f"{d.message}{because}{hint}"


def baseline(pipeline: Pipeline) -> Placement:
    result = solve_requests(pipeline, ())
    if not result.ok:
        raise PlacementError(f"the declared topology of {pipeline.name} does not solve: "
                             f"{_first_problem(result)}.", result.exit_code)
    return from_plan(BASELINE, (), result.plan)


def single_isolations(pipeline: Pipeline) -> list[Placement]:
    """Every stage that can run alone and does not already: the issue's default comparison."""
    declared = planner.declared_plan(pipeline)
    out = []
    for stage in pipeline.stages:
        group = declared.group_of(stage.name)
        if stage.is_tp or (group is not None and group.stages == (stage.name,)):
            continue
        requests = (Isolate(stage.name),)
        result = solve_requests(pipeline, requests)
        if result.ok:
            out.append(from_plan(f"isolate {stage.name}", requests, result.plan))
    return out


def parse_placement_option(text: str) -> tuple[str, tuple[Request, ...]]:
    """`NAME='--isolate-stage vocoder --stage-process a=b'` -> (NAME, requests)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not NAME.match(name):
        raise PlacementError(
            f"--placement {text!r} is not NAME='FLAGS': give a name (letters, digits, . _ + : @ -) "
            "then '=' and the placement flags, e.g. --placement split='--isolate-stage vocoder'.")
    try:
        requests = planner.parse_flags(shlex.split(rest))
    except ValueError as exc:
        raise PlacementError(f"--placement {name}: cannot read its flags {rest!r}: {exc}.") from None
    # Malformed STAGE=PROCESS values are kept as typed: the solver reports them with its own
    # diagnostic. Assignments first, as the command line reads them.
    return name, tuple(sorted(requests, key=lambda r: isinstance(r, Isolate)))


def user_placement(pipeline: Pipeline, text: str) -> Placement:
    name, requests = parse_placement_option(text)
    result = solve_requests(pipeline, requests)
    if not result.ok:
        shown = " ".join(planner.flags(requests)) or "(no flags)"
        raise PlacementError(f"--placement {name} ({shown}) cannot run on {pipeline.name}: "
                             f"{_first_problem(result)}.", result.exit_code)
    return from_plan(name, requests, result.plan)


def all_feasible(pipeline: Pipeline, limit: int) -> list[Placement]:
    """Up to `limit` feasible partitions (the declared one included), in enumeration order."""
    try:
        found = planner.feasible_placements(pipeline, limit or None)
    except planner.TooManyPlacements as exc:
        raise PlacementError(f"--all-feasible: {exc}. Name the placements to compare with "
                             "--placement instead.") from None
    return [from_plan(" | ".join("+".join(b) for b in f.blocks), f.requests, f.plan)
            for f in found]


def choose(pipeline: Pipeline, options: Sequence[str], all_feasible_max: int | None,
           declared: bool = True) -> tuple[list[Placement], list[str]]:
    """The placements to bench, baseline first, duplicates dropped; plus notes on what was dropped.

    `all_feasible_max`: None = not asked; 0 = no limit. `declared`: False leaves the baseline out
    unless an option is it (a run that measures one plan at a load of its own, as tune's replica
    check does).
    """
    base = baseline(pipeline)
    if options:
        candidates = [user_placement(pipeline, o) for o in options]
    elif all_feasible_max is not None:
        candidates = all_feasible(pipeline, 0)
    else:
        candidates = single_isolations(pipeline)
    chosen, notes = ([base] if declared else []), []
    names = {p.name for p in chosen}
    for c in candidates:
        same = next((p for p in chosen if p.signature == c.signature), None)
        if same is not None:
            if c.name != same.name and not (same.is_baseline and all_feasible_max is not None):
                notes.append(f"{c.name} runs the same processes as {same.name}; measured once")
            continue
        if c.name in names:
            raise PlacementError(f"two placements are named {c.name!r}; give each its own name.")
        names.add(c.name)
        chosen.append(c)
    if all_feasible_max:
        if len(chosen) > all_feasible_max:
            notes.append(f"{len(chosen)} feasible placements; benchmarking the first "
                         f"{all_feasible_max} (--max)")
        chosen = chosen[:max(all_feasible_max, 1)]
    return chosen, notes
