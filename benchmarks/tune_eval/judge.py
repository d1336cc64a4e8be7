"""The judge of `generated.py`: it reads measurements only (never tune's ranking or tie
rules). A pick's ratio to the best measured, the interval the head to head's paired rounds give
it, the prediction errors, the summary the benchmark reports, and the bars over several saved
runs (`overall`)."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from planner.stats import log_ratio_interval, percentile

WITHIN = 0.05  # a pick this close to the best measured counts as a hit (the bar)


@dataclass(frozen=True)
class Judged:
    seed: int
    load: str  # "C=4", "40 req/s"
    pick: str
    best: str  # the best of the all-placements measurement
    pick_rps: float  # head to head (or the all-placements figure when the pick was the best)
    best_rps: float
    head_to_head: bool
    # pick over best, a 90% interval from the head to head's paired rounds (`ratio_interval`)
    interval_90: tuple[float, float] | None = None

    @classmethod
    def from_saved(cls, entry: dict) -> Judged:
        """One of a saved summary's `judged` entries (which carry their ratio besides)."""
        return cls(**{k: entry[k] for k in cls.__dataclass_fields__ if k in entry})

    @property
    def ratio(self) -> float:
        """The pick over the best, at most 1: where the pick measured above the best head to head,
        it is as good as the best."""
        return min(self.pick_rps / self.best_rps, 1.0) if self.best_rps else 0.0


def label(flags: list[str]) -> str:
    return " ".join(flags) or "declared"


def measured_at(answer: dict, k: int) -> dict[str, float]:
    """Each candidate's measured throughput at the k-th load, by its flags."""
    out = {}
    for c in answer["candidates"]:
        m = (c.get("measured_by_workload") or [None] * (k + 1))[k] or {}
        if m.get("throughput_rps") and not m.get("errors"):
            out[label(c["flags"])] = m["throughput_rps"]
    return out


# Under this share of the CPUs' running time stolen, a measurement is quiet: the bound rate
# answers note past (planner/tune/rate_report.STOLEN_NOTE_SHARE; not imported, as the judge
# imports nothing of tune's; a test holds the two equal).
QUIET = 0.10


def errors(answer: dict, quiet_only: bool = False) -> list[float]:
    """Relative throughput prediction errors over every measured candidate and load; with
    `quiet_only`, over those measured while the host stole under `QUIET` of the CPUs' running
    time (rows that do not say, from runs before tune recorded it, are left out)."""
    out = []
    for c in answer["candidates"]:
        for p, m in zip(c["predicted_by_workload"], c.get("measured_by_workload") or []):
            if not m or not m.get("throughput_rps"):
                continue
            stolen = m.get("cpu_stolen_of_running")
            if quiet_only and (stolen is None or stolen >= QUIET):
                continue
            out.append((p["throughput_rps"] - m["throughput_rps"]) / m["throughput_rps"])
    return out


def summary(judged: list[Judged], errs: list[float], quiet: list[float] | None = None) -> dict:
    """The bars; with `quiet` (the errors of the quiet measurements among `errs`), the same
    error figures over those beside them, to tell the model's error from the host's."""
    ratios = [j.ratio for j in judged]
    absolute = [abs(e) for e in errs]
    calm = [abs(e) for e in quiet or []]
    beside = {} if quiet is None else {
        "quiet_median_error": round(percentile(calm, 50), 4) if calm else None,
        "quiet_p90_error": round(percentile(calm, 90), 4) if calm else None,
        "quiet_errors": len(calm)}
    return {"picks": len(ratios),
            "within_5pct": sum(r >= 1 - WITHIN for r in ratios),
            "share_within_5pct": round(sum(r >= 1 - WITHIN for r in ratios) / len(ratios), 3)
            if ratios else None,
            "mean_pick_over_best": round(statistics.fmean(ratios), 4) if ratios else None,
            "lowest": round(min(ratios), 4) if ratios else None,
            "median_error": round(percentile(absolute, 50), 4) if absolute else None,
            "p90_error": round(percentile(absolute, 90), 4) if absolute else None,
            "errors": len(absolute), **beside}


def ratio_interval(pairs: list[tuple[float, float]]) -> tuple[float, float] | None:
    """A 90% interval for the pick over the best from the paired rounds' ratios (Student's t on
    their logarithms): how far the judge itself can be off. None with fewer than two rounds."""
    return log_ratio_interval([math.log(p / b) for p, b in pairs if p > 0 and b > 0])


def overall(directories: list[Path]) -> dict:
    """The issue's bars over several judging sets at once: each `--save` directory's picks and
    prediction errors, a pick judged again (a `--rejudge` directory given beside the run it judged)
    counted by its new head to head instead of its old one. Per set and over all of them."""
    runs = {d.name: d for d in directories if (d / "summary.json").is_file()}
    again: dict[str, dict] = {}
    for d in directories:
        if (d / "rejudge.json").is_file():
            data = json.loads((d / "rejudge.json").read_text(encoding="utf-8"))
            if data["rejudged"] not in runs:
                raise SystemExit(f"{d} judged {data['rejudged']} again: give that run's "
                                 f"directory too")
            again[data["rejudged"]] = {(p["seed"], p["load"]): p for p in data["pairs"]}
        elif d.name not in runs:
            raise SystemExit(f"{d}: neither a --save directory (summary.json) nor a --rejudge "
                             f"one (rejudge.json)")
    judged_all: list[Judged] = []
    errs_all: list[float] = []
    quiet_all: list[float] = []
    sets = {}
    for name, d in runs.items():
        newer = again.get(name, {})
        judged = []
        for entry in json.loads((d / "summary.json").read_text(encoding="utf-8"))["per_seed"]:
            for j in entry["judged"]:
                p = newer.get((entry["seed"], j["load"]))
                if p is not None:
                    j = {**j, "pick_rps": p["pick_rps"], "best_rps": p["best_rps"],
                         "interval_90": p["interval_90"]}
                judged.append(Judged.from_saved(j))
        answers = [json.loads(f.read_text(encoding="utf-8"))
                   for f in sorted(d.glob("generated-*/answer*.json"))]
        errs = [e for a in answers for e in errors(a)]
        quiet = [e for a in answers for e in errors(a, quiet_only=True)]
        sets[name] = summary(judged, errs, quiet) | {"rejudged": bool(newer)}
        judged_all += judged
        errs_all += errs
        quiet_all += quiet
        print(f"{name}{' (judged again)' if newer else ''}: {json.dumps(sets[name])}")
    result = {"sets": sets, "all": summary(judged_all, errs_all, quiet_all)}
    print(f"all: {json.dumps(result['all'])}")
    return result
