"""Order statistics for latency samples."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (the
    definition numpy uses by default); None for no values."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be within 0..100, not {q}")
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


@dataclass(frozen=True)
class Summary:
    count: int
    mean: float
    p50: float
    p90: float
    p99: float
    min: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(values: Sequence[float]) -> Summary | None:
    if not values:
        return None
    return Summary(count=len(values), mean=sum(values) / len(values),
                   p50=percentile(values, 50), p90=percentile(values, 90),
                   p99=percentile(values, 99), min=min(values), max=max(values))
