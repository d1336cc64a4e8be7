"""Prometheus exposition of a deployment, with prometheus_client.

The supervisor keeps the numbers (`Histogram` accumulators fed by the workers' timing reports,
and a `Sample` of everything else, taken when /metrics is scraped); `render` only turns a sample
into the text format. Metric names live in `metric_names`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.utils import floatToGoString

from launcher.control import metric_names as M
from launcher.wire.ipc import PoolUsage

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    """Bucket counts (not cumulative; the last one is +Inf), sum and count of observations."""

    buckets: tuple[float, ...] = LATENCY_BUCKETS
    counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    total: float = 0.0
    n: int = 0

    def observe(self, value: float) -> None:
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1
                break
        else:
            self.counts[-1] += 1
        self.total += value
        self.n += 1

    def observe_all(self, values: Iterable[float]) -> None:
        for value in values:
            self.observe(value)

    def copy(self) -> Histogram:
        return Histogram(self.buckets, list(self.counts), self.total, self.n)

    def cumulative(self) -> list[tuple[str, int]]:
        out, running = [], 0
        for bound, count in zip((*self.buckets, float("inf")), self.counts):
            running += count
            out.append((floatToGoString(bound), running))
        return out


@dataclass(frozen=True)
class ProcessSample:
    name: str
    pid: int | None  # None while the process is not running
    gpu: int | None
    restarts: int
    depths: Mapping[str, int]  # stage -> payloads waiting
    shm: PoolUsage
    cuda_allocated: int | None
    reports: int = 0  # timing reports received from it (launcher.control.procs.Proc.reports)
    in_flight: int | None = None  # requests bound to it, not finished (None: not counted)
    served: int | None = None  # requests ever bound to it (a copy: those chosen for it)


@dataclass(frozen=True)
class Sample:
    model: str
    stage_latency: Mapping[str, Histogram]  # every stage of the plan, in pipeline order
    request_latency: Histogram
    outcomes: Mapping[str, int]
    in_flight: int
    processes: tuple[ProcessSample, ...]
    refusals: Mapping[str, int] = field(default_factory=dict)  # reason -> requests refused
    # stage -> seconds its thread waited for a core within its invocations (in stage_latency)
    stage_core_wait_s: Mapping[str, float] = field(default_factory=dict)
    # (stage, process) -> requests it failed by raising (or by not taking them in)
    stage_failures: Mapping[tuple[str, str], int] = field(default_factory=dict)


def render(sample: Sample, accept: str | None = None) -> tuple[str, str]:
    """(exposition, its content type), in the format `accept` (an HTTP Accept header) asks for:
    Prometheus text by default, OpenMetrics when asked."""
    return render_all([sample], accept)


def render_all(samples: list[Sample], accept: str | None = None) -> tuple[str, str]:
    """`render` for the replicas of one front door: with more than one, every series has a
    `replica` label (its index)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(samples))
    encode, content_type = choose_encoder(accept or "")
    return encode(registry).decode("utf-8"), content_type


