"""Requests in flight: the caller's handle, and the supervisor's table of who holds each one.

`RequestTable` is pure bookkeeping (no processes, no I/O): which processes hold a request (so a
death fails exactly those), how requests ended, how long they took. See `protocol` for the
messages that drive it.

A handle is read from a thread (`chunks`, `result`: they block) or from an event loop
(`chunks_async`, `result_async`): there the thread that feeds the handle wakes the loop itself,
so waiting takes no thread of a pool, and each chunk one wake-up instead of two.
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from launcher.audio import SAMPLE_RATE, Audio, concatenate
from launcher.errors import RequestFailed, RequestTimeout
from launcher.words import Timeline, WordTiming

Outcome = Literal["ok", "error", "cancelled"]  # how a request ended
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
_END = object()  # a handle's last event read: no more chunks


class SpeechRequest:
    """Handle of one submitted request. Iterate `chunks()` to stream, or call `result()`; with
    word timings (a request submitted with `options={"timestamps": True}` to a card whose stages
    yield them), iterate `captioned()` or call `captioned_result()`.

    A request whose caller stops waiting (a timeout here, or `cancel()`) is cancelled in every
    process that holds it, at its next chunk or stage boundary."""

    def __init__(self, request_id: int, stream: bool,
                 cancel: Callable[[int, RequestFailed, Outcome], None],
                 sample_rate: int = SAMPLE_RATE) -> None:
        self.id = request_id
        self.stream = stream
        self.sample_rate = sample_rate  # the plan's (its card's `sample_rate`)
        # The copy of each group run in several copies that serves it (group -> copy name).
        self.copies: dict[str, str] = {}
        self.done = False
        self._events: queue.SimpleQueue = queue.SimpleQueue()
        self._cancel = cancel
        self._wake: Callable[[], None] | None = None  # set while an event loop waits on it

    def chunks(self, timeout: float | None = None) -> Iterator[Any]:
        """Audio chunks (float32, mono) in order, each as soon as the terminal stage produced it:
        numpy arrays or torch tensors, as the terminal stage handed them over."""
        for samples, _ in self._outputs(timeout):
            yield samples

    def captioned(self, timeout: float | None = None
                  ) -> Iterator[tuple[Any, tuple[WordTiming, ...]]]:
        """(audio chunk, its words) in order: each word in seconds from the start of the
        response, sent with the first chunk whose audio reaches its start (`words.Timeline`). A
        word left after the last chunk comes with an empty chunk at the end."""
        timeline = Timeline(self.sample_rate)
        for samples, words in self._outputs(timeout):
            yield samples, timeline.add(len(samples), words)
        if rest := timeline.rest():
            yield concatenate([]), rest

    def captioned_result(self, timeout: float | None = None
                         ) -> tuple[Audio, tuple[WordTiming, ...]]:
        """The whole audio and every word, timed from its start."""
        parts, words = [], []
        for samples, due in self.captioned(timeout):
            if len(samples):  # not the empty end piece, which may be of another array kind
                parts.append(samples)
            words += due
        return Audio(concatenate(parts), self.sample_rate), tuple(words)

    def _outputs(self, timeout: float | None
                 ) -> Iterator[tuple[Any, tuple[WordTiming, ...]]]:
        """The terminal stage's outputs, (samples, words timed from their start), in order."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                chunk = self._opened(self._events.get(timeout=wait))
            except queue.Empty:
                raise self._timed_out(timeout) from None
            if chunk is _END:
                return
            yield chunk

    def result(self, timeout: float | None = None) -> Audio:
        parts = list(self.chunks(timeout))
        return Audio(concatenate(parts), self.sample_rate)

    async def chunks_async(self, timeout: float | None = None) -> AsyncIterator[Any]:
        """`chunks` for a coroutine on an event loop: the same chunks, errors and timeout (which
        cancels the request), awaited rather than waited for on a thread."""
        async for samples, _ in self._outputs_async(timeout):
            yield samples

    async def _outputs_async(self, timeout: float | None
                             ) -> AsyncIterator[tuple[Any, tuple[WordTiming, ...]]]:
        """`_outputs`, awaited: the thread that feeds the handle wakes the loop."""
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop has closed: nobody is waiting any more
                pass

        self._wake = wake
        deadline = None if timeout is None else loop.time() + timeout
        try:
            while True:
                try:
                    chunk = self._opened(self._events.get_nowait())
                except queue.Empty:
                    ready.clear()
                    if not self._events.empty():  # put after the look, before the clear
                        continue
                    try:
                        async with asyncio.timeout_at(deadline):
                            await ready.wait()
                    except TimeoutError:
                        raise self._timed_out(timeout) from None
                    continue
                if chunk is _END:
                    return
                yield chunk
        finally:
            self._wake = None

    async def captioned_async(self, timeout: float | None = None
                              ) -> AsyncIterator[tuple[Any, tuple[WordTiming, ...]]]:
        """`captioned`, awaited."""
        timeline = Timeline(self.sample_rate)
        async for samples, words in self._outputs_async(timeout):
            yield samples, timeline.add(len(samples), words)
        if rest := timeline.rest():
            yield concatenate([]), rest

    async def captioned_result_async(self, timeout: float | None = None
                                     ) -> tuple[Audio, tuple[WordTiming, ...]]:
        """`captioned_result`, awaited."""
        parts, words = [], []
        async for samples, due in self.captioned_async(timeout):
            if len(samples):  # not the empty end piece, which may be of another array kind
                parts.append(samples)
            words += due
        return Audio(concatenate(parts), self.sample_rate), tuple(words)

    async def result_async(self, timeout: float | None = None) -> Audio:
        parts = [chunk async for chunk in self.chunks_async(timeout)]
        return Audio(concatenate(parts), self.sample_rate)

    @staticmethod
    def _opened(event: tuple[str, Any]) -> Any:
        """A chunk's samples, `_END` at the end, or the request's error raised."""
        kind, value = event
        if kind == "error":
            raise value
        return value if kind == "chunk" else _END

    def _timed_out(self, timeout: float | None) -> RequestTimeout:
        """The caller stopped waiting: the request is cancelled everywhere."""
        error = RequestTimeout(f"request {self.id}: no audio within {timeout} s")
        self._cancel(self.id, error, "cancelled")
        return error

    def cancel(self) -> None:
        """Stop the request: its caller will not read the rest."""
        self._cancel(self.id, RequestFailed("cancelled by the client"), "cancelled")

    # -- fed by the supervisor -------------------------------------------------------------------
    def _put(self, event: tuple[str, Any]) -> None:
        self._events.put(event)
        if (wake := self._wake) is not None:
            wake()

    def _chunk(self, samples: Any, words: tuple[WordTiming, ...] = ()) -> None:
        self._put(("chunk", (samples, words)))

    def _end(self) -> None:
        self.done = True
        self._put(("end", None))

    def _fail(self, error: RequestFailed) -> None:
        self.done = True
        self._put(("error", error))


