"""Driving a load over HTTP: closed-loop clients or open-loop arrivals (`load_shapes`), and what
each request saw (`load_results`).

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
import socket
import sys
import time
from collections.abc import Callable, Sequence

from planner.app.bench.arrivals import Sent, Unsent
from planner.app.bench.http1 import Endpoint, Pool, ProtocolError, Response
from planner.app.bench.load_results import LoadResult, Playback, Sample
from planner.app.bench.load_shapes import Closed, Load, Open, arrival_times
from planner.app.bench.sendproc import SenderProcess
from planner.app.bench.speech import NotAudio, Speech

REQUEST_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10.0
READ_SIZE = 256 * 1024
ERROR_BODY_CHARS = 200  # of an error response's body, in its message
START_AHEAD_S = 0.05  # open loop: the first request is due this long after the sender starts
MAX_IN_FLIGHT = 1024  # open loop: a request due while this many are outstanding is not sent
SWITCH_INTERVAL_S = 0.0002  # the interpreter lock's hand-over interval while a load runs


def _sample(index: int, scheduled: float | None, at: float, t_load: float, kind: str,
            message: str) -> Sample:
    """A request that got no response: it could not be sent, or not to the end."""
    return Sample(index=index, scheduled_s=scheduled, started_s=at - t_load, latency_s=0.0,
                  ttfa_s=None, audio_s=0.0, status=None, error=message, error_kind=kind)


async def _response(give: Callable[[socket.socket], None], sock: socket.socket, index: int,
                    scheduled: float | None, sent: float, t_load: float, stream: bool,
                    speech: Speech) -> Sample:
    """Read the response to the request written on `sock` at `sent` (perf_counter time); a
    connection the server keeps alive goes to `give`, for a later request. Its audio is counted
    as `speech` says (the answer's WAV header or pcm rate, never an assumed one)."""
    loop = asyncio.get_running_loop()
    play, response = Playback(), Response()
    audio, seconds, body = None, 0.0, bytearray()  # audio: counts a 200's audio, from its head
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
                if audio is None:
                    audio = speech.reader(response.headers)
                if got := sum(audio.feed(part) for part in parts):
                    play.feed(now, got)
                    seconds += got
        if response.status != 200:
            message = bytes(body[:ERROR_BODY_CHARS]).decode(errors="replace")
            error, kind = f"HTTP {response.status}: {message}", f"http-{response.status}"
        elif not seconds:
            error, kind = "empty audio", "empty-audio"
    except TimeoutError:
        error = f"timeout: no complete response within {REQUEST_TIMEOUT_S:g} s"
        kind = "timeout"
    except NotAudio as exc:
        error, kind = f"not audio: {exc}", "not-audio"
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
                  audio_s=seconds, status=response.status, error=error, error_kind=kind,
                  stalls=play.stalls if stream else 0, stall_s=play.stall_s if stream else 0.0)


async def _exchange(pool: Pool, request: bytes, index: int, t_load: float,
                    stream: bool, speech: Speech) -> Sample:
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
    return await _response(pool.give, sock, index, None, time.perf_counter(), t_load, stream,
                           speech)


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
            record(await _exchange(pool, requests(i), i, t_load, load.stream, load.speech))

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
                                   t_load, load.stream, load.speech))
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
    built = [load.speech.request(endpoint, text, load.stream) for text in load.texts]

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
    """Drive `load` against the speech server at `url` (plain http://host:port; the path is
    `load.speech`'s) and return every sample."""
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
