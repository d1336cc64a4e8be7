"""When a dead unit is restarted, and when the deployment gives up. Pure: no processes, no threads,
time from an injectable clock.

Rules (documented for operators): a unit that died is restarted after a backoff of `base_s`
(0.5 s), doubling with each restart inside the window, capped at `cap_s` (8 s). More than
`max_restarts` (3) restarts of one unit within `window_s` (60 s) shut the whole deployment down.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

RESTART_WINDOW_S = 60.0
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0


class RestartPolicy:
    def __init__(self, max_restarts: int = 3, *, window_s: float = RESTART_WINDOW_S,
                 base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_restarts, self.window_s = max_restarts, window_s
        self.base_s, self.cap_s, self.clock = base_s, cap_s, clock
        self._log: dict[str, deque[float]] = {}  # unit -> times of its restarts in the window
        self._due: dict[str, float] = {}  # unit -> when to start it again

    def died(self, unit: str) -> float | None:
        """Record a death of `unit`: the delay before restarting it, or None to give up."""
        now = self.clock()
        log = self._log.setdefault(unit, deque())
        while log and now - log[0] > self.window_s:
            log.popleft()
        if len(log) >= self.max_restarts:
            self._due.pop(unit, None)
            return None
        log.append(now)
        delay = min(self.cap_s, self.base_s * 2 ** (len(log) - 1))
        self._due[unit] = now + delay
        return delay

    def due(self) -> list[str]:
        """Units whose backoff is over, in the order they died; each is returned once."""
        now = self.clock()
        ready = [u for u, t in self._due.items() if t <= now]
        for unit in ready:
            del self._due[unit]
        return ready

    def wait_s(self) -> float:
        """Seconds until the next scheduled restart; 0 when none is scheduled."""
        if not self._due:
            return 0.0
        return max(0.0, min(self._due.values()) - self.clock())

    def limit_text(self) -> str:
        return f"more than {self.max_restarts} restarts in {self.window_s:g} s"
