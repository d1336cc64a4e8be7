"""The load: C closed-loop HTTP clients, each sending its next request when the last one ended.

Closed loop means the offered load follows the server: at concurrency C there are always C
requests in flight, so throughput at saturation and latency under that throughput are measured
together (an open-loop generator would instead fix the arrival rate).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx

from .stats import Summary, summarise

MODE = "closed-loop"
REQUEST_TIMEOUT_S = 300.0
BYTES_PER_SAMPLE = 2  # response_format pcm: 16-bit mono


@dataclass(frozen=True)
class Sample:
    index: int  # which request text
    started_s: float  # since the start of the load
    latency_s: float  # send to last byte
    ttfc_s: float | None  # send to first audio byte; streaming only
    audio_s: float
    status: int | None  # None when no HTTP response came back
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class Load:
    """What one load run asks for: `requests` total, or as many as fit in `duration_s`."""

    concurrency: int
    texts: tuple[str, ...]  # request i sends texts[i % len(texts)]
    requests: int | None
    duration_s: float | None
    stream: bool


@dataclass(frozen=True)
class LoadResult:
    mode: str
    concurrency: int
    stream: bool
    wall_s: float  # first send to last response
    samples: tuple[Sample, ...]

    @property
    def ok(self) -> tuple[Sample, ...]:
        return tuple(s for s in self.samples if s.ok)

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok)

    @property
    def throughput_rps(self) -> float:
        return len(self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def audio_per_s(self) -> float:
        """Seconds of audio generated per wall-clock second."""
        return sum(s.audio_s for s in self.ok) / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def latency(self) -> Summary | None:
        return summarise([s.latency_s for s in self.ok])

    @property
    def ttfc(self) -> Summary | None:
        return summarise([s.ttfc_s for s in self.ok if s.ttfc_s is not None])

    def error_messages(self, limit: int = 5) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.error for s in self.samples if s.error))[:limit]


async def _one(client: httpx.AsyncClient, url: str, text: str, stream: bool, index: int,
               t_load: float) -> Sample:
    body = {"model": "tts-1", "input": text, "voice": "default", "response_format": "pcm",
            "stream": stream}
    t0 = time.perf_counter()
    first: float | None = None
    received, status, rate = 0, None, 24_000
    try:
        async with client.stream("POST", f"{url}/v1/audio/speech", json=body) as r:
            status = r.status_code
            if status != 200:
                message = (await r.aread()).decode(errors="replace")[:200]
                raise _HttpError(f"HTTP {status}: {message}")
            rate = int(r.headers.get("x-sample-rate", rate))
            async for part in r.aiter_raw():
                if part and first is None:
                    first = time.perf_counter()
                received += len(part)
        error = None if received else "empty audio"
    except _HttpError as exc:
        error = str(exc)
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"
    end = time.perf_counter()
    return Sample(index=index, started_s=t0 - t_load, latency_s=end - t0,
                  ttfc_s=(first - t0) if stream and first is not None else None,
                  audio_s=received / BYTES_PER_SAMPLE / rate, status=status, error=error)


class _HttpError(Exception):
    pass


async def _drive(url: str, load: Load, on_done: Callable[[Sample], None]) -> LoadResult:
    next_index = 0
    samples: list[Sample] = []
    limits = httpx.Limits(max_connections=load.concurrency,
                          max_keepalive_connections=load.concurrency)
    timeout = httpx.Timeout(REQUEST_TIMEOUT_S, connect=10.0)
    t_load = time.perf_counter()
    deadline = None if load.duration_s is None else t_load + load.duration_s

    def take() -> int | None:
        nonlocal next_index
        if load.requests is not None and next_index >= load.requests:
            return None
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        next_index += 1
        return next_index - 1

    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        async def user() -> None:
            while (i := take()) is not None:
                sample = await _one(client, url, load.texts[i % len(load.texts)], load.stream,
                                    i, t_load)
                samples.append(sample)
                on_done(sample)

        await asyncio.gather(*(user() for _ in range(load.concurrency)))
    wall = time.perf_counter() - t_load
    return LoadResult(mode=MODE, concurrency=load.concurrency, stream=load.stream, wall_s=wall,
                      samples=tuple(sorted(samples, key=lambda s: s.index)))


def run_load(url: str, load: Load, on_done: Callable[[Sample], None] = lambda s: None
             ) -> LoadResult:
    """Drive `load` against the speech endpoint at `url` and return every sample."""
    if load.concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    return asyncio.run(_drive(url, load, on_done))


def texts_needed(requests: int | None, warmup: int) -> int:
    """How many distinct texts to make: one per request, or a pool for duration runs."""
    return max(requests or 256, warmup, 1)
