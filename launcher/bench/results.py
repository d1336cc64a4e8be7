"""The results of a bench run as frozen values, and their JSON form (`results.json`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .compare import Point, pareto_front, ratio
from .loadgen import LoadResult
from .measure import ProcessPeak, StageTime
from .placements import Placement

SCHEMA = "stage-planner-bench/1"


@dataclass(frozen=True)
class Run:
    """One placement served and loaded at one concurrency level."""

    placement: Placement
    concurrency: int
    device: str
    startup_s: float
    processes: tuple[ProcessPeak, ...]
    profile: tuple[StageTime, ...]
    ideal_rps: float | None
    load: LoadResult

    @property
    def key(self) -> str:
        return f"{self.placement.name}@{self.concurrency}"

    @property
    def achieved_over_ideal(self) -> float | None:
        return ratio(self.load.throughput_rps, self.ideal_rps)

    @property
    def p99_s(self) -> float | None:
        latency = self.load.latency
        return latency.p99 if latency else None

    def point(self) -> Point:
        return Point(self.key, self.load.throughput_rps, self.p99_s,
                     self.placement.process_count)


@dataclass(frozen=True)
class Versus:
    """A run against the declared topology's run at the same concurrency."""

    baseline: str
    throughput: float | None  # run / baseline: above 1 is better
    p99: float | None  # run / baseline: below 1 is better
    ttfc_p99: float | None
    peak_rss: float | None


@dataclass(frozen=True)
class Bench:
    settings: dict[str, Any]
    environment: dict[str, Any]
    placements: tuple[Placement, ...]
    runs: tuple[Run, ...]
    notes: tuple[str, ...] = ()

    @property
    def concurrencies(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(r.concurrency for r in self.runs))

    def runs_at(self, concurrency: int) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.concurrency == concurrency)

    def baseline_run(self, concurrency: int) -> Run | None:
        return next((r for r in self.runs_at(concurrency) if r.placement.is_baseline), None)

    def versus(self, run: Run) -> Versus | None:
        base = self.baseline_run(run.concurrency)
        if base is None:
            return None
        ttfc, base_ttfc = run.load.ttfc, base.load.ttfc
        return Versus(
            baseline=base.placement.name,
            throughput=ratio(run.load.throughput_rps, base.load.throughput_rps),
            p99=ratio(run.p99_s, base.p99_s),
            ttfc_p99=ratio(ttfc.p99 if ttfc else None, base_ttfc.p99 if base_ttfc else None),
            peak_rss=ratio(total_rss(run), total_rss(base)))

    def pareto(self) -> frozenset[str]:
        """Run keys on the front of their own concurrency level (placements compete at equal load)."""
        front: set[str] = set()
        for c in self.concurrencies:
            front |= pareto_front([r.point() for r in self.runs_at(c)])
        return frozenset(front)

    def to_dict(self) -> dict[str, Any]:
        front = self.pareto()
        return {
            "schema": SCHEMA,
            **self.environment,
            "settings": self.settings,
            "baseline": next((p.name for p in self.placements if p.is_baseline), None),
            "notes": list(self.notes),
            "placements": [_placement_dict(p) for p in self.placements],
            "runs": [_run_dict(r, self.versus(r), r.key in front) for r in self.runs],
        }


def total_rss(run: Run) -> int | None:
    values = [p.peak_rss_bytes for p in run.processes]
    return None if any(v is None for v in values) else sum(values)  # type: ignore[arg-type]


def _placement_dict(p: Placement) -> dict[str, Any]:
    return {"name": p.name, "flags": list(p.flags), "process_count": p.process_count,
            "groups": [{"name": n, "stages": list(s)} for n, s in p.groups],
            "tp_stages": [{"stage": s, "processes": list(r)} for s, r in p.tp_stages]}


def _summary(s) -> dict[str, Any] | None:
    return s.to_dict() if s is not None else None


def _run_dict(run: Run, versus: Versus | None, on_front: bool) -> dict[str, Any]:
    load = run.load
    return {
        "placement": run.placement.name,
        "concurrency": run.concurrency,
        "device": run.device,
        "startup_s": run.startup_s,
        "process_count": run.placement.process_count,
        "processes": [asdict(p) for p in run.processes],
        "peak_rss_total_bytes": total_rss(run),
        "stage_profile": [asdict(s) for s in run.profile],
        "ideal_rps": run.ideal_rps,
        "achieved_over_ideal": run.achieved_over_ideal,
        "load": {
            "mode": load.mode,
            "concurrency": load.concurrency,
            "stream": load.stream,
            "requests": len(load.samples),
            "ok": len(load.ok),
            "errors": load.errors,
            "error_messages": list(load.error_messages()),
            "wall_s": load.wall_s,
            "throughput_rps": load.throughput_rps,
            "audio_seconds_per_s": load.audio_per_s,
            "latency_s": _summary(load.latency),
            "ttfc_s": _summary(load.ttfc),
            "samples": [asdict(s) for s in load.samples],
        },
        "vs_baseline": asdict(versus) if versus else None,
        "pareto": on_front,
    }
