"""Which placements to compare: the declared topology, single isolations, user flags, or every
feasible partition of the stages into processes. The solver decides feasibility; nothing here
re-implements a placement rule."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import planner
from planner.pipeline import Pipeline
from planner.plan import Plan, Result
from planner.requests import assign_flag, isolate_flag, options_from_flags
from planner.topology import declared_baseline, tp_rank_names

BASELINE = "declared"
# Bell(8) = 4140 partitions, each one solver call: beyond that enumeration stops being a preview.
MAX_ENUMERATED_UNITS = 8
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:@-]*$")


class PlacementError(ValueError):
    """A placement the user asked for cannot be benchmarked; the message is one paragraph."""


@dataclass(frozen=True)
class Placement:
    name: str
    flags: tuple[str, ...]  # as `planner solve` takes them, e.g. ("--isolate-stage vocoder",)
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (process, stages) in plan order
    tp_stages: tuple[tuple[str, tuple[str, ...]], ...]  # (stage, rank process names)

    @property
    def process_count(self) -> int:
        return len(self.groups) + sum(len(ranks) for _, ranks in self.tp_stages)

    @property
    def signature(self) -> frozenset[frozenset[str]]:
        """What performance depends on: which stages share a process (names do not matter)."""
        return frozenset(frozenset(stages) for _, stages in self.groups)

    @property
    def is_baseline(self) -> bool:
        return self.name == BASELINE

    def resources(self) -> dict[str, tuple[str, ...]]:
        """Serial resources for the ideal bound: each process group, and each TP stage (its ranks
        run in lock step, so together they are one resource)."""
        out = {name: stages for name, stages in self.groups}
        out.update({f"{stage} (tp)": (stage,) for stage, _ in self.tp_stages})
        return out

    def describe(self) -> str:
        return " | ".join("+".join(stages) for _, stages in self.groups)


def from_plan(name: str, flags: Sequence[str], plan: Plan) -> Placement:
    tp: dict[str, list[str]] = {}
    for p in plan.tp_processes:
        tp.setdefault(p.stage, []).append(p.name)
    return Placement(name=name, flags=tuple(flags),
                     groups=tuple((g.name, tuple(g.stages)) for g in plan.groups),
                     tp_stages=tuple((s, tuple(r)) for s, r in tp.items()))


def solve_flags(pipeline: Pipeline, flags: Sequence[str]) -> Result:
    isolate, assign = options_from_flags(tuple(flags))
    return planner.solve_pipeline(pipeline, isolate, assign)


def _first_problem(result: Result) -> str:
    d = result.diagnostics[0] if result.diagnostics else None
    if d is None:
        return f"the solver answered {result.status}"
    hint = f" (hint: {d.hint})" if d.hint else ""
    because = f" because {d.because[0]}" if d.because else ""
    return f"{d.message}{because}{hint}"


def baseline(pipeline: Pipeline) -> Placement:
    result = solve_flags(pipeline, ())
    if not result.ok:
        raise PlacementError(f"the declared topology of {pipeline.name} does not solve: "
                             f"{_first_problem(result)}.")
    return from_plan(BASELINE, (), result.plan)


def single_isolations(pipeline: Pipeline) -> list[Placement]:
    """Every stage that can run alone and does not already: the issue's default comparison."""
    declared = declared_baseline(pipeline)
    out = []
    for stage in pipeline.stages:
        if stage.is_tp or declared.runs_alone(stage.name):
            continue
        flags = (isolate_flag(stage.name),)
        result = solve_flags(pipeline, flags)
        if result.ok:
            out.append(from_plan(f"isolate {stage.name}", flags, result.plan))
    return out


def _flag_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="--placement", add_help=False, exit_on_error=False)
    p.add_argument("--isolate-stage", action="append", default=[])
    p.add_argument("--stage-process", action="append", default=[])
    return p


