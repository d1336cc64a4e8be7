"""The load: closed-loop clients or open-loop arrivals, over HTTP, and what each request saw.

Two shapes of load:
- **closed loop** (`Closed(C)`): C clients, each sending its next request when its last one ended.
  The server never sees more than C requests, so queueing is bounded by C: this measures
  throughput at saturation and the latency that comes with it.
- **open loop** (`Open(rate)`): requests arrive on a seeded schedule (Poisson, gamma with a
  burstiness, or evenly spaced) whatever the server does, as real users do; past the server's
  capacity the queue, and so the latency, grows with the offered load, which shows the knee.

The open-loop generator keeps its own books: each request records when it was due and when its
bytes were written (`lag_s`), a request sent `LATE_S` or more after it was due counts as late,
and one that found `MAX_IN_FLIGHT` requests outstanding is not sent at all and counts as an
error of kind `not-sent`. So the generator can fall behind its schedule, but never silently.
A process of its own writes the requests (`sendproc`, keeping the schedule with `arrivals`) and
hands each connection to an event loop here that reads the responses, so neither a response
being parsed nor anything else the bench does delays a request that is due; both speak the
bench's own lightweight HTTP/1.1 (`http1`), so the client takes little CPU from the server it
measures.

Per request: end-to-end latency (request written to last byte), time to first audio (streaming,
from the same instant), the audio's duration and real-time factor (latency / audio duration), and
for streams their continuity: a player that starts with the first byte stalls when the next bytes
arrive after the audio already delivered has played out (`Playback`).
"""

from __future__ import annotations

import asyncio
import gc
import random
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from planner.app.bench.arrivals import Sent, Unsent
from planner.app.bench.http1 import Endpoint, Pool, ProtocolError, Response, speech_request
from planner.app.bench.sendproc import SenderProcess
from planner.app.bench.stats import Summary, summarise

CLOSED, OPEN = "closed-loop", "open-loop"
ARRIVALS = ("poisson", "gamma", "constant")
REQUEST_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0
READ_SIZE = 256 * 1024
ERROR_BODY_CHARS = 200  # of an error response's body, in its message
BYTES_PER_SAMPLE = 2  # response_format pcm: 16-bit mono
DEFAULT_SAMPLE_RATE = 24_000
LATE_S = 0.001  # sent this long after it was due: a late request
START_AHEAD_S = 0.05  # open loop: the first request is due this long after the sender starts
MAX_IN_FLIGHT = 1024  # open loop: a request due while this many are outstanding is not sent
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
    sender_realtime: bool | None = None  # open loop: the sender process had real-time priority

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


def _sample(index: int, scheduled: float | None, at: float, t_load: float, kind: str,
            message: str) -> Sample:
    """A request that got no response: it could not be sent, or not to the end."""
    return Sample(index=index, scheduled_s=scheduled, started_s=at - t_load, latency_s=0.0,
                  ttfa_s=None, audio_s=0.0, status=None, error=message, error_kind=kind)


async def _response(give: Callable[[socket.socket], None], sock: socket.socket, index: int,
                    scheduled: float | None, sent: float, t_load: float, stream: bool) -> Sample:
    """Read the response to the request written on `sock` at `sent` (perf_counter time); a
    connection the server keeps alive goes to `give`, for a later request."""
    loop = asyncio.get_running_loop()
    play, response = Playback(), Response()
    received, rate, body = 0, 0, bytearray()  # rate: set from the head
    error = kind = None
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            while not response.done:
                data = await loop.sock_recv(sock, READ_SIZE)
                now = time.perf_counter()
                if not data:
                    response.finish()
                    break
                parts = response.feed(data)
                if response.status != 200:
                    body.extend(b"".join(parts)[:ERROR_BODY_CHARS])
                    continue
                if not rate:
                    rate = int(response.headers.get("x-sample-rate", DEFAULT_SAMPLE_RATE))
                if size := sum(map(len, parts)):
                    play.feed(now, size / BYTES_PER_SAMPLE / rate)
                    received += size
        if response.status != 200:
            message = bytes(body[:ERROR_BODY_CHARS]).decode(errors="replace")
            error, kind = f"HTTP {response.status}: {message}", f"http-{response.status}"
        elif not received:
            error, kind = "empty audio", "empty-audio"
    except TimeoutError:
        error = f"timeout: no complete response within {REQUEST_TIMEOUT_S:g} s"
        kind = "timeout"
    except (OSError, ProtocolError) as exc:
        error, kind = f"{type(exc).__name__}: {exc}", "disconnect"
    end = time.perf_counter()
    if response.reusable:
        give(sock)
    else:
        sock.close()
    return Sample(index=index, scheduled_s=scheduled, started_s=sent - t_load,
                  latency_s=end - sent,
                  ttfa_s=(play.first - sent) if stream and play.first is not None else None,
                  audio_s=received / BYTES_PER_SAMPLE / (rate or DEFAULT_SAMPLE_RATE),
                  status=response.status, error=error, error_kind=kind,
                  stalls=play.stalls if stream else 0, stall_s=play.stall_s if stream else 0.0)


