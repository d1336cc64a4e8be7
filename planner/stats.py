"""The statistics measured and predicted figures share. The one percentile: what `planner bench`
measures and what `planner tune` predicts are the same statistic, so a predicted p99 and a
measured p99 can be compared (tune's verification does). The one interval for a ratio over
paired rounds: bench's winners, tune's verification and the benchmark scripts' judges."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) of `values`, None for no values.

    Linear interpolation between the two closest ranks (numpy's default, Hyndman and Fan's
    type 7), on purpose: a reader who checks a report with numpy or pandas gets the same number,
    and it moves smoothly with the samples, where a rank-only definition (nearest rank, rounded
    index) jumps by a whole sample as the count changes: at p99 of a few hundred requests, that
    is a different request.
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, not {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


# Student's t at 0.95 (a two-sided 90% interval) by degrees of freedom; between two entries the
# lower one's, the wider interval.
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833,
       10: 1.812, 11: 1.796, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


def log_ratio_interval(logs: Sequence[float]) -> tuple[float, float] | None:
    """A 90% interval, as ratios, for the geometric mean of paired rounds' ratios, from Student's
    t on their logarithms `logs` (one per round). Rounds interleave the two sides, so a pair saw
    the same stretch of the machine. None with fewer than two rounds, which say nothing of their
    spread."""
    if len(logs) < 2:
        return None
    mid = statistics.fmean(logs)
    t = T95[max(df for df in T95 if df <= len(logs) - 1)]
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mid - half), math.exp(mid + half)
