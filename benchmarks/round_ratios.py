"""Ratios between two rows of one `planner bench` run, over its interleaved rounds.

Each row of a bench run with `--rounds N` keeps each round's requests per second
(`round_throughput_rps` in results.json). Two rows measured in the same rounds pair up round by
round, and each pair's ratio is free of the machine's drift from one round to the next. Their
geometric mean, with a 90% interval (Student's t on the logs), says how far the rounds leave the
ratio uncertain: an interval that holds 1 is a tie at that noise.

Pure (no processes, no I/O), for peer_piper.py and url_vs_served.py, and their smoke tests.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from planner.app.bench.intervals import paired_ratio


@dataclass(frozen=True)
class Summary:
    ratios: tuple[float | None, ...]  # per round; None where either side had no figure
    median: float
    geomean: float
    interval: tuple[float, float] | None  # 90%; None with fewer than two rounds

    def holds(self, value: float = 1.0) -> bool | None:
        """Whether the 90% interval holds `value` (a tie, for 1); None without an interval."""
        return None if self.interval is None else self.interval[0] <= value <= self.interval[1]

    def text(self) -> str:
        """`x1.119 (1.119, 1.06-1.19)`: the median, then the geometric mean and its interval."""
        spread = f", {self.interval[0]:.2f}-{self.interval[1]:.2f}" if self.interval else ""
        return f"x{self.median:.3f} ({self.geomean:.3f}{spread})"


def summarise(ours: list[float], theirs: list[float]) -> Summary | None:
    """Ratios ours/theirs of paired rounds, their median, their geometric mean and a 90%
    interval for it. A round where either figure is missing (0) is left out; None if every
    round is."""
    ratios = tuple(a / b if a > 0 and b > 0 else None for a, b in zip(ours, theirs, strict=True))
    paired = paired_ratio(ours, theirs)
    if paired is None:
        return None
    return Summary(ratios, statistics.median(r for r in ratios if r is not None),
                   paired.geomean, paired.interval)


def run_of(results: dict, row: str, label: str) -> dict | None:
    """The run of `row` (a placement's or a --url target's name) at the load `label` (C=4)."""
    return next((r for r in results["runs"] if (r["placement"], r["label"]) == (row, label)),
                None)


def labels(results: dict) -> list[str]:
    """The loads measured, in order."""
    return list(dict.fromkeys(r["label"] for r in results["runs"]))


def rounds_rps(run: dict) -> list[float]:
    """Each round's requests per second (one figure for a run of one round)."""
    return list(run["round_throughput_rps"] or [run["load"]["throughput_rps"]])


def stat(run: dict | None, field: str, q: str = "p50") -> float | None:
    """A merged percentile of `run`'s load (latency_s, ttfa_s); None where not measured."""
    summary = run and run["load"][field]
    return summary[q] if summary else None


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def versus(results: dict, row: str, reference: str, label: str) -> dict[str, object]:
    """`row` against `reference` at one load: requests/s paired by round (a `Summary`), and the
    merged latency p50 and first-audio p50 (streamed runs) as plain ratios."""
    mine, theirs = run_of(results, row, label), run_of(results, reference, label)
    if mine is None or theirs is None:
        return {}
    return {"req/s": summarise(rounds_rps(mine), rounds_rps(theirs)),
            "p50": ratio(stat(mine, "latency_s"), stat(theirs, "latency_s")),
            "first audio p50": ratio(stat(mine, "ttfa_s"), stat(theirs, "ttfa_s"))}
