"""Finished benches built by hand, so tables, Markdown and charts are tested without a server."""

from __future__ import annotations

from planner.app.bench.load_results import LoadResult, Sample, Slo
from planner.app.bench.load_shapes import Closed, Open, Shape
from planner.app.bench.measure import ProcessPeak, StageTime
from planner.app.bench.placements import Placement
from planner.app.bench.results import Bench, Run

DECLARED = Placement("declared", (), (("pipeline", ("pre", "engine", "vocoder")),), ())
SPLIT = Placement("isolate vocoder", (), (("pipeline", ("pre", "engine")),
                                          ("vocoder", ("vocoder",))), ())
# What --all-feasible names a placement: its blocks, joined by " | " (a Markdown cell separator).
LONG = Placement("preprocessing+reference_encoder+tts_engine | vocoder", (),
                 (("pipeline", ("pre", "engine")), ("vocoder", ("vocoder",))), ())

ENVIRONMENT = {
    "date": "2026-01-01T00:00:00+00:00", "command": "planner bench -m qwen3-tts",
    "machine": {"hostname": "h", "platform": "Linux", "cpu": "Test CPU", "cpu_count": 2,
                "usable_cpus": 2, "load_average": [0.5, 0.5, 0.5], "memory_bytes": 1 << 33,
                "gpus": []},
    "versions": {"python": "3.11", "torch": "2.0", "ortools": "9.15"},
}


def sample(i: int, latency: float = 0.2, ttfa: float | None = 0.05, audio: float = 2.0,
           error: str | None = None, kind: str | None = None, scheduled: float | None = None,
           stalls: int = 0) -> Sample:
    started = scheduled if scheduled is not None else i * 0.1
    return Sample(index=i, scheduled_s=scheduled, started_s=started, latency_s=latency,
                  ttfa_s=None if error else ttfa, audio_s=0.0 if error else audio,
                  status=None if kind == "connect" else (200 if error is None else 500),
                  error=error, error_kind=kind, stalls=stalls, stall_s=0.01 * stalls)


def run(placement: Placement, shape: Shape, samples: list[Sample], *, wall: float = 2.0,
        stream: bool = True, slo: Slo | None = None, startup: float = 2.5,
        ideal: float | None = 6.0, rss: int = 600 << 20) -> Run:
    return Run(placement=placement, device="cpu", startup_s=startup,
               processes=(ProcessPeak("(supervisor)", 1, (), rss, None),),
               profile=(StageTime("engine", "pipeline", 10, 1.0, 0.1),), ideal_rps=ideal,
               load=LoadResult(shape=shape, stream=stream, wall_s=wall, samples=tuple(samples)),
               slo=slo or Slo())


def bench(runs: list[Run], *, stream: bool = True, placements=None, **settings) -> Bench:
    placements = placements or tuple(dict.fromkeys(r.placement for r in runs))
    base = {"model": "qwen3-tts", "requests": 8, "duration_s": None, "warmup": 1,
            "input_chars": 100, "stream": stream, "seed": 0,
            "load_mode": runs[0].shape.mode if runs else "closed-loop"}
    return Bench(settings={**base, **settings}, environment=ENVIRONMENT,
                 placements=tuple(placements), runs=tuple(runs))


def sweep(placements=(DECLARED, SPLIT), rates=(2.0, 4.0, 8.0), *, stream: bool = True,
          slo: Slo | None = None) -> Bench:
    """An open-loop sweep whose latency grows past 4 req/s while throughput flattens."""
    runs = []
    for n, placement in enumerate(placements):
        for rate in rates:
            latency = 0.15 * (1 + n * 0.1) * max(1.0, rate / 4.0) ** 3
            samples = [sample(i, latency=latency, ttfa=latency / 4, scheduled=i / rate)
                       for i in range(8)]
            runs.append(run(placement, Open(rate), samples, wall=8 / min(rate, 4.0),
                            stream=stream, slo=slo, ideal=4.5 + n, rss=(600 + 2180 * n) << 20))
    return bench(runs, stream=stream, placements=placements)


def closed(placements=(DECLARED, SPLIT), levels=(1,), **kw) -> Bench:
    runs = [run(p, Closed(c), [sample(i, latency=0.2 + 0.01 * n) for i in range(8)], **kw)
            for c in levels for n, p in enumerate(placements)]
    return bench(runs, stream=kw.get("stream", True), placements=placements)


def all_failed(shape: Shape | None = None, stream: bool = True) -> Bench:
    samples = [sample(i, error="HTTP 500: {\"error\": \"RuntimeError: weights file not found\"}",
                      kind="http-500") for i in range(4)]
    return bench([run(DECLARED, shape or Closed(1), samples, stream=stream)], stream=stream)
