"""The order of runs: for each load (a concurrency level or an arrival rate), every placement
back to back, each in a fresh server, so a placement never inherits another's warm caches or
memory high-water marks, and drift on a shared machine spreads over all placements alike. A
`--url` target takes its turn among them, warmed up and loaded the same way; it is running
already, so nothing is started, stopped or read from its metrics."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import httpx

import planner

from planner.app.bench import rounds
from planner.app.bench.load_results import LoadResult, Sample, Slo
from planner.app.bench.load_shapes import Closed, Load, Shape
from planner.app.bench.loadgen import run_load
from planner.app.bench.measure import (
    GpuSampler,
    process_peaks,
    settled_metrics,
    stage_profile,
)
from planner.app.bench.placements import Placement
from planner.app.bench.results import Run
from planner.app.bench.server import Server, ServerSpec
from planner.app.bench.speech import OURS, Speech
from planner.app.bench.targets import Target, UrlTarget
from planner.app.bench.texts import request_texts, warmup_texts
from planner.app.cpu_steal import running_ticks, ticks_between

DURATION_TEXT_POOL = 512  # distinct texts cycled through by --duration runs


@dataclass(frozen=True)
class Settings:
    model_path: str | None
    config: str | None
    variant: str | None
    device: str
    stand_in_size: str | None
    loads: tuple[Shape, ...]  # concurrency levels (closed loop) or arrival rates (open loop)
    requests: int | None  # per placement and load; None with duration_s
    duration_s: float | None
    warmup: int
    input_chars: int
    stream: bool
    seed: int
    slo: Slo = field(default_factory=Slo)
    rounds: int = 1  # interleaved rounds per load (see `rounds`)

    def server_spec(self, placement: Placement) -> ServerSpec:
        return ServerSpec(model_path=self.model_path, config=self.config, variant=self.variant,
                          requests=tuple(planner.request_dict(r) for r in placement.requests),
                          device=self.device,
                          stand_in_size=self.stand_in_size)


class Progress(Protocol):
    def begin(self, label: str, total: int | None) -> None: ...
    def phase(self, text: str) -> None: ...
    def done(self, sample: Sample) -> None: ...
    def end(self, summary: str) -> None: ...


def _warm_up(url: str, speech: Speech, settings: Settings, shape: Shape,
             warm: tuple[str, ...], progress: Progress) -> None:
    if warm:
        progress.phase("warming up")
        # Open loop warms up one request at a time: arrivals would start the measured
        # schedule's queue before it begins.
        warm_shape = shape if isinstance(shape, Closed) else Closed(1)
        run_load(url, Load(warm_shape, warm, len(warm), None, settings.stream, speech=speech))


def _load(url: str, speech: Speech, settings: Settings, shape: Shape, texts: tuple[str, ...],
          progress: Progress) -> LoadResult:
    progress.phase(f"load ({'streaming' if settings.stream else 'whole responses'})")
    ticks = running_ticks()
    load = run_load(url, Load(shape, texts, settings.requests, settings.duration_s,
                              settings.stream, settings.seed, speech), progress.done)
    return replace(load, cpu_ticks=ticks_between(ticks, running_ticks()))


def run_url(settings: Settings, target: UrlTarget, shape: Shape, texts: tuple[str, ...],
            warm: tuple[str, ...], progress: Progress) -> Run:
    """A running server, warmed up and loaded as a served placement is; what only a server
    bench started could tell (start time, processes, memory, stage profile) stays unknown."""
    _warm_up(target.base, target.speech, settings, shape, warm, progress)
    load = _load(target.base, target.speech, settings, shape, texts, progress)
    return Run(placement=target, device=None, startup_s=None, processes=(), profile=(),
               ideal_rps=None, load=load, slo=settings.slo)


def run_one(settings: Settings, placement: Placement, shape: Shape,
            texts: tuple[str, ...], warm: tuple[str, ...], progress: Progress) -> Run:
    with Server(settings.server_spec(placement)) as server:
        progress.phase("starting")
        started = server.start()
        url = started.url
        device = httpx.get(f"{url}/health", timeout=10).json()["device"]
        _warm_up(url, OURS, settings, shape, warm, progress)
        before = settled_metrics(url)
        sampler = GpuSampler(url) if device == "cuda" else None
        with sampler or contextlib.nullcontext():
            load = _load(url, OURS, settings, shape, texts, progress)
        progress.phase("collecting metrics")
        after = settled_metrics(url)
        health = httpx.get(f"{url}/health", timeout=10).json()
        peaks = process_peaks(health, started.pid, sampler.peaks if sampler else {})
        progress.phase("stopping")
    where = {s: name for name, stages in placement.groups for s in stages}
    where.update({s: ranks[0] for s, ranks in placement.tp_stages})
    profile = stage_profile(before, after, where)
    ideal = placement.ideal_rps({s.stage: s.per_request_s for s in profile})
    return Run(placement=placement, device=device, startup_s=started.startup_s, processes=peaks,
               profile=profile, ideal_rps=ideal, load=load, slo=settings.slo)


def run_all(settings: Settings, placements: Sequence[Target], progress: Progress
            ) -> tuple[Run, ...]:
    count = settings.requests or DURATION_TEXT_POOL
    texts = request_texts(settings.seed, count, settings.input_chars)
    warm = warmup_texts(settings.seed, settings.warmup, settings.input_chars)
    runs = []
    for shape in settings.loads:
        parts: dict[str, list[Run]] = {p.name: [] for p in placements}
        for r, (start, n) in enumerate(_shares(settings)):
            # Each round's own texts (all of them over the rounds, each once) and, open loop, its
            # own arrival schedule.
            part = replace(settings, requests=n if settings.requests else None,
                           duration_s=settings.duration_s and settings.duration_s
                           / settings.rounds, seed=settings.seed + r)
            mine = texts[start:start + n] if settings.requests else texts
            of = f" · round {r + 1}/{settings.rounds}" if settings.rounds > 1 else ""
            for placement in placements:
                progress.begin(f"{placement.name} · {shape.label}{of}", part.requests)
                measure = run_url if isinstance(placement, UrlTarget) else run_one
                run = measure(part, placement, shape, mine, warm, progress)
                run = replace(run, load=_texts_from(run.load, start))
                parts[placement.name].append(run)
                lag = run.load.lag
                behind = "" if lag is None else f", schedule lag p99 {lag.p99 * 1000:.2f} ms"
                progress.end(f"{run.load.throughput_rps:.2f} req/s, "
                             f"p99 {_ms(run.p99_s)}, {run.load.errors} errors{behind}")
        runs += [rounds.merge(parts[p.name]) for p in placements]
    return tuple(runs)


def _shares(settings: Settings) -> list[tuple[int, int]]:
    """Each round's (first text, request count); with --duration every round cycles through
    the whole text pool."""
    if settings.requests:
        return rounds.split(settings.requests, settings.rounds)
    return [(0, DURATION_TEXT_POOL)] * settings.rounds


def _texts_from(load: LoadResult, start: int) -> LoadResult:
    """A round's samples numbered by the text each sent, not by its place in the round."""
    if not start:
        return load
    return replace(load, samples=tuple(replace(s, index=s.index + start) for s in load.samples))


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms"
