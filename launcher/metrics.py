"""Prometheus text exposition for a deployment (no client library needed for this little)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value
        self.n += 1

    def lines(self, name: str, labels: str) -> Iterable[str]:
        running = 0
        for bound, count in zip(self.buckets, self.counts):
            running += count
            yield f'{name}_bucket{{{labels},le="{bound}"}} {running}'
        yield f'{name}_bucket{{{labels},le="+Inf"}} {self.n}'
        yield f"{name}_sum{{{labels}}} {self.total:.6f}"
        yield f"{name}_count{{{labels}}} {self.n}"


def rss_bytes(pid: int | None) -> int | None:
    """Resident set size from /proc (Linux); None where that is not available."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
