"""Order statistics for latency samples, with the planner's one percentile (`planner.stats`):
tune predicts the same statistic."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from planner.stats import percentile

__all__ = ["Summary", "percentile", "summarise"]


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
