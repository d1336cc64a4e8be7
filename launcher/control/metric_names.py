"""The names of the Prometheus metrics a deployment exposes on /metrics, in one place: the server
renders them (`launcher.control.metrics`) and the bench reads them (`planner.app.bench.measure`). Importing
this module imports nothing else, so the bench client can use it without torch or starlette.

Counters are named without `_total`, as prometheus_client's families want them; the exposed
series (and what a parser reports) is the name plus `_total`.
"""

import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

K = TypeVar("K")
T = TypeVar("T")

STAGE_LATENCY = "stage_planner_stage_latency_seconds"  # histogram, label stage
STAGE_CORE_WAIT = "stage_planner_stage_core_wait_seconds"  # counter, label stage
STAGE_FAILURES = "stage_planner_stage_failures"  # counter, labels stage, process
REQUEST_LATENCY = "stage_planner_request_latency_seconds"  # histogram, label model
REQUESTS = "stage_planner_requests"  # counter, label outcome: ok | error | cancelled
REFUSALS = "stage_planner_requests_refused"  # counter, label reason (launcher.control.admission)
REQUESTS_IN_FLIGHT = "stage_planner_requests_in_flight"  # gauge
QUEUE_DEPTH = "stage_planner_stage_queue_depth"  # gauge, labels stage, process
PROCESS_RSS = "stage_planner_process_rss_bytes"  # gauge, label process
PROCESS_RESTARTS = "stage_planner_process_restarts"  # counter, label process
PROCESS_REPORTS = "stage_planner_process_timing_reports"  # counter, label process
PROCESS_IN_FLIGHT = "stage_planner_process_requests_in_flight"  # gauge, label process
PROCESS_REQUESTS = "stage_planner_process_requests"  # counter, label process
SHM_BLOCKS = "stage_planner_shm_blocks"  # gauge, labels process, state: lent | free
SHM_BYTES = "stage_planner_shm_bytes"  # gauge, label process
CUDA_ALLOCATED = "stage_planner_cuda_allocated_bytes"  # gauge, labels process, gpu


# A worker sends the stage timings it recorded every half second; the report that arrives first
# after a reader looked may have been taken just before, the second was taken after. So once a
# process's PROCESS_REPORTS is two above what it was, every timing it recorded before is counted.
REPORTS_AFTER = 2


def timings_in(first: Mapping[K, float], now: Mapping[K, float]) -> bool:
    """Whether every process's timings from before `first` (each one's report count then) have
    reached the supervisor by `now` (the counts now)."""
    return all(now.get(key, 0) >= n + REPORTS_AFTER for key, n in first.items())


def settled(read: Callable[[], tuple[T, Mapping[K, float]]], timeout_s: float,
            poll_s: float = 0.05) -> T:
    """`read()` (a reading, and each process's report count in it) again and again until every
    stage timing recorded before the call is in the reading (`timings_in`), or for `timeout_s`
    at most (a worker that stopped reporting is not waited for longer); the last reading."""
    _, first = read()
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while True:
        reading, counts = read()
        if timings_in(first, counts) or time.monotonic() >= deadline:
            return reading
        pause.wait(poll_s)


def total(counter: str) -> str:
    """The exposed series of a counter."""
    return f"{counter}_total"
