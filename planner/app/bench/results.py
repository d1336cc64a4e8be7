"""The results of a bench run as frozen values, and their JSON form (`results.json`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from planner.app.bench.compare import Point, pareto_front, ratio
from planner.app.bench.load_results import LATE_S, LoadResult, Slo
from planner.app.bench.load_shapes import Closed, Shape
from planner.app.bench.measure import ProcessPeak, StageTime
from planner.app.bench.targets import Target, UrlTarget

SCHEMA = "stage-planner-bench/2"


@dataclass(frozen=True)
class Run:
    """One placement served and loaded at one load (a concurrency level or an arrival rate); or a
    `--url` target loaded, whose device, start-up, processes and profile are unknown (None,
    empty)."""

    placement: Target
    device: str | None
    startup_s: float | None
    processes: tuple[ProcessPeak, ...]
    profile: tuple[StageTime, ...]
    ideal_rps: float | None
    load: LoadResult
    slo: Slo = field(default_factory=Slo)
    # with --rounds: each round's throughput, in the order measured (`load` merges them all)
    round_rps: tuple[float, ...] = ()

    @property
    def shape(self) -> Shape:
        return self.load.shape

    @property
    def key(self) -> str:
        return f"{self.placement.name}@{self.shape.label}"

    @property
    def achieved_over_ideal(self) -> float | None:
        return ratio(self.load.throughput_rps, self.ideal_rps)

    @property
    def p99_s(self) -> float | None:
        latency = self.load.latency
        return latency.p99 if latency else None

    @property
    def goodput_rps(self) -> float | None:
        return self.load.goodput_rps(self.slo)

    @property
    def failed_entirely(self) -> bool:
        return bool(self.load.samples) and not self.load.ok

    def point(self) -> Point:
        return Point(self.key, self.load.throughput_rps, self.p99_s,
                     self.placement.process_count)


@dataclass(frozen=True)
class Versus:
    """A run against the declared topology's run at the same load."""

    baseline: str
    throughput: float | None  # run / baseline: above 1 is better
    p99: float | None  # run / baseline: below 1 is better
    ttfa_p99: float | None
    peak_rss: float | None


@dataclass(frozen=True)
class Bench:
    settings: dict[str, Any]
    environment: dict[str, Any]
    placements: tuple[Target, ...]  # the rows: placements served, then --url targets
    runs: tuple[Run, ...]
    notes: tuple[str, ...] = ()

    @property
    def title(self) -> str:
        """What was measured: the model, or the --url targets' names without one."""
        return self.settings.get("model") or ", ".join(p.name for p in self.placements)

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The loads measured, in the order they ran."""
        return tuple(dict.fromkeys(r.shape for r in self.runs))

    @property
    def open_loop(self) -> bool:
        return any(not isinstance(s, Closed) for s in self.shapes)

    @property
    def stream(self) -> bool:
        return bool(self.settings.get("stream"))

    @property
    def slo(self) -> Slo:
        return next((r.slo for r in self.runs), Slo())

    def runs_at(self, shape: Shape) -> tuple[Run, ...]:
        return tuple(r for r in self.runs if r.shape == shape)

    def run_of(self, placement: Target, shape: Shape) -> Run | None:
        return next((r for r in self.runs_at(shape) if r.placement.name == placement.name), None)

    def baseline_run(self, shape: Shape) -> Run | None:
        return next((r for r in self.runs_at(shape) if r.placement.is_baseline), None)

    def versus(self, run: Run) -> Versus | None:
        base = self.baseline_run(run.shape)
        if base is None:
            return None
        ttfa, base_ttfa = run.load.ttfa, base.load.ttfa
        return Versus(
            baseline=base.placement.name,
            throughput=ratio(run.load.throughput_rps, base.load.throughput_rps),
            p99=ratio(run.p99_s, base.p99_s),
            ttfa_p99=ratio(ttfa.p99 if ttfa else None, base_ttfa.p99 if base_ttfa else None),
            peak_rss=ratio(total_rss(run), total_rss(base)))

    def pareto(self) -> frozenset[str]:
        """Run keys on the front of their own load (placements compete at equal load)."""
        front: set[str] = set()
        for shape in self.shapes:
            front |= pareto_front([r.point() for r in self.runs_at(shape)])
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
    """Peak resident memory of every process of the run; None where one is unknown, or where
    bench knows none (a --url target)."""
    values = [p.peak_rss_bytes for p in run.processes]
    if not values or any(v is None for v in values):
        return None
    return sum(values)  # type: ignore[arg-type]


def _placement_dict(p: Target) -> dict[str, Any]:
    if isinstance(p, UrlTarget):
        return {**p.to_dict(), "process_count": None, "started_by_bench": False}
    return {"name": p.name, "flags": list(p.flags), "process_count": p.process_count,
            "groups": [{"name": n, "stages": list(s)} for n, s in p.groups],
            "tp_stages": [{"stage": s, "processes": list(r)} for s, r in p.tp_stages]}


def _summary(s) -> dict[str, Any] | None:
    return s.to_dict() if s is not None else None


def _load_dict(load: LoadResult, slo: Slo) -> dict[str, Any]:
    shape = load.shape
    return {
        "mode": load.mode,
        "concurrency": shape.concurrency if isinstance(shape, Closed) else None,
        "rate": None if isinstance(shape, Closed) else shape.rate,
        "arrivals": None if isinstance(shape, Closed) else shape.arrivals,
        "burstiness": None if isinstance(shape, Closed) else shape.burstiness,
        "stream": load.stream,
        "requests": len(load.samples),
        "ok": len(load.ok),
        "errors": load.errors,
        "errors_by_kind": load.errors_by_kind(),
        "error_messages": list(load.error_messages()),
        "wall_s": load.wall_s,
        "cpu_stolen_of_running": load.stolen_of_running,
        "offered_rps": load.offered_rps,
        "throughput_rps": load.throughput_rps,
        "goodput_rps": load.goodput_rps(slo),
        "slo_attainment": load.slo_attainment(slo),
        "audio_seconds_per_s": load.audio_per_s,
        "latency_s": _summary(load.latency),
        "ttfa_s": _summary(load.ttfa),
        "rtf": _summary(load.rtf),
        "stream_continuity": None if not load.stream else {
            "stalled_share": load.stalled_share,
            "stalls": sum(s.stalls for s in load.ok),
            "stall_s": _summary(load.stall),
        },
        "schedule": None if isinstance(shape, Closed) else {
            "lag_s": _summary(load.lag),
            "late": load.late,
            "late_after_s": LATE_S,
            "not_sent": load.not_sent,
            "sender_realtime": load.sender_realtime,
        },
        "samples": [{**asdict(s), "lag_s": s.lag_s, "rtf": s.rtf} for s in load.samples],
    }


def _run_dict(run: Run, versus: Versus | None, on_front: bool) -> dict[str, Any]:
    return {
        "placement": run.placement.name,
        "label": run.shape.label,
        "device": run.device,
        "startup_s": run.startup_s,
        "process_count": run.placement.process_count,
        "processes": [asdict(p) for p in run.processes],
        "peak_rss_total_bytes": total_rss(run),
        "stage_profile": [asdict(s) for s in run.profile],
        "ideal_rps": run.ideal_rps,
        "achieved_over_ideal": run.achieved_over_ideal,
        "load": _load_dict(run.load, run.slo),
        "round_throughput_rps": list(run.round_rps) or None,
        "vs_baseline": asdict(versus) if versus else None,
        "pareto": on_front,
    }
