"""What `planner tune` asks its model and what the model answers: a workload (a closed or an
open loop of requests) and the prediction for one placement under it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Workload:
    """Closed loop (`concurrency` clients, each sending its next request when its last one ended)
    or open loop (`rate` requests per second, Poisson arrivals). `requests`: as many as
    `planner bench` (and so `tune --verify`) measures by default, so that a prediction is the
    figure such a run would give (a closed loop's throughput includes the drain at its end)."""

    concurrency: int | None = None
    rate: float | None = None
    requests: int = 96
    warmup: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate is None):
            raise ValueError("a workload has either a concurrency or a rate")

    @property
    def label(self) -> str:
        return f"C={self.concurrency}" if self.concurrency is not None else f"{self.rate:g} req/s"


@dataclass(frozen=True)
class Prediction:
    throughput_rps: float
    latency_p50_ms: float
    latency_p99_ms: float
    ttfa_p90_ms: float | None  # None: the pipeline does not stream
    # (resource, fraction of the time it was busy), busiest first; a core pool counts all cores.
    utilization: tuple[tuple[str, float], ...]
    # The rest of the time to first audio's percentiles (None: the pipeline does not stream; its
    # first audio comes with the whole response), and latency's p90: a rate question's targets.
    ttfa_p50_ms: float | None = None
    ttfa_p99_ms: float | None = None
    latency_p90_ms: float | None = None
    # A closed loop's completions per second while all its clients' requests are in flight (its
    # warm-up, the loop filling and its final drain left out), so that it does not depend on how
    # many requests the run has; None: an open loop. At a concurrency that saturates the plan,
    # its capacity (`planner.tune.capacity`).
    steady_rps: float | None = None

    @property
    def bottleneck(self) -> tuple[str, float]:
        return self.utilization[0] if self.utilization else ("none", 0.0)
