"""Waits inside a stage's step that take none of its process's CPUs.

In a pinned process whose stages take turns on its CPUs (`launcher.worker.core_turns`), a step
holds its turn to its end. A stage that waits inside a step on something other than those CPUs
(a stand-in for a device, as `launcher.synthetic`'s `device_ms`) wraps the wait in `off_cpu()`:
it then leaves the turns, for this step and every later one, and shares the CPUs with the turn
holder as the kernel decides (a stage that waits and wakes is one the kernel runs promptly; made
to wait for a turn after each wake-up, it would hold up whatever waits on it). Where the thread
holds no turn (unpinned, a profiler or a test calling the stage directly) it does nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

_local = threading.local()


@contextlib.contextmanager
def holding(leave: Callable[[], None]) -> Iterator[None]:
    """The calling thread holds a turn for this block; `off_cpu` calls `leave` to leave it."""
    _local.leave = leave
    try:
        yield
    finally:
        _local.leave = None


@contextlib.contextmanager
def off_cpu() -> Iterator[None]:
    """A wait that takes none of this process's CPUs: the calling stage leaves the turns on
    them, if it takes them."""
    leave = getattr(_local, "leave", None)
    if leave is not None:
        _local.leave = None
        leave()
    yield
