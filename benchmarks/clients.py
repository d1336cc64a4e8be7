"""Closed-loop clients as the benchmarks drive them: threads of the benchmark's own process, all
started before the clock's first reading is compared with its last."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def run_clients(client: Callable[[], None], count: int) -> float:
    """`client` in `count` threads started together; the seconds until the last one returned."""
    threads = [threading.Thread(target=client) for _ in range(count)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - start