@dataclass
class _Entry:
    handle: SpeechRequest
    started: float
    holders: set[str] = field(default_factory=set)
    released: set[str] = field(default_factory=set)  # processes done with it: never again holders


@dataclass(frozen=True)
class Closed:
    handle: SpeechRequest
    holders: frozenset[str]
    seconds: float


class RequestTable:
    """Thread-safe: client threads open and cancel, the supervisor's thread does the rest."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[int, _Entry] = {}
        self.outcomes = dict.fromkeys(OUTCOMES, 0)

    def open(self, handle: SpeechRequest, holders: Iterable[str]) -> None:
        with self._lock:
            self._entries[handle.id] = _Entry(handle, self._clock(), set(holders))

    def get(self, request_id: int) -> SpeechRequest | None:
        entry = self._entries.get(request_id)
        return entry.handle if entry is not None else None

    def handed(self, request_id: int, process: str) -> bool:
        """`process` now holds the request (unless it already released it); False when the
        request is no longer in flight."""
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is None:
                return False
            if process not in entry.released:
                entry.holders.add(process)
            return True

    def hold_for_exit(self, request_id: int, process: str) -> bool:
        """The request could not reach `process`, which has died and whose exit is not read
        yet: `process` holds it, so that reading the exit fails it with how the process ended.
        False when the request is no longer in flight."""
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is None:
                return False
            entry.holders.add(process)
            return True

    def released(self, request_id: int, process: str) -> None:
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is not None:
                entry.holders.discard(process)
                entry.released.add(process)

    def passed(self, request_id: int, source: str, process: str) -> None:
        """`handed(request_id, process)` and `released(request_id, source)` at once."""
        with self._lock:
            entry = self._entries.get(request_id)
            if entry is not None:
                if process not in entry.released:
                    entry.holders.add(process)
                entry.holders.discard(source)
                entry.released.add(source)

    def held_by(self, processes: Iterable[str]) -> list[int]:
        """Requests any of `processes` holds, oldest first."""
        wanted = set(processes)
        with self._lock:
            return [rid for rid, e in self._entries.items() if e.holders & wanted]

    def close(self, request_id: int, outcome: Outcome) -> Closed | None:
        """Take the request out of flight, counted under `outcome`; None if it already was."""
        with self._lock:
            entry = self._entries.pop(request_id, None)
            if entry is None:
                return None
            self.outcomes[outcome] += 1
        return Closed(entry.handle, frozenset(entry.holders), self._clock() - entry.started)

    def pending(self) -> list[int]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
