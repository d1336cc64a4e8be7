"""The one percentile: what `planner bench` measures and what `planner tune` predicts are the same
statistic, so a predicted p99 and a measured p99 can be compared (tune's verification does)."""

from __future__ import annotations

import math
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