def parse_placement_option(text: str) -> tuple[str, tuple[str, ...]]:
    """`NAME='--isolate-stage vocoder --stage-process a=b'` -> (NAME, canonical flags)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name):
        raise PlacementError(
            f"--placement {text!r} is not NAME='FLAGS': give a name (letters, digits, . _ + : @ -) "
            "then '=' and the placement flags, e.g. --placement split='--isolate-stage vocoder'.")
    try:
        words = shlex.split(rest)
        parsed, extra = _flag_parser().parse_known_args(words)
    except (ValueError, argparse.ArgumentError) as exc:
        raise PlacementError(f"--placement {name}: cannot read its flags {rest!r}: {exc}.") from None
    if extra:
        raise PlacementError(
            f"--placement {name}: {' '.join(extra)!r} is not a placement flag; only "
            "--isolate-stage STAGE and --stage-process STAGE=PROCESS are allowed there.")
    # Kept as typed: the solver reports a malformed STAGE=PROCESS with its own diagnostic.
    flags = tuple(f"--stage-process {a}" for a in parsed.stage_process)
    flags += tuple(isolate_flag(s) for s in parsed.isolate_stage)
    return name, flags


def user_placement(pipeline: Pipeline, text: str) -> Placement:
    name, flags = parse_placement_option(text)
    result = solve_flags(pipeline, flags)
    if not result.ok:
        shown = " ".join(flags) or "(no flags)"
        raise PlacementError(f"--placement {name} ({shown}) cannot run on {pipeline.name}: "
                             f"{_first_problem(result)}.")
    return from_plan(name, flags, result.plan)


def set_partitions(items: Sequence[str]) -> Iterator[tuple[tuple[str, ...], ...]]:
    """Every partition of `items` into non-empty blocks, blocks and members in input order.

    Restricted-growth order: the all-together partition comes first, every-item-alone last.
    """
    n = len(items)
    if n == 0:
        yield ()
        return

    def grow(i: int, labels: list[int], blocks: int) -> Iterator[list[int]]:
        if i == n:
            yield labels
            return
        for b in range(blocks + 1):
            labels.append(b)
            yield from grow(i + 1, labels, max(blocks, b + 1))
            labels.pop()

    for labels in grow(0, [], 0):
        out: list[list[str]] = [[] for _ in range(max(labels) + 1)]
        for item, b in zip(items, labels):
            out[b].append(item)
        yield tuple(tuple(block) for block in out)


def _units(pipeline: Pipeline) -> list[tuple[str, ...]]:
    """Stages that move together: a fused group is one unit; TP stages never move."""
    fused = {m: g for g in pipeline.fused_stages for m in g}
    units, seen = [], set()
    for s in pipeline.stages:
        if s.is_tp or s.name in seen:
            continue
        unit = tuple(m for m in pipeline.stage_names if m in fused.get(s.name, (s.name,)))
        seen.update(unit)
        units.append(unit)
    return units


def block_names(pipeline: Pipeline, blocks: Sequence[Sequence[str]]) -> list[str]:
    """Deterministic process names: the first stage's declared process if still free, else the
    first stage's own name; so the partition that equals the declared topology keeps its names."""
    declared = declared_baseline(pipeline).process
    reserved = {n for s in pipeline.stages if s.is_tp for n in tp_rank_names(pipeline, s.name)}
    names: list[str] = []
    for block in blocks:
        fallbacks = (f"{block[0]}_{i}" for i in range(2, 2 + len(blocks)))
        for candidate in (declared.get(block[0]), block[0], *fallbacks):
            if candidate and candidate not in names and candidate not in reserved:
                names.append(candidate)
                break
    return names


def partition_flags(pipeline: Pipeline, blocks: Sequence[Sequence[str]]) -> tuple[str, ...]:
    return tuple(assign_flag(stage, name)
                 for block, name in zip(blocks, block_names(pipeline, blocks))
                 for stage in block)


def all_feasible(pipeline: Pipeline, limit: int) -> list[Placement]:
    """Up to `limit` feasible partitions (the declared one included), in enumeration order."""
    units = _units(pipeline)
    if len(units) > MAX_ENUMERATED_UNITS:
        raise PlacementError(
            f"{pipeline.name} has {len(units)} movable stages; --all-feasible enumerates at most "
            f"{MAX_ENUMERATED_UNITS} (their partitions grow as Bell numbers). Name the placements "
            "to compare with --placement instead.")
    by_head = {u[0]: u for u in units}
    found: list[Placement] = []
    for unit_blocks in set_partitions(list(by_head)):
        blocks = [tuple(m for head in block for m in by_head[head]) for block in unit_blocks]
        flags = partition_flags(pipeline, blocks)
        result = solve_flags(pipeline, flags)
        if result.ok:
            found.append(from_plan(" | ".join("+".join(b) for b in blocks), flags, result.plan))
    return found[:limit] if limit else found


def choose(pipeline: Pipeline, options: Sequence[str], all_feasible_max: int | None
           ) -> tuple[list[Placement], list[str]]:
    """The placements to bench, baseline first, duplicates dropped; plus notes on what was dropped.

    `all_feasible_max`: None = not asked; 0 = no limit.
    """
    base = baseline(pipeline)
    if options:
        candidates = [user_placement(pipeline, o) for o in options]
    elif all_feasible_max is not None:
        candidates = all_feasible(pipeline, 0)
    else:
        candidates = single_isolations(pipeline)
    chosen, notes = [base], []
    names = {base.name}
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
