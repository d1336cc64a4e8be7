"""The load: closed-loop clients or open-loop arrivals, over HTTP, and what each request saw.

Two shapes of load:
- **closed loop** (`Closed(C)`): C clients, each sending its next request when its last one ended.
  The server never sees more than C requests, so queueing is bounded by C: this measures
  throughput at saturation and the latency that comes with it.
- **open loop** (`Open(rate)`): requests arrive on a seeded schedule (Poisson, gamma with a
  burstiness, or evenly spaced) whatever the server does, as real users do; past the server's
  capacity the queue, and so the latency, grows with the offered load, which shows the knee.

The open-loop generator keeps its own books: each request records when it was due and when it
was sent (`lag_s`), a request sent `LATE_S` or more after it was due counts as late, and one that
found `MAX_IN_FLIGHT` requests outstanding is not sent at all and counts as an error of kind
`not-sent`. So the generator can fall behind its schedule, but never silently.

Per request: end-to-end latency (send to last byte), time to first audio (streaming), the audio's
duration and real-time factor (latency / audio duration), and for streams their continuity: a
player that starts with the first byte stalls when the next bytes arrive after the audio already
delivered has played out (`Playback`).
"""

from __future__ import annotations

import asyncio
import ctypes
import gc
import os
import random
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import httpx

from .stats import Summary, summarise

CLOSED, OPEN = "closed-loop", "open-loop"
ARRIVALS = ("poisson", "gamma", "constant")
REQUEST_TIMEOUT_S = 300.0
BYTES_PER_SAMPLE = 2  # response_format pcm: 16-bit mono
DEFAULT_SAMPLE_RATE = 24_000
LATE_S = 0.001  # sent this long after it was due: a late request
MAX_IN_FLIGHT = 1024  # open loop: a request due while this many are outstanding is not sent
USE_TIMERFD = True  # Linux: a timerfd wakes the event loop when a request is due
SWITCH_INTERVAL_S = 0.0002  # the interpreter lock's hand-over interval while a load runs


@dataclass(frozen=True)
class Closed:
    """C clients, each sending its next request when its last one ended."""

    concurrency: int
    mode = CLOSED

    @property
    def label(self) -> str:
        return f"C={self.concurrency}"

    @property
    def x(self) -> float:
        """Where this load sits on a chart's horizontal axis."""
        return float(self.concurrency)


@dataclass(frozen=True)
class Open:
    """Requests arriving at `rate` per second on a seeded schedule, whatever the server does.

    `gamma` gaps have shape `burstiness` and mean 1/rate: below 1 burstier than Poisson (which
    is burstiness 1), above 1 more regular; `constant` spaces them exactly 1/rate apart.
    """

    rate: float
    arrivals: str = "poisson"
    burstiness: float = 1.0
    mode = OPEN

    @property
    def label(self) -> str:
        return f"{self.rate:g}/s"

    @property
    def x(self) -> float:
        return self.rate


Shape = Closed | Open


def arrival_times(shape: Open, seed: int, count: int | None = None,
                  duration_s: float | None = None) -> tuple[float, ...]:
    """When each request is due, in seconds from the start: `count` requests, or as many as the
    rate offers in `duration_s` (round(rate x duration), at least one). The first is due at 0;
    the same seed gives the same schedule.

    The gaps are drawn from the arrival distribution, then scaled together so the schedule
    spans exactly (n - 1) / rate: it offers exactly the rate asked for, so a short sweep's
    points sit at the rates they are labelled with. For Poisson arrivals this is a Poisson
    process conditioned on its span (its arrival times are then uniform order statistics);
    for gamma the gaps keep their burstiness (Dirichlet-distributed shares of the span).
    """
    if (count is None) == (duration_s is None):
        raise ValueError("give exactly one of count and duration_s")
    if not (shape.rate > 0 and shape.burstiness > 0):
        raise ValueError("rate and burstiness must be positive")
    if shape.arrivals not in ARRIVALS:
        raise ValueError(f"arrivals must be one of {', '.join(ARRIVALS)}, not {shape.arrivals!r}")
    n = count if count is not None else max(1, round(shape.rate * duration_s))  # type: ignore
    rng = random.Random(f"stage-planner-bench-arrivals:{seed}:{shape.arrivals}:"
                        f"{shape.rate!r}:{shape.burstiness!r}")
    if shape.arrivals == "poisson":
        gaps = [rng.expovariate(1.0) for _ in range(n - 1)]
    elif shape.arrivals == "gamma":
        gaps = [rng.gammavariate(shape.burstiness, 1.0) for _ in range(n - 1)]
    else:
        gaps = [1.0] * (n - 1)
    scale = (n - 1) / shape.rate / sum(gaps) if gaps else 0.0
    out, t = [0.0], 0.0
    for g in gaps:
        t += g * scale
        out.append(t)
    return tuple(out)


