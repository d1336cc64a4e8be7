"""Judging `planner tune`'s pick by what serving the placements measured: the prediction errors and
the verdict. Pure; `planner.app.tune_verify` does the serving."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from planner.tune.choose import TIE, objective_score

if TYPE_CHECKING:
    from planner.tune.choose import Candidate, Choice


Rows = list[dict[str, Any]]  # what bench measured of one placement, a dict per workload


@dataclass(frozen=True)
class Measured:
    """What serving the placements measured (`planner tune --verify`).

    `ranked`: the served placements of the ranking, by index into `choice.ranked`.
    `excluded_baseline`: the declared topology when tune excluded it from the ranking (over an
    SLO): bench serves it anyway, as its baseline, so it is reported, but never judged nor
    recommended. None when the declared topology is ranked (it is then in `ranked`) or was not
    measured."""

    ranked: Mapping[int, Rows] = field(default_factory=dict)
    excluded_baseline: Rows | None = None

    def __len__(self) -> int:
        """Placements measured."""
        return len(self.ranked) + (self.excluded_baseline is not None)


def errors(predicted: Candidate, measured: list[dict[str, Any]]) -> list[float | None]:
    out = []
    for p, m in zip(predicted.predicted, measured):
        got = m.get("throughput_rps")
        out.append(None if not got else (p.throughput_rps - got) / got)
    return out


@dataclass(frozen=True)
class Verdict:
    """What the served placements say of the predicted pick (index 0 of `choice.ranked`)."""

    best: int  # index into choice.ranked of the placement that measured best by the objective
    gain: float  # its measured score over the pick's, >= 1; 1.0 when the pick measured best
    beyond_tie: bool  # its merged lead over the pick is more than `TIE`, whatever a round says
    overturned: bool  # it beat the pick by more than the model resolves: recommend it instead
    served: int  # placements measured at every workload


def _measured_score(rows: list[dict[str, Any]], objective: str) -> float | None:
    """`choose.objective_score` of what was measured; None if a workload went unmeasured or had
    errors."""
    if not rows or any(not r.get("throughput_rps") or not r.get("latency_p50_ms")
                       or r.get("errors") for r in rows):
        return None
    return objective_score(objective, [r["throughput_rps"] for r in rows],
                           [r["latency_p50_ms"] for r in rows], [r.get("ttfa_p90_ms") for r in rows])


def rounds_agree(pick: Rows, other: Rows) -> bool:
    """Whether no interleaved round (bench's `round_throughput_rps`, paired by order) has the
    pick serving more requests per second than `other`, at any workload; True where the rounds
    are not known. A lead the merged figures show but a round contradicts is the machine's
    drift as much as the plans' difference (a short check on a shared machine meets both)."""
    for mine, theirs in zip(pick, other):
        a, b = mine.get("round_throughput_rps") or (), theirs.get("round_throughput_rps") or ()
        if len(a) == len(b) and any(x >= y for x, y in zip(a, b)):
            return False
    return True


def verdict(choice: Choice, measured: Measured) -> Verdict | None:
    """The placement that measured best, if the pick was measured. The same tie applies as to
    predictions: a measured lead within it is not a reason to change the recommendation, nor is
    one that a round contradicts (by throughput, `rounds_agree`)."""
    scores = {i: _measured_score(rows, choice.objective) for i, rows in measured.ranked.items()}
    scores = {i: v for i, v in scores.items() if v is not None}
    if 0 not in scores:
        return None
    best = max(scores, key=lambda i: (scores[i], -i))
    mine, top = scores[0], scores[best]
    gain = top / mine if top > 0 else mine / top
    beyond_tie = best != 0 and top - mine > abs(mine) * TIE
    overturned = beyond_tie
    if overturned and choice.objective == "throughput":
        overturned = rounds_agree(measured.ranked[0], measured.ranked[best])
    return Verdict(best, gain, beyond_tie, overturned, len(scores))
