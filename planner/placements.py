"""Every placement the rules accept: the partitions of a pipeline's movable stages into processes,
each solved by the planner itself (no rule is re-derived here). What `planner bench --all-feasible`
measures and what `planner tune` ranks."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from planner.api import accepted_plan, as_pipeline
from planner.pipeline import Pipeline
from planner.plan import Assign, Isolate, Plan, Request
from planner.topology import declared_baseline, tp_rank_names

# Bell(8) = 4140 partitions, each one solver call: beyond that enumeration stops being a preview.
MAX_ENUMERATED_UNITS = 8


class TooManyPlacements(ValueError):
    """The pipeline has more movable units than enumeration covers; the message says so."""


@dataclass(frozen=True)
class FeasiblePlacement:
    """One accepted partition: the requests that produce it from the declared topology, and its plan."""

    requests: tuple[Request, ...]
    plan: Plan

    @property
    def blocks(self) -> tuple[tuple[str, ...], ...]:
        """Stages sharing a process, in plan order (TP ranks left out: they never move)."""
        return tuple(g.stages for g in self.plan.groups)


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


def movable_units(pipeline: Pipeline) -> list[tuple[str, ...]]:
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
    """Deterministic process names that keep the requests few: larger blocks first, each takes the
    declared process most of its stages already run in, if still free; else its first stage's
    name. So the declared partition keeps every name, and splitting one stage off asks to move
    only that stage."""
    declared = declared_baseline(pipeline).process
    reserved = {n for s in pipeline.stages if s.is_tp for n in tp_rank_names(pipeline, s.name)}
    names: list[str | None] = [None] * len(blocks)
    taken: set[str] = set(reserved)
    for i in sorted(range(len(blocks)), key=lambda i: -len(blocks[i])):
        counts: dict[str, int] = {}
        for stage in blocks[i]:
            if declared.get(stage):
                counts[declared[stage]] = counts.get(declared[stage], 0) + 1
        ranked = sorted(counts, key=lambda n: -counts[n])  # stable: first stage's name on ties
        fallbacks = [f"{blocks[i][0]}_{k}" for k in range(2, 2 + len(blocks))]
        for candidate in (*ranked, blocks[i][0], *fallbacks):
            if candidate not in taken:
                names[i] = candidate
                taken.add(candidate)
                break
    return [n or "" for n in names]


def partition_requests(pipeline: Pipeline, blocks: Sequence[Sequence[str]]) -> tuple[Request, ...]:
    """The requests that put each block of stages in a process of its own (none for a stage that
    already runs there: the declared partition needs no request at all)."""
    declared = declared_baseline(pipeline).process
    out: list[Request] = []
    for block, name in zip(blocks, block_names(pipeline, blocks)):
        if block == (name,) and declared.get(name) != name:
            out.append(Isolate(name))  # a stage alone in a process of its own name
            continue
        out.extend(Assign(stage, name) for stage in block if declared.get(stage) != name)
    return tuple(out)


def feasible_placements(pipeline: Pipeline | str, limit: int | None = None, *,
                        variant: str | None = None) -> list[FeasiblePlacement]:
    """Every partition of the movable stages into processes that the planner accepts (the declared
    one included), in enumeration order (all together first), at most `limit` of them.
    `pipeline`: a Pipeline (`planner.load`) or a model name, as `planner.solve` takes.

    Raises TooManyPlacements beyond MAX_ENUMERATED_UNITS movable units."""
    pipeline = as_pipeline(pipeline, variant)
    units = movable_units(pipeline)
    if len(units) > MAX_ENUMERATED_UNITS:
        raise TooManyPlacements(
            f"{pipeline.name} has {len(units)} movable stages; enumeration covers at most "
            f"{MAX_ENUMERATED_UNITS} (their partitions grow as Bell numbers)")
    by_head = {u[0]: u for u in units}
    found: list[FeasiblePlacement] = []
    for unit_blocks in set_partitions(list(by_head)):
        blocks = [tuple(m for head in block for m in by_head[head]) for block in unit_blocks]
        requests = partition_requests(pipeline, blocks)
        plan = accepted_plan(pipeline, requests)
        if plan is not None:
            found.append(FeasiblePlacement(requests=requests, plan=plan))
            if limit is not None and len(found) >= limit:
                break
    return found
