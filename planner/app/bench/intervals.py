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

from planner.stats import log_ratio_interval

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
    return PairedRatio(math.exp(statistics.fmean(logs)), log_ratio_interval(logs), len(logs))