class _Collector:
    def __init__(self, samples: list[Sample]) -> None:
        self.samples = samples

    def collect(self) -> Iterator:
        many = len(self.samples) > 1
        extra = ["replica"] if many else []
        stage = HistogramMetricFamily(M.STAGE_LATENCY, "Time a stage spent on one invocation.",
                                      labels=["stage", *extra])
        request = HistogramMetricFamily(M.REQUEST_LATENCY, "Submit to last audio chunk.",
                                        labels=["model", *extra])
        outcomes = CounterMetricFamily(M.REQUESTS, "Finished requests by outcome.",
                                       labels=["outcome", *extra])
        refused = CounterMetricFamily(M.REFUSALS, "Requests refused at the door, by reason "
                                      "(queue_full: 429; restarting, not_running: 503).",
                                      labels=["reason", *extra])
        core_wait = CounterMetricFamily(
            M.STAGE_CORE_WAIT, "Time a stage's thread waited for a CPU core within its "
            "invocations (part of stage_latency; high: more busy threads than cores, or a pinned "
            "process's stages waiting for their turns on its CPUs).",
            labels=["stage", *extra])
        failures = CounterMetricFamily(
            M.STAGE_FAILURES, "Requests a stage failed by raising (its worker logged the "
            "traceback), by stage and the process it ran in.",
            labels=["stage", "process", *extra])
        in_flight = GaugeMetricFamily(M.REQUESTS_IN_FLIGHT, "Requests submitted, not finished.",
                                      labels=extra)
        depth = GaugeMetricFamily(M.QUEUE_DEPTH, "Payloads waiting in a stage's inbox.",
                                  labels=["stage", "process", *extra])
        rss = GaugeMetricFamily(M.PROCESS_RSS, "Resident memory of a worker process.",
                                labels=["process", *extra])
        restarts = CounterMetricFamily(M.PROCESS_RESTARTS, "Restarts of a worker process.",
                                       labels=["process", *extra])
        reports = CounterMetricFamily(
            M.PROCESS_REPORTS, "Stage-timing reports received from a worker process (one every "
            "half second): two more than when you looked, and every timing before is counted.",
            labels=["process", *extra])
        blocks = GaugeMetricFamily(M.SHM_BLOCKS, "Shared-memory blocks a process sends from, by "
                                   "state (lent: a reader still views it).",
                                   labels=["process", "state", *extra])
        size = GaugeMetricFamily(M.SHM_BYTES, "Size of a process's shared-memory blocks.",
                                 labels=["process", *extra])
        bound = GaugeMetricFamily(
            M.PROCESS_IN_FLIGHT, "Requests bound to a worker process (a copy of its group), not "
            "finished.", labels=["process", *extra])
        served = CounterMetricFamily(
            M.PROCESS_REQUESTS, "Requests bound to a worker process: of a group run in several "
            "copies, those chosen for this copy; otherwise every request.",
            labels=["process", *extra])
        cuda = GaugeMetricFamily(M.CUDA_ALLOCATED, "torch.cuda.memory_allocated of a worker.",
                                 labels=["process", "gpu", *extra])
        for i, s in enumerate(self.samples):
            r = [str(i)] if many else []
            for name, hist in s.stage_latency.items():
                stage.add_metric([name, *r], hist.cumulative(), hist.total)
            request.add_metric([s.model, *r], s.request_latency.cumulative(),
                               s.request_latency.total)
            for name, seconds in s.stage_core_wait_s.items():
                core_wait.add_metric([name, *r], seconds)
            for (name, process), n in s.stage_failures.items():
                failures.add_metric([name, process, *r], n)
            for outcome, n in s.outcomes.items():
                outcomes.add_metric([outcome, *r], n)
            for reason, n in s.refusals.items():
                refused.add_metric([reason, *r], n)
            in_flight.add_metric(r, s.in_flight)
            for p in s.processes:
                for name, n in p.depths.items():
                    depth.add_metric([name, p.name, *r], n)
                if (resident := rss_bytes(p.pid)) is not None:
                    rss.add_metric([p.name, *r], resident)
                restarts.add_metric([p.name, *r], p.restarts)
                reports.add_metric([p.name, *r], p.reports)
                if p.served is not None:
                    bound.add_metric([p.name, *r], p.in_flight or 0)
                    served.add_metric([p.name, *r], p.served)
                blocks.add_metric([p.name, "lent", *r], p.shm.lent)
                blocks.add_metric([p.name, "free", *r], p.shm.free)
                size.add_metric([p.name, *r], p.shm.bytes)
                if p.cuda_allocated is not None:
                    cuda.add_metric([p.name, str(p.gpu), *r], p.cuda_allocated)
        yield from (stage, core_wait, failures, request, outcomes, refused, in_flight, depth, rss,
                    restarts, reports, bound, served, blocks, size)
        if cuda.samples:
            yield cuda


def rss_bytes(pid: int | None) -> int | None:
    """Resident set size from /proc (Linux); None where that is not available."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
