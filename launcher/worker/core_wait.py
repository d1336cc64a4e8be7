"""A thread's time spent waiting for a core: what a busy machine adds to a stage's wall time
that is neither its own work nor a device's. The worker reports it per stage (so a stage's
latency can be read net of it), and the profiler takes it out of what it measures."""

from __future__ import annotations

import os


class WaitClock:
    """The calling thread's time spent runnable but waiting for a core, in seconds so far (the
    second field of Linux's per-thread schedstat); 0.0 where the kernel does not say. Time a
    thread sleeps (on a device, I/O, the interpreter lock) is not in it: only the wait for a CPU.
    A descriptor kept open on the thread's own file is read (about 2 us), so the lock probe can
    read it at every wake-up; the clock is the thread's that made it."""

    def __init__(self) -> None:
        try:
            self._fd: int | None = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        except OSError:
            self._fd = None
        self.known = self._fd is not None and self() >= 0

    def __call__(self) -> float:
        if self._fd is None:
            return 0.0
        try:
            return int(os.pread(self._fd, 128, 0).split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            return 0.0

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> WaitClock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
