"""Comparisons within one run: ratios against the declared topology and the Pareto front.

Absolute numbers on a shared machine drift between runs; ratios between placements measured
back to back in the same run drift far less, so those are what the report leads with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Point:
    """One placement at one concurrency, in the three dimensions the front is drawn over."""

    key: str
    throughput: float  # higher is better
    p99_s: float | None  # lower is better; None (no successful request) is worst
    processes: int | None  # lower is better; None (a --url target's) is compared with none


def _better_or_equal(a: Point, b: Point) -> bool:
    ap = float("inf") if a.p99_s is None else a.p99_s
    bp = float("inf") if b.p99_s is None else b.p99_s
    fewer = a.processes is None or b.processes is None or a.processes <= b.processes
    return a.throughput >= b.throughput and ap <= bp and fewer


def dominates(a: Point, b: Point) -> bool:
    """a is at least as good as b everywhere and strictly better somewhere."""
    return _better_or_equal(a, b) and not _better_or_equal(b, a)


def pareto_front(points: Sequence[Point]) -> frozenset[str]:
    """Keys of the points no other point dominates (ties all stay on the front)."""
    return frozenset(p.key for p in points if not any(dominates(q, p) for q in points))


def ratio(value: float | None, baseline: float | None) -> float | None:
    if value is None or baseline is None or baseline == 0:
        return None
    return value / baseline
