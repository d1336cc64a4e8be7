"""How far paired rounds leave a ratio uncertain: a 90% interval for the geometric mean of the
rounds' ratios, from Student's t on their logarithms. Rounds alternate the two sides, so a pair saw
the same stretch of the machine; the judge of tune's picks and the peer head to head both use it."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Student's t at 0.95 (a two-sided 90% interval) by degrees of freedom; between two entries the
# lower one's, the wider interval.
T95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833,
       10: 1.812, 11: 1.796, 12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697}


def log_ratio_interval(logs: Sequence[float]) -> tuple[float, float] | None:
    """The 90% interval, as ratios, for the mean of `logs` (each round's log ratio); None with
    fewer than two rounds, which say nothing of their spread."""
    if len(logs) < 2:
        return None
    mid = statistics.fmean(logs)
    t = T95[max(df for df in T95 if df <= len(logs) - 1)]
    half = t * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mid - half), math.exp(mid + half)
