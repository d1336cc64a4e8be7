"""Running the stages of one worker process: a thread and an inbox per stage, and the handoffs.

A handoff to a stage of the same process is a queue put of the payload dict (no copy). A handoff
to another process goes straight to it (`Channel.to_peer`): the tensors are copied into a block
of this process's shared-memory pool (or, when small, into the message), and the supervisor is
only told who holds the request (`holdings`: `HandedOver` before this process's `Released`, or
both at once as `PassedOn`). A terminal stage's output goes to the supervisor (`Result`). A
streamed output (`stream_to`) is handed on chunk by chunk.

A stage's fan-in is `join`. Word timings (`launcher.words`) that came in with an input go on
with the first output a streaming stage makes from it, not with every chunk.

Fairness: a stage thread gathers what has arrived into a `FairQueue` and takes one item at a
time: a request's first input before anything else, then one turn per request. A streaming
stage keeps the streams of several requests open and runs each one chunk per turn (gathering
new arrivals between turns), so a new request's first chunk is not produced after every chunk
of the requests before it. A tensor-parallel leader runs each stream to its end (its followers
follow one stream at a time); it still takes inputs in the fair order.

Cores: in a process pinned to fewer CPUs than its CPU stages have threads, each step (a call, a
stream's next chunk) is computed in the stage's turn on those CPUs (`core_turns`), not beside
the others' steps; the wait for a turn counts as the stage's wait for a core.

Cancellation: a cancelled or failed request is dropped at the next stage boundary (its queued
payloads are skipped) and at the next chunk boundary (its generator is closed, so whatever it
holds is freed at once). A streaming stage may also yield `None` between the inner pieces of a
long step (a chunked prefill): no output, only one more such point (`cancellation`), and a
turn's end. A tensor-parallel leader broadcasts its go/stop decision before each chunk, so its
follower ranks close theirs at the same step.

Failure: a stage that raises fails its request, not the process. The exception is logged here
with its traceback (this process's log, on the serving process's stderr for a local worker),
and its summary and traceback go to the supervisor (`StageError`), which names the stage, the
request and this process where it fails the request. A stage that raises on a request already
cancelled (its client went away) ended as intended: that is logged at DEBUG, not as an error.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from launcher import cancellation
from launcher.wire import ipc
from launcher.worker import tp
from launcher.worker.core_turns import core_turns
from launcher.worker.core_wait import WaitClock
from launcher.wire.backend import Channel, PeerUnreachable
from launcher.worker.fair_inbox import FairInbox, FairQueue
from launcher.worker.holdings import Holdings, release_notes
from launcher.worker.join import Envelope, Joiner, JoinError
from launcher.wire.protocol import Deliver, HandedOver, Released, Result, StageError, Undeliverable
from launcher.wire.specs import PARENT, StageSpec, Successor, WorkerSpec
from launcher.words import WORDS

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Stream:
    """A streaming stage's output for one input, produced one chunk per turn."""

    iterator: Iterator[Mapping[str, Any] | None]
    data: dict[str, Any]  # the input, merged into each chunk handed on
    last: bool  # the input was the request's last here: so is the stream's last chunk
    current: Mapping[str, Any] | None = None  # pulled, handed on once the next one is known
    busy: float = 0.0  # the stage's time on it so far, and of that, waiting for a core
    waited: float = 0.0

    def close(self) -> None:
        close = getattr(self.iterator, "close", None)
        if close is not None:
            close()


