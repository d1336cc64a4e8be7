"""How far interleaved rounds leave a ratio between two rows of one bench run uncertain: each
round serves every row in turn (`planner.app.bench.rounds`), so round k of one row and round k of
another saw the same stretch of the machine, and their ratio is free of its drift from round to
round. The geometric mean of the rounds' ratios, with a 90% interval from Student's t on their
logarithms; an interval that holds 1 is a tie at that noise."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Student's t at 0.95 (a two-sided 90% interval) by degrees of freedom; between two entries the
# lower one's, the wider interval.
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860,
       9: 1.833, 10: 1.812, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


@dataclass(frozen=True)
class PairedRatio:
    """Ours over theirs over paired rounds: the geometric mean of the rounds' ratios, its 90%
    interval (None with fewer than two rounds, which say nothing of their spread), and the
    rounds counted."""

    geomean: float
    interval: tuple[float, float] | None
    rounds: int

    @property
    def resolved(self) -> bool | None:
        """Whether the interval leaves out 1 (the two differ beyond the rounds' noise); None
        without an interval."""
        if self.interval is None:
            return None
        return not self.interval[0] <= 1.0 <= self.interval[1]


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> PairedRatio | None:
    """Ours/theirs of paired rounds (a round where either is 0 is left out); None if every
    round is, or the two did not run the same rounds."""
    if len(ours) != len(theirs):
        return None
    logs = [math.log(a / b) for a, b in zip(ours, theirs) if a > 0 and b > 0]
    if not logs:
        return None
    mid = statistics.fmean(logs)
    interval = None
    if len(logs) >= 2:
        t = T95[max(df for df in T95 if df <= len(logs) - 1)]
        half = t * statistics.stdev(logs) / math.sqrt(len(logs))
        interval = (math.exp(mid - half), math.exp(mid + half))
    return PairedRatio(math.exp(mid), interval, len(logs))