async def _exchange(pool: Pool, request: bytes, index: int, t_load: float,
                    stream: bool) -> Sample:
    """One request of a closed loop: write it on a kept-alive connection (or a new one), read
    its response."""
    loop = asyncio.get_running_loop()
    try:
        sock = pool.take() or await pool.endpoint.connect_async(CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        return _sample(index, None, time.perf_counter(), t_load, "connect",
                       f"{type(exc).__name__}: {exc}")
    sock.setblocking(False)
    try:
        await loop.sock_sendall(sock, request)
    except OSError as exc:
        sock.close()
        return _sample(index, None, time.perf_counter(), t_load, "disconnect",
                       f"{type(exc).__name__}: {exc}")
    return await _response(pool.give, sock, index, None, time.perf_counter(), t_load, stream)


async def _closed(pool: Pool, requests: Callable[[int], bytes], load: Load, shape: Closed,
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
            record(await _exchange(pool, requests(i), i, t_load, load.stream))

    await asyncio.gather(*(user() for _ in range(shape.concurrency)))


async def _open(endpoint: Endpoint, requests: Sequence[bytes], load: Load, shape: Open,
                record: Callable[[Sample], None]) -> tuple[float, bool | None]:
    """Write each request when it is due, whatever happened to the ones before it; return when
    the load started (perf_counter) and whether the sender had real-time priority.

    A process of its own keeps the schedule and writes the requests (`sendproc`); this event
    loop only reads the responses on the connections it hands over, so nothing the bench does
    here delays the start of a request.
    """
    schedule = arrival_times(shape, load.seed, load.requests, load.duration_s)
    loop = asyncio.get_running_loop()
    reading: list[asyncio.Task] = []
    sender = SenderProcess(endpoint, schedule, requests, MAX_IN_FLIGHT, CONNECT_TIMEOUT_S)

    async def read(sent: Sent, t_load: float) -> None:
        try:
            record(await _response(sender.give, sent.sock, sent.index, sent.due_s, sent.sent,
                                   t_load, load.stream))
        finally:
            sender.done()

    try:
        # The sender is up; the schedule starts a moment from now, so that even the first
        # request finds its connection opened ahead (`arrivals.PREPARE_S`) like any other.
        t_load = time.perf_counter() + START_AHEAD_S
        sender.go(t_load)
        async for item in sender.items():
            match item:
                case Sent():
                    reading.append(loop.create_task(read(item, t_load)))
                case Unsent():
                    record(_sample(item.index, item.due_s, item.at, t_load, item.kind,
                                   item.message))
        await asyncio.gather(*reading)
    finally:
        for task in reading:
            task.cancel()
        sender.close()
    return t_load, sender.realtime


async def _drive(url: str, load: Load, on_done: Callable[[Sample], None]) -> LoadResult:
    samples: list[Sample] = []

    def record(sample: Sample) -> None:
        samples.append(sample)
        on_done(sample)

    endpoint = Endpoint.parse(url)
    built = [speech_request(endpoint, text, load.stream) for text in load.texts]

    def requests(i: int) -> bytes:
        return built[i % len(built)]

    pool = Pool(endpoint, CONNECT_TIMEOUT_S)
    shape, realtime = load.shape, None
    try:
        if isinstance(shape, Closed):
            t_load = time.perf_counter()
            await _closed(pool, requests, load, shape, t_load, record)
        else:
            t_load, realtime = await _open(endpoint, built, load, shape, record)
        wall = time.perf_counter() - t_load
    finally:
        pool.close()
    return LoadResult(shape=shape, stream=load.stream, wall_s=wall,
                      samples=tuple(sorted(samples, key=lambda s: s.index)),
                      sender_realtime=realtime)


def run_load(url: str, load: Load, on_done: Callable[[Sample], None] = lambda s: None
             ) -> LoadResult:
    """Drive `load` against the speech endpoint at `url` (plain http://host:port) and return
    every sample."""
    if isinstance(load.shape, Closed) and load.shape.concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    # Objects alive now (the interpreter, rich, the planner) leave the collector's view,
    # so a full collection during the load scans only what the load allocates and cannot
    # hold up the reading of responses (and so their timing) for long.
    gc.collect()
    gc.freeze()
    # The event loop stamps each read the moment it wakes; by default another thread of the
    # bench holding the interpreter lock (the progress display) would hand it over only after
    # 5 ms, and the stamp with it.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    try:
        return asyncio.run(_drive(url, load, on_done))
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