class StageRunner:
    def __init__(self, spec: WorkerSpec, stages: Mapping[str, Callable[..., Any]],
                 channel: Channel, pool: ipc.SegmentPool, receiver: ipc.Receiver,
                 give_back: Callable[[str, int], None], orphaned: Callable[[], None]) -> None:
        self.spec, self.stages, self.channel, self.pool = spec, stages, channel, pool
        self.receiver, self.give_back, self.orphaned = receiver, give_back, orphaned
        # A stage fed by other processes waits on its links itself; others on a plain queue.
        self.inboxes: dict[str, FairInbox] = {
            s.name: FairInbox(channel.inbox(s.name) if s.remote_inputs else queue.SimpleQueue())
            for s in spec.stages}
        self.local = {s.name for s in spec.stages}
        self.latencies: dict[str, list[float]] = {s.name: [] for s in spec.stages}
        # Of those calls' time, how long the stage's thread waited for a core (a busy machine).
        self.core_waits: dict[str, float] = {s.name: 0.0 for s in spec.stages}
        self.stats_lock = threading.Lock()
        self.holdings = Holdings(len(spec.stages))
        self.turns = core_turns(spec)
        self.cancelled = self.holdings.cancelled
        # Each key is touched by one stage thread only, so these need no lock.
        self._chunk_counters: dict[tuple[str, int], int] = {}
        self._held: dict[tuple[str, str, int], list] = {}

    def start(self) -> None:
        for stage in self.spec.stages:
            threading.Thread(target=self._loop, args=(stage,), name=stage.name,
                             daemon=True).start()

    def put(self, target: str, env: Envelope) -> None:
        self.inboxes[target].put(env)

    def arrive(self, msg: Deliver) -> Envelope | None:
        """A payload from another process (or the client), read in place; None if dropped."""
        if msg.request_id in self.cancelled:
            if msg.packed.segment is not None:
                self.give_back(msg.packed.segment, msg.packed.lease)
            return None
        self.holdings.bind(msg.request_id, msg.route)
        try:
            data = self.receiver.unpack(msg.packed)
        except OSError as exc:
            # The sender died after handing over and its blocks were swept.
            why = f"cannot read the handoff from '{msg.source}' (its process is gone?): {exc}"
            log.warning("stage '%s' fails request %d: %s", msg.target, msg.request_id, why)
            self.fail(msg.target, msg.request_id, why)
            return None
        return Envelope(msg.request_id, msg.source, msg.chunk, msg.last, data)

    def take_timings(self) -> tuple[dict[str, tuple[float, ...]], dict[str, float]]:
        """Each stage's call times since the last take, and its thread's wait for a core in them."""
        with self.stats_lock:
            lat, self.latencies = self.latencies, {s: [] for s in self.latencies}
            waits, self.core_waits = self.core_waits, {s: 0.0 for s in self.core_waits}
        return {s: tuple(v) for s, v in lat.items()}, waits

    # -- cancellation ----------------------------------------------------------------------------
    def cancel(self, request_id: int) -> None:
        self.holdings.cancel(request_id)

    def fail(self, stage: str, request_id: int, message: str, trace: str = "") -> None:
        self.cancel(request_id)
        self.channel.to_supervisor(StageError(request_id, stage, message, trace),
                                   Released(request_id))

    def _raised(self, spec: StageSpec, request_id: int, exc: Exception) -> None:
        """Stage `spec` raised `exc` on `request_id`: log it with its traceback, fail the
        request."""
        self._forget(spec, request_id)
        if request_id in self.cancelled:
            log.debug("stage '%s' raised on request %d after it was cancelled", spec.name,
                      request_id, exc_info=exc)
        else:
            log.error("stage '%s' failed request %d", spec.name, request_id, exc_info=exc)
        self.fail(spec.name, request_id, f"{type(exc).__name__}: {exc}",
                  "".join(traceback.format_exception(exc)).rstrip())

    # -- one stage -------------------------------------------------------------------------------
    def _loop(self, spec: StageSpec) -> None:
        cancellation.want_points()
        try:
            with WaitClock() as core_wait:
                self._run(spec, self.turns.clock(core_wait))
        except EOFError:
            self.orphaned()  # the supervisor is gone

    def _run(self, spec: StageSpec, waited: Callable[[], float]) -> None:
        box, joiner = self.inboxes[spec.name], Joiner(spec.name, spec.predecessors)
        while True:
            self._gather(spec, box, joiner)
            self._drop_cancelled(spec, box.work)
            if not box.work:
                continue
            request_id, item = box.work.take()
            if isinstance(item, _Stream):
                self._advance(spec, request_id, item, waited, box.work)
            else:
                self._invoke(spec, request_id, *item, waited, box.work)
            # Payloads done with must not stay alive while this thread waits for the next one:
            # each pins the shared-memory block it arrived in.
            item = None

    def _gather(self, spec: StageSpec, box: FairInbox, joiner: Joiner) -> None:
        """Move what has arrived into the stage's work, joined; wait for it only when there is
        no work (so a new request is seen between two chunks of another)."""
        tp_leader = self.spec.tp is not None
        timeout = 0.0 if box.work else tp.IDLE_BROADCAST_S if tp_leader else None
        while True:
            try:
                env = box.raw.get(timeout=timeout)
            except queue.Empty:
                if timeout:
                    tp.keep_alive()
                    continue
                return
            timeout = 0.0
            if isinstance(env, Deliver) and (env := self.arrive(env)) is None:
                continue
            joiner.drop(self.cancelled)
            if env.request_id in self.cancelled:
                continue
            try:
                for data, chunk, last in joiner.add(env):
                    box.work.put(env.request_id, (data, chunk, last))
            except JoinError as exc:
                log.error("stage '%s' fails request %d: %s", spec.name, env.request_id, exc)
                self.fail(spec.name, env.request_id, str(exc))
            env = data = None

    def _drop_cancelled(self, spec: StageSpec, work: FairQueue) -> None:
        for request_id in work.requests():
            if request_id in self.cancelled:
                for item in work.finish(request_id):
                    if isinstance(item, _Stream):
                        item.close()  # at a chunk boundary: frees what the generator holds
                        self._record(spec, item.busy, item.waited)
                self._forget(spec, request_id)

    def _invoke(self, spec: StageSpec, request_id: int, data: dict[str, Any], chunk: int | None,
                last: bool, waited: Callable[[], float], work: FairQueue) -> None:
        fn = self.stages[spec.name]
        started, waited0 = time.perf_counter(), waited()
        try:
            if self.spec.tp is not None:
                tp.share_input(data)
            with self.turns.turn(spec.name):
                out = fn(data)
            if isinstance(out, Mapping):
                self._emit(spec, request_id, data, out, chunk, last)
                if last:
                    work.finish(request_id)
            else:
                stream = _Stream(iter(out), data, last)
                stream.busy, stream.waited = time.perf_counter() - started, waited() - waited0
                self._advance(spec, request_id, stream, waited, work)
                return  # timed as a whole when the stream ends
        except Exception as exc:  # noqa: BLE001 - a stage error fails its request, not the process
            self._raised(spec, request_id, exc)
        self._record(spec, time.perf_counter() - started, waited() - waited0)

    def _advance(self, spec: StageSpec, request_id: int, stream: _Stream,
                 waited: Callable[[], float], work: FairQueue) -> None:
        """Run a stream one chunk on, then let other requests have their turn; a tensor-parallel
        leader runs it to its end instead (its followers follow one stream at a time)."""
        while True:
            started, waited0 = time.perf_counter(), waited()
            opening = stream.current is None  # its first item is held until the next is known
            try:
                over = self._step(spec, request_id, stream)
            except Exception as exc:  # noqa: BLE001 - fails its request, not the process
                stream.close()
                self._raised(spec, request_id, exc)
                over = True
            stream.busy += time.perf_counter() - started
            stream.waited += waited() - waited0
            if over:
                self._record(spec, stream.busy, stream.waited)
                if stream.last:
                    work.finish(request_id)
                return
            if self.spec.tp is None and not (opening and stream.current is not None):
                work.put_front(request_id, stream)
                return

    def _step(self, spec: StageSpec, request_id: int, stream: _Stream) -> bool:
        """Pull the stream's next item and hand on the one before it (the last is handed on
        marked last); True when the stream is over (ended or cancelled)."""
        ranks = self.spec.tp is not None
        go = request_id not in self.cancelled
        if ranks:
            go = tp.decide(go)
        if not go:
            self._chunk_counters.pop((spec.name, request_id), None)
            stream.close()  # cancelled: frees what the generator holds
            return True
        try:
            with self.turns.turn(spec.name):
                upcoming = next(stream.iterator)
        except StopIteration:
            stream.close()
            if stream.current is None:
                raise RuntimeError(f"stage '{spec.name}' produced no output") from None
            self._emit(spec, request_id, stream.data, stream.current,
                       self._next_chunk(spec, request_id), stream.last)
            return True
        if upcoming is None:
            return False  # a cancellation point inside a long step, no output
        if stream.current is not None:
            try:
                self._emit(spec, request_id, stream.data, stream.current,
                           self._next_chunk(spec, request_id), False)
            except BaseException:
                if ranks:
                    tp.decide(False)  # the followers wait for the next decision
                raise
            if WORDS in stream.data:  # an input's words go on with its first output only
                stream.data = {k: v for k, v in stream.data.items() if k != WORDS}
        stream.current = upcoming
        return False

    def _forget(self, spec: StageSpec, request_id: int) -> None:
        self._chunk_counters.pop((spec.name, request_id), None)
        for key in [k for k in self._held if k[0] == spec.name and k[2] == request_id]:
            del self._held[key]

    def _record(self, spec: StageSpec, took: float, core_wait: float) -> None:
        with self.stats_lock:
            self.latencies[spec.name].append(took)
            self.core_waits[spec.name] += core_wait

    def _next_chunk(self, spec: StageSpec, request_id: int) -> int:
        key = (spec.name, request_id)
        n = self._chunk_counters.get(key, 0)
        self._chunk_counters[key] = n + 1
        return n

    # -- handing on ------------------------------------------------------------------------------
    def _emit(self, spec: StageSpec, request_id: int, data: dict[str, Any],
              out: Mapping[str, Any], chunk: int | None, last: bool) -> None:
        if request_id in self.cancelled:
            return
        merged = {k: v for k, v in {**data, **out}.items() if v is not None}
        notes: list = []  # for the supervisor, once the payloads are on their way
        if not spec.successors:
            notes.append(Result(request_id, spec.name, chunk, last, self.pool.pack(merged, PARENT)))
        for succ in spec.successors:
            if chunk is not None and not succ.streaming:
                # A plain `next` edge hands over the complete output: hold chunks until the last.
                held = self._held.setdefault((spec.name, succ.stage, request_id), [])
                held.append((dict(merged), chunk, last))
                if not last:
                    continue
                batch = self._held.pop((spec.name, succ.stage, request_id))
            else:
                batch = [(dict(merged), chunk, last)]
            for payload, idx, fin in batch:
                if not self._deliver(spec.name, succ, request_id, payload, idx, fin, notes):
                    self.channel.to_supervisor(*notes)
                    return
        if last:
            self._chunk_counters.pop((spec.name, request_id), None)
            if self.holdings.finish(spec.name, request_id):
                release_notes(notes, request_id)
        if notes:
            self.channel.to_supervisor(*notes)

    def _deliver(self, source: str, succ: Successor, request_id: int, data: dict[str, Any],
                 chunk: int | None, last: bool, notes: list) -> bool:
        if succ.stage in self.local:
            self.inboxes[succ.stage].put(Envelope(request_id, source, chunk, last, data))
            return True
        process = succ.process
        if succ.copied:  # the copy this request is bound to
            process = self.holdings.copy_of(request_id, succ.process)
            if process is None:  # its route was dropped: cancelled meanwhile
                self.cancel(request_id)
                notes.append(Released(request_id))
                return False
        packed = None
        try:
            pid = self.channel.peer(process, succ.stage)
            packed = self.pool.pack(data, f"{process}:{pid}")
            self.channel.to_peer(pid, Deliver(succ.stage, request_id, source, chunk, last,
                                              packed, self.holdings.route(request_id)))
        except PeerUnreachable as exc:
            if packed is not None and packed.segment is not None:
                self.pool.release(packed.segment, packed.lease)
            self.cancel(request_id)
            notes += [Undeliverable(request_id, source, process, str(exc)),
                      Released(request_id)]
            return False
        if self.holdings.first_handoff(request_id, process, pid):
            # After the payload, never after this process's Released (same pipe, same frame):
            # if the receiver dies first, this names a dead pid, and the request fails then.
            notes.append(HandedOver(request_id, process, pid))
        return True
