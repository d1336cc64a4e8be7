"""Open-loop arrivals kept on a schedule: each request is written to the network when it is due,
whatever the event loop that reads the responses is busy with. `sendproc` runs this in a process
of its own; this module is the schedule keeping itself, free of any process or thread.

Why apart from the event loop: a loop that both starts requests and parses responses starts a
request late whenever it is in the middle of another's response; a streamed response cost httpx
~4 ms of CPU, which put the lag p99 over 1 ms from a few requests per second on 2 cores. Here
the sender sleeps until each due time, writes the request bytes itself on a connection opened
just ahead, notes the time the write returned (the lag is measured there, so it stays honest: it
includes a connection opened late, a slow write, a late wake-up), and hands the connection on.

Why sleep, then spin: a sleeping thread is woken up to the kernel's timer slack (50 us) and its
scheduling latency late; spinning through the last `SPIN_S` takes the timer out of it, and a
thread that slept almost all the time still wins the CPU at once on a busy machine.

Why real-time priority: when the server keeps every core busy, a normal thread woken from its
sleep waits for the scheduler to give it a core; on a 2-core machine at load average 4 that put
the lag p99 at 2-24 ms, where a thread at the lowest SCHED_FIFO priority, which preempts any
normal thread at once, kept it at 0.2-0.4 ms. The sender asks for it where the OS allows
(Linux, with CAP_SYS_NICE or an RLIMIT_RTPRIO), and runs at normal priority elsewhere; it holds
a core only for a write and a spin per request, and the result records which it got.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from planner.app.bench.http1 import Pool

SPIN_S = 0.0005  # the last stretch before a due time is spun, not slept
PREPARE_S = 0.005  # this long before a request is due, connections for it are opened
MAX_NAP_S = 0.1  # a long sleep wakes this often to notice a stop
PREOPEN_MAX = 8  # at most this many connections are opened ahead at once
REALTIME = True  # ask for real-time priority for the sender (see above)


def realtime() -> bool:
    """Move the calling thread (in a single-threaded process: the process) to the lowest
    real-time priority, SCHED_FIFO 1, if allowed."""
    if not REALTIME or not hasattr(os, "SCHED_FIFO"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))  # 0: this thread (Linux)
    except OSError:
        return False
    return True


@dataclass
class Pacer:
    """Waits until a `clock` time: sleeps until `spin_s` before it, then spins."""

    clock: Callable[[], float] = time.perf_counter
    sleep: Callable[[float], None] = time.sleep
    spin_s: float = SPIN_S
    stop: threading.Event = field(default_factory=threading.Event)

    def wait_until(self, t: float, spin: bool = True) -> bool:
        """False when stopped before `t`. Without `spin`, sleeps all the way (a wake-up a
        little late does not matter)."""
        spin_s = self.spin_s if spin else 0.0
        while (left := t - self.clock()) > spin_s:
            if self.stop.is_set():
                return False
            self.sleep(min(left - spin_s, MAX_NAP_S))
        while self.clock() < t:
            pass
        return not self.stop.is_set()


def keep(schedule: Sequence[float], t_start: float, pacer: Pacer,
         prepare: Callable[[int, int], None], fire: Callable[[int, float], None]) -> None:
    """For each request i, due `schedule[i]` seconds after `t_start` (ascending): `PREPARE_S`
    before it, `prepare(i, n)` with n the requests due from it to `PREPARE_S` after it (a burst
    needs that many connections at once); at its due time, `fire(i, schedule[i])`."""
    for i, due in enumerate(schedule):
        if not pacer.wait_until(t_start + due - PREPARE_S, spin=False):
            return
        burst = 1
        while i + burst < len(schedule) and schedule[i + burst] - due < PREPARE_S:
            burst += 1
        prepare(i, min(burst, PREOPEN_MAX))
        if not pacer.wait_until(t_start + due):
            return
        fire(i, due)


@dataclass(frozen=True)
class Sent:
    """Request `index` was written at `sent` (the clock's time); its response is on `sock`."""

    index: int
    due_s: float
    sent: float
    sock: socket.socket


@dataclass(frozen=True)
class Unsent:
    """Request `index` could not be written: `kind` is connect, disconnect or not-sent."""

    index: int
    due_s: float
    at: float
    kind: str
    message: str


class Sender:
    """Writes each request of an open-loop schedule when it is due, on the calling thread, and
    hands each one on (`Sent` with its connection, or `Unsent` with why)."""

    def __init__(self, schedule: Sequence[float], t_start: float, pool: Pool,
                 request: Callable[[int], bytes], hand_off: Callable[[Sent | Unsent], None],
                 finished: Callable[[], int], max_in_flight: int,
                 pacer: Pacer | None = None) -> None:
        self._schedule, self._t_start, self._pool = schedule, t_start, pool
        self._request, self._hand_off, self._finished = request, hand_off, finished
        self._max_in_flight = max_in_flight
        self._pacer = pacer or Pacer()
        self._sent = 0

    def run(self) -> None:
        """Keep the whole schedule (or until the pacer is stopped)."""
        keep(self._schedule, self._t_start, self._pacer, self._prepare, self._fire)

    def _prepare(self, i: int, burst: int) -> None:
        try:
            self._pool.fill(burst)
        except OSError:
            pass  # the request itself will try again, and say why it failed

    def _fire(self, i: int, due: float) -> None:
        clock = self._pacer.clock
        if self._sent - self._finished() >= self._max_in_flight:
            self._hand_off(Unsent(i, due, clock(), "not-sent", f"not sent: {self._max_in_flight}"
                                  " requests were still in flight"))
            return
        sock = None
        try:
            sock = self._pool.take() or self._pool.connect()
            sock.settimeout(self._pool.connect_timeout_s)  # an idle one is non-blocking
            sock.sendall(self._request(i))
        except OSError as exc:
            kind = "connect" if sock is None else "disconnect"
            if sock is not None:
                sock.close()
            self._hand_off(Unsent(i, due, clock(), kind, f"{type(exc).__name__}: {exc}"))
            return
        sent = clock()
        self._sent += 1
        self._hand_off(Sent(i, due, sent, sock))
