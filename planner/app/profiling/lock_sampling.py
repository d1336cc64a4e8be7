"""Two threads run beside the stages to see how they use the interpreter lock: `LockProbe`
samples what share of a stage's time holds it, `Spinner` makes a stage wait for it each time it
needs it back, which counts its native calls."""

from __future__ import annotations

import statistics
import sys
import threading
import time

from launcher.worker.core_wait import WaitClock


class LockProbe:
    """A thread that wakes every PERIOD and notes whether it got the interpreter lock back at once.

    Its wake-ups fall at random moments of a stage's run; the time between two wake-ups is
    counted as held when the second found the lock held (late by more than a switch interval), and
    the held time over all the time is the share of the stage's time that held it. The time, not
    the count of wake-ups: a blocked one comes late, so while the lock is held the probe wakes
    about half as often, and counting wake-ups found about half a mixed stage's lock time
    (benchmarks/EVIDENCE.md, "The lock probe times what it samples"). Sampling costs the stage
    almost nothing: the probe asks for the lock for microseconds, unlike a busy competitor, which
    would also charge the stage the convoy of retaking the lock after each native call."""

    PERIOD = 0.0002

    def __init__(self) -> None:
        self.blocked_s = 0.0
        self.total_s = 0.0
        self.threshold = float("inf")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        period, clock = self.PERIOD, time.perf_counter
        with WaitClock() as waited:
            last = clock()
            while not self._stop.is_set():
                due, w0 = clock() + period, waited()
                time.sleep(period)
                now = clock()
                # Late for want of a core (a busy machine) is not late for the lock.
                if now - due - (waited() - w0) > self.threshold:
                    self.blocked_s += now - last
                self.total_s += now - last
                last = now

    def snapshot(self) -> tuple[float, float]:
        return self.blocked_s, self.total_s

    def held_ms(self, before: tuple[float, float], after: tuple[float, float],
                wall_ms: float) -> float:
        spanned = after[1] - before[1]
        return wall_ms * (after[0] - before[0]) / spanned if spanned > 0 else 0.0

    def __enter__(self) -> LockProbe:
        self._old_interval = sys.getswitchinterval()
        # The lock changes hands at the probe's resolution, so a blocked wake-up is late by about
        # one switch interval, an unblocked one only by timer slack.
        sys.setswitchinterval(self.PERIOD)
        lateness = []
        with WaitClock() as waited:
            for _ in range(400):
                due, w0 = time.perf_counter() + self.PERIOD, waited()
                time.sleep(self.PERIOD)
                lateness.append(time.perf_counter() - due - (waited() - w0))
        self.threshold = statistics.median(lateness) + self.PERIOD / 2
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        sys.setswitchinterval(self._old_interval)


class Spinner:
    """A thread that runs pure Python flat out beside the stages, as a busy stage does in a worker,
    with a short switch interval. A stage then waits about an interval each time it needs the lock
    back: after each native call (to run the Python that makes the next one; a call or two more may
    slip in while the spinner wakes up) and for half of its own pure-Python time, which it shares
    with the spinner. So (slowdown - lock-holding time) / INTERVAL counts the waits, and its native
    time over that count is the native work per wait: what the model calls a call. The interval is
    short to keep this cheap (a wait per torch op adds up); the count hardly depends on it, since
    what ends a run of calls is the spinner taking the lock back, not the interval's length
    (benchmarks/EVIDENCE.md, "The lock probe times what it samples")."""

    INTERVAL = 0.0005
    # A few short requests: the count is per ms of native work, and a stage of small torch ops
    # waits thousands of times per request, which makes each one slow.
    REQUESTS = 3
    TEXT_CHARS = 20
    SETTLE = 0.05  # the first requests beside a fresh spinner waited less often (2 cores)

    def __init__(self) -> None:
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        x = 0
        while not self._stop:
            for _ in range(200):
                x += 1

    def __enter__(self) -> Spinner:
        self._old_interval = sys.getswitchinterval()
        sys.setswitchinterval(self.INTERVAL)
        self._thread.start()
        time.sleep(self.SETTLE)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop = True
        self._thread.join()
        sys.setswitchinterval(self._old_interval)

    @classmethod
    def call_ms(cls, alone_ms: float, contended_ms: float, gil_ms: float,
                native_ms: float) -> float | None:
        """Native work per call, from a stage's wall time alone and beside the spinner, and its
        lock-holding and native time on the same requests; None without native work."""
        if native_ms <= 0:
            return None
        waits = max(contended_ms - alone_ms - gil_ms, 0.0) / (cls.INTERVAL * 1000.0)
        return native_ms / max(waits, 1.0)  # at least one call: the stage enters it once
