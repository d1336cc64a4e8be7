"""Admission control: how many requests one deployment takes in before it refuses the rest.

A deployment holds at most `max_queued` requests in flight (submitted, not finished). One more is
refused at once with `Overloaded` (HTTP 429 with `Retry-After`) instead of waiting in a queue whose
wait grows without bound: at 128 concurrent clients on one process the 99th percentile was 33 s.
Every refusal is counted by its reason (`Refusal`) and shown on /metrics.

The default is `QUEUE_PER_PROCESS` requests per worker process of the plan: each process works on
one payload per stage at a time, so more processes drain a longer queue in the same time. Every
stage-level registry the stand-ins keep (prepared requests) is sized from this bound
(`registry_size`), so no stage can drop a request admission let in.
"""

from __future__ import annotations

import threading
from enum import StrEnum

from planner import Plan

QUEUE_PER_PROCESS = 64
# A request that failed before its consumer ran leaves its prepared entry behind; twice the
# admission bound leaves room for those while every admitted request keeps its own.
REGISTRY_FACTOR = 2

class Refusal(StrEnum):
    """Why a request is refused at the door (the label of its count on /metrics)."""

    QUEUE_FULL = "queue_full"  # at max_queued (429)
    RESTARTING = "restarting"  # a process it needs is restarting (503)
    NOT_RUNNING = "not_running"  # starting, draining, stopping or failed (503)



def default_max_queued(plan: Plan) -> int:
    return QUEUE_PER_PROCESS * max(1, plan.process_count())


def registry_size(max_queued: int) -> int:
    """How many prepared requests a stand-in registry must hold for this admission bound."""
    return REGISTRY_FACTOR * max_queued


class Refusals:
    """Requests refused at the door, by reason (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts = dict.fromkeys(Refusal, 0)

    def count(self, reason: Refusal) -> None:
        with self._lock:
            self._counts[reason] += 1

    def snapshot(self) -> dict[Refusal, int]:
        with self._lock:
            return dict(self._counts)