class Playback:
    """A player fed by a stream: it starts with the first audio and plays in real time; a stall
    is bytes arriving after everything delivered before them has played out."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.stalls = 0
        self.stall_s = 0.0
        self._ends: float | None = None  # when the audio delivered so far has played out

    def feed(self, now: float, seconds: float) -> None:
        if self._ends is None:
            self.first, self._ends = now, now + seconds
        elif now > self._ends:
            self.stalls += 1
            self.stall_s += now - self._ends
            self._ends = now + seconds
        else:
            self._ends += seconds


@dataclass(frozen=True)
class Sample:
    index: int  # which request text
    scheduled_s: float | None  # open loop: when it was due, since the start of the load
    started_s: float  # when it was sent, since the start of the load
    latency_s: float  # send to last byte
    ttfa_s: float | None  # send to first audio byte; streaming only
    audio_s: float
    status: int | None  # None when no HTTP response came back
    error: str | None
    error_kind: str | None = None  # e.g. http-503, timeout, connect, disconnect, not-sent
    stalls: int = 0  # streaming: times a player would have run dry (see Playback)
    stall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def lag_s(self) -> float | None:
        """How long after it was due the request was sent (open loop)."""
        return None if self.scheduled_s is None else self.started_s - self.scheduled_s

    @property
    def late(self) -> bool:
        return self.lag_s is not None and self.lag_s >= LATE_S

    @property
    def rtf(self) -> float | None:
        """Real-time factor: generation time over the duration of the audio (below 1 is faster
        than real time)."""
        return self.latency_s / self.audio_s if self.ok and self.audio_s > 0 else None


@dataclass(frozen=True)
class Slo:
    """Per-request objectives; a request meets them when it succeeded within every one given."""

    ttfa_s: float | None = None
    latency_s: float | None = None

    def __bool__(self) -> bool:
        return self.ttfa_s is not None or self.latency_s is not None

    def met(self, s: Sample) -> bool:
        if not s.ok:
            return False
        if self.latency_s is not None and s.latency_s > self.latency_s:
            return False
        return self.ttfa_s is None or (s.ttfa_s is not None and s.ttfa_s <= self.ttfa_s)


@dataclass(frozen=True)
class Load:
    """What one load run asks for: `requests` total, or as many as fit in `duration_s`."""

    shape: Shape
    texts: tuple[str, ...]  # request i sends texts[i % len(texts)]
    requests: int | None
    duration_s: float | None
    stream: bool
    seed: int = 0  # of the open-loop arrival schedule


@dataclass(frozen=True)
class LoadResult:
    shape: Shape
    stream: bool
    wall_s: float  # start of the load to the last response
    samples: tuple[Sample, ...]

    @property
    def mode(self) -> str:
        return self.shape.mode

    @property
    def ok(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.ok)

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok)

    def errors_by_kind(self) -> dict[str, int]:
        return dict(Counter(s.error_kind or "other" for s in self.samples if not s.ok)
                    .most_common())

    def error_messages(self, limit: int = 5) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.error for s in self.samples if s.error))[:limit]

    def _per_s(self, amount: float) -> float:
        return amount / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def throughput_rps(self) -> float:
        return self._per_s(len(self.ok))

    @property
    def audio_per_s(self) -> float:
        """Seconds of audio generated per wall-clock second."""
        return self._per_s(sum(s.audio_s for s in self.ok))

    def goodput_rps(self, slo: Slo) -> float | None:
        """Requests per second that met every objective of `slo`; None without objectives."""
        return self._per_s(sum(slo.met(s) for s in self.samples)) if slo else None

    def slo_attainment(self, slo: Slo) -> float | None:
        """The share of sent requests that met `slo`."""
        if not slo or not self.samples:
            return None
        return sum(slo.met(s) for s in self.samples) / len(self.samples)

    @property
    def offered_rps(self) -> float | None:
        """Open loop: the rate the schedule actually offered (a random schedule drifts from the
        nominal rate over few requests)."""
        due = [s.scheduled_s for s in self.samples if s.scheduled_s is not None]
        span = max(due, default=0.0) - min(due, default=0.0)
        return (len(due) - 1) / span if len(due) > 1 and span > 0 else None

    @property
    def latency(self) -> Summary | None:
        return summarise([s.latency_s for s in self.ok])

    @property
    def ttfa(self) -> Summary | None:
        return summarise([s.ttfa_s for s in self.ok if s.ttfa_s is not None])

    @property
    def rtf(self) -> Summary | None:
        return summarise([s.rtf for s in self.ok if s.rtf is not None])

    @property
    def lag(self) -> Summary | None:
        """Open loop: how far behind its schedule the generator sent requests."""
        return summarise([s.lag_s for s in self.samples
                          if s.lag_s is not None and s.error_kind != "not-sent"])

    @property
    def late(self) -> int:
        return sum(s.late for s in self.samples)

    @property
    def not_sent(self) -> int:
        return sum(s.error_kind == "not-sent" for s in self.samples)

    @property
    def stalled_share(self) -> float | None:
        """Streaming: the share of successful requests whose playback stalled at least once."""
        ok = self.ok
        return sum(s.stalls > 0 for s in ok) / len(ok) if self.stream and ok else None

    @property
    def stall(self) -> Summary | None:
        """Streaming: total stall time per successful request."""
        return summarise([s.stall_s for s in self.ok]) if self.stream else None


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _error_kind(exc: Exception) -> str:
    match exc:
        case _HttpError():
            return f"http-{exc.status}"
        case httpx.TimeoutException():
            return "timeout"
        case httpx.ConnectError():
            return "connect"
        case httpx.RemoteProtocolError() | httpx.ReadError() | httpx.WriteError():
            return "disconnect"
        case _:
            return type(exc).__name__


async def _one(client: httpx.AsyncClient, url: str, text: str, stream: bool, index: int,
               t_load: float, scheduled: float | None) -> Sample:
    body = {"model": "tts-1", "input": text, "voice": "default", "response_format": "pcm",
            "stream": stream}
    t0 = time.perf_counter()
    play = Playback()
    received, status, rate = 0, None, DEFAULT_SAMPLE_RATE
    error = kind = None
    try:
        async with client.stream("POST", f"{url}/v1/audio/speech", json=body) as r:
            status = r.status_code
            if status != 200:
                message = (await r.aread()).decode(errors="replace")[:200]
                raise _HttpError(status, f"HTTP {status}: {message}")
            rate = int(r.headers.get("x-sample-rate", rate))
            async for part in r.aiter_raw():
                if part:
                    play.feed(time.perf_counter(), len(part) / BYTES_PER_SAMPLE / rate)
                    received += len(part)
        if not received:
            error, kind = "empty audio", "empty-audio"
    except (_HttpError, httpx.HTTPError) as exc:
        error = str(exc) if isinstance(exc, _HttpError) else f"{type(exc).__name__}: {exc}"
        kind = _error_kind(exc)
    end = time.perf_counter()
    return Sample(index=index, scheduled_s=scheduled, started_s=t0 - t_load,
                  latency_s=end - t0,
                  ttfa_s=(play.first - t0) if stream and play.first is not None else None,
                  audio_s=received / BYTES_PER_SAMPLE / rate, status=status, error=error,
                  error_kind=kind, stalls=play.stalls if stream else 0,
                  stall_s=play.stall_s if stream else 0.0)


async def _closed(client: httpx.AsyncClient, url: str, load: Load, shape: Closed,
                  t_load: float, record: Callable[[Sample], None]) -> None:
    next_index = 0
    deadline = None if load.duration_s is None else t_load + load.duration_s

    def take() -> int | None:
        nonlocal next_index
        if load.requests is not None and next_index >= load.requests:
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        next_index += 1
        return next_index - 1

    async def user() -> None:
        while (i := take()) is not None:
            record(await _one(client, url, load.texts[i % len(load.texts)], load.stream, i,
                              t_load, None))

    await asyncio.gather(*(user() for _ in range(shape.concurrency)))


class _TimerFd:
    """A Linux timerfd: a file descriptor that becomes readable at an absolute CLOCK_MONOTONIC
    time, to nanosecond resolution. The event loop waits on it like on a socket, so a due
    request wakes the loop itself, at once (its own timers round up to the next millisecond)."""

    _CLOCK_MONOTONIC, _TFD_TIMER_ABSTIME = 1, 1
    _TFD_NONBLOCK_CLOEXEC = os.O_NONBLOCK | os.O_CLOEXEC

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self._settime = libc.timerfd_settime
        self.fd = libc.timerfd_create(self._CLOCK_MONOTONIC, self._TFD_NONBLOCK_CLOEXEC)
        if self.fd < 0:
            raise OSError(ctypes.get_errno(), "timerfd_create failed")

    def arm(self, monotonic: float) -> None:
        sec = max(0, int(monotonic))
        nsec = max(1, int((monotonic - sec) * 1e9))  # it_value 0 would disarm
        spec = (ctypes.c_long * 4)(0, 0, sec, nsec)  # it_interval {0, 0}, it_value {sec, nsec}
        if self._settime(self.fd, self._TFD_TIMER_ABSTIME, spec, None) != 0:
            raise OSError(ctypes.get_errno(), "timerfd_settime failed")

    def drain(self) -> None:
        try:
            os.read(self.fd, 8)
        except BlockingIOError:
            pass

    def close(self) -> None:
        os.close(self.fd)


def _timerfd() -> _TimerFd | None:
    """A timerfd where the platform has one (Linux, and perf_counter is CLOCK_MONOTONIC)."""
    if not sys.platform.startswith("linux") or not USE_TIMERFD:
        return None
    try:
        return _TimerFd()
    except (OSError, AttributeError):
        return None


async def _open(client: httpx.AsyncClient, url: str, load: Load, shape: Open, t_load: float,
                record: Callable[[Sample], None]) -> None:
    """Start each request when it is due, whatever happened to the ones before it.

    On Linux the event loop waits on a timerfd armed for the next due time, so it wakes itself
    when a request is due and starts it in the same iteration. Elsewhere a clock thread sleeps
    until each due time (time.sleep has nanosecond resolution; the loop's own timers round up to
    the next millisecond) and hands the request to the loop, whose self-pipe wakes it at once.
    Either way the generator sleeps rather than spins, so the OS wakes it promptly also when
    the server keeps every core busy.
    """
    schedule = arrival_times(shape, load.seed, load.requests, load.duration_s)
    loop = asyncio.get_running_loop()
    started: list[asyncio.Future] = []
    finished = asyncio.Event()
    in_flight = 0

    async def send(i: int, due: float) -> None:
        nonlocal in_flight
        in_flight += 1
        try:
            record(await _one(client, url, load.texts[i % len(load.texts)], load.stream, i,
                              t_load, due))
        finally:
            in_flight -= 1

    def start(i: int, due: float) -> None:
        if in_flight >= MAX_IN_FLIGHT:
            record(Sample(index=i, scheduled_s=due, started_s=time.perf_counter() - t_load,
                          latency_s=0.0, ttfa_s=None, audio_s=0.0, status=None,
                          error_kind="not-sent",
                          error=f"not sent: {MAX_IN_FLIGHT} requests were still in flight"))
            return
        started.append(asyncio.ensure_future(send(i, due)))

    timer = _timerfd()
    if timer is not None:
        # perf_counter and monotonic read the same clock on Linux; the offset is ~0.
        to_monotonic = time.monotonic() - time.perf_counter() + t_load
        upcoming = iter(enumerate(schedule))
        pending = next(upcoming, None)

        def due_now() -> None:
            nonlocal pending
            timer.drain()
            now = time.perf_counter() - t_load
            while pending is not None and pending[1] <= now:
                start(*pending)
                pending = next(upcoming, None)
            if pending is None:
                finished.set()
            else:
                timer.arm(to_monotonic + pending[1])

        loop.add_reader(timer.fd, due_now)
        try:
            timer.arm(to_monotonic + schedule[0])
            await finished.wait()
        finally:
            loop.remove_reader(timer.fd)
            timer.close()
        await asyncio.gather(*started)
        return

    stop = threading.Event()

    def clock() -> None:
        try:
            for i, due in enumerate(schedule):
                while (left := t_load + due - time.perf_counter()) > 0:
                    if stop.wait(min(left, 0.25)):
                        return
                loop.call_soon_threadsafe(start, i, due)
        finally:
            loop.call_soon_threadsafe(finished.set)

    thread = threading.Thread(target=clock, name="bench-arrivals", daemon=True)
    thread.start()
    try:
        await finished.wait()
        await asyncio.gather(*started)
    finally:
        stop.set()
        thread.join()


async def _drive(url: str, load: Load, on_done: Callable[[Sample], None],
                 transport: httpx.AsyncBaseTransport | None) -> LoadResult:
    samples: list[Sample] = []

    def record(sample: Sample) -> None:
        samples.append(sample)
        on_done(sample)

    shape = load.shape
    connections = shape.concurrency if isinstance(shape, Closed) else MAX_IN_FLIGHT
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0)
    async with httpx.AsyncClient(limits=limits, timeout=timeout, transport=transport) as client:
        t_load = time.perf_counter()
        if isinstance(shape, Closed):
            await _closed(client, url, load, shape, t_load, record)
        else:
            await _open(client, url, load, shape, t_load, record)
        wall = time.perf_counter() - t_load
    return LoadResult(shape=shape, stream=load.stream, wall_s=wall,
                      samples=tuple(sorted(samples, key=lambda s: s.index)))


def run_load(url: str, load: Load, on_done: Callable[[Sample], None] = lambda s: None,
             transport: httpx.AsyncBaseTransport | None = None) -> LoadResult:
    """Drive `load` against the speech endpoint at `url` and return every sample.

    `transport` replaces the network (tests pass an `httpx.MockTransport`).
    """
    if isinstance(load.shape, Closed) and load.shape.concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    # Objects alive now (the interpreter, httpx, rich, the planner) leave the collector's view,
    # so a full collection during the load scans only what the load allocates and cannot
    # stall the schedule for long.
    gc.collect()
    gc.freeze()
    # Where a clock thread keeps the schedule, it needs the interpreter lock the moment it
    # wakes; by default a busy event loop would hand it over only after up to 5 ms.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return asyncio.run(_drive(url, load, on_done, transport))
    finally:
        sys.setswitchinterval(switch)


def describe(shapes: Sequence[Shape]) -> str:
    """`C=1, 4` or `2, 4, 8 req/s, poisson arrivals`, for progress lines and legends."""
    if not shapes:
        return "no load"
    if isinstance(shapes[0], Closed):
        return "C=" + ", ".join(str(s.concurrency) for s in shapes)  # type: ignore[union-attr]
    first = shapes[0]
    kind = first.arrivals + (f" (burstiness {first.burstiness:g})"
                             if first.arrivals == "gamma" else "")
    return ", ".join(f"{s.rate:g}" for s in shapes) + f" req/s, {kind} arrivals"  # type: ignore
