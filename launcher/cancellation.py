"""Cancellation points inside a long step.

A stage that streams is cancelled between two of its outputs (`launcher.worker.stages`); a long step
before its first output (a prefill) would run to its end. Such a stage may `yield None` between
the inner pieces of that step: no output, one more point where the runner may close it. It does
so only where `points_wanted()`: on the launcher's stage threads (and its tensor-parallel
follower ranks, which must step in lock with their leader), never for other callers (a profiler
or a test calling the stage directly gets its outputs alone).
"""

from __future__ import annotations

import threading

_local = threading.local()


def want_points() -> None:
    """This thread consumes `None` cancellation points (it runs stages for the launcher)."""
    _local.wanted = True


def points_wanted() -> bool:
    return getattr(_local, "wanted", False)
