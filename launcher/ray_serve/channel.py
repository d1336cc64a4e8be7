"""The `Channel` of a worker hosted inside a Ray Serve replica: the replica plays its supervisor
and every peer.

The worker is the launcher's own (`launcher.worker.main.Worker`: device setup, stage building,
`StageRunner`'s threads, fairness, streaming, joins, cancellation); only what crosses its edge
differs from a worker process of `planner serve`:
- what the replica gives it (`give`: a request's payloads, a `Cancel`) is what `receive` returns;
- what it hands to another process (`to_peer`: a `Deliver` for a stage downstream) and what it
  tells the supervisor about a request (`Result`, `StageError`, `Released`, `PassedOn`) go to that
  request's outbox, an asyncio queue on the replica's event loop (`open`), in the order the
  worker sent them;
- build progress ends `start`: `Ready`, or a `BuildError` that stops the worker's thread here
  (the replica, not the worker, reports it: Ray Serve then retries the replica).
Payloads always travel inside their messages (the pool's `inline_bytes` is unbounded): the replica
downstream may be on another node, and Ray carries the message there.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
from dataclasses import dataclass
from typing import Any

from launcher.errors import LaunchError
from launcher.wire.protocol import (
    BuildError, Deliver, PassedOn, Ready, Released, Result, StageError, Stats, ToWorker,
    Undeliverable,
)
from launcher.wire.specs import WorkerSpec

log = logging.getLogger(__name__)

# What the worker says about one request: it goes to that request's outbox.
ABOUT_A_REQUEST = (Deliver, Result, StageError, Released, PassedOn, Undeliverable)


class _BuildFailed(Exception):
    """Raised into the worker's thread by `to_supervisor(BuildError)`: the worker would end its
    process, which here is the replica's."""


@dataclass
class _Outbox:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue


class ServeChannel:
    """`launcher.wire.backend.Channel` for one hosted worker; thread-safe where the protocol asks."""

    def __init__(self, process: str) -> None:
        self.process = process
        self.pid = os.getpid()
        self._given: queue.SimpleQueue = queue.SimpleQueue()
        self._outboxes: dict[int, _Outbox] = {}
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._problem: str | None = None
        self.stopped: str | None = None  # why the worker's thread ended (it never ends well)
        self.stats: Stats | None = None  # the worker's latest timing report

    # -- the replica's side ----------------------------------------------------------------------
    def start(self, worker: Any, timeout: float | None = None) -> None:
        """Run `worker` (a `Worker` over this channel) on a thread of its own; return once every
        stage is built, or raise `LaunchError` saying which stage failed and why."""
        threading.Thread(target=self._host, args=(worker,), name=f"worker:{self.process}",
                         daemon=True).start()
        if not self._done.wait(timeout):
            raise LaunchError(f"process group '{self.process}' did not build its stages within "
                              f"{timeout:g} s")
        if self._problem is not None:
            raise LaunchError(self._problem)

    def open(self, request_id: int) -> asyncio.Queue:
        """The outbox of a new request, read on the calling (event-loop) thread."""
        box = _Outbox(asyncio.get_running_loop(), asyncio.Queue())
        with self._lock:
            self._outboxes[request_id] = box
        return box.queue

    def close(self, request_id: int) -> None:
        """Nothing more of the request is wanted; a late message of it is dropped."""
        with self._lock:
            self._outboxes.pop(request_id, None)

    def give(self, message: ToWorker) -> None:
        """A message for the worker (any thread)."""
        self._given.put(message)

    # -- the worker's side (`Channel`) -----------------------------------------------------------
    def to_supervisor(self, *messages: Any) -> None:
        for message in messages:
            if isinstance(message, ABOUT_A_REQUEST):
                self._post(message.request_id, message)
            elif isinstance(message, Stats):
                self.stats = message
            elif isinstance(message, Ready):
                self._done.set()
            elif isinstance(message, BuildError):
                # The traceback goes to the replica's log; the summary to whoever deployed it.
                log.error("building stage '%s' of process group '%s' failed:\n%s",
                          message.stage, self.process, message.traceback)
                self._fail(f"stage '{message.stage}' of process group '{self.process}' could not "
                           f"be built: {message.summary}")
                raise _BuildFailed(message.summary)
            # Started, Building, HandedOver: the replica keeps no table of who holds what.

    def peer(self, process: str, stage: str) -> int:
        return self.pid  # every peer is "downstream": the request's outbox

    def to_peer(self, pid: int, message: Any) -> None:
        if isinstance(message, Deliver):
            self._post(message.request_id, message)
        # Free: no payload here ever takes a shared block, so no lease comes back.

    def inbox(self, stage: str) -> queue.SimpleQueue:
        return queue.SimpleQueue()

    def listen(self) -> None:
        pass  # peers do not dial in: their payloads come through `give`

    def receive(self) -> ToWorker:
        return self._given.get()

    # -- helpers ---------------------------------------------------------------------------------
    def _post(self, request_id: int, message: Any) -> None:
        with self._lock:
            box = self._outboxes.get(request_id)
        if box is not None:
            box.loop.call_soon_threadsafe(box.queue.put_nowait, message)

    def _host(self, worker: Any) -> None:
        try:
            worker.run()
        except _BuildFailed as exc:
            self.stopped = f"building failed: {exc}"
        except BaseException as exc:  # noqa: BLE001 - device setup, or the worker loop itself
            log.exception("the worker of process group '%s' stopped", self.process)
            self.stopped = f"process group '{self.process}' stopped: {type(exc).__name__}: {exc}"
            self._fail(self.stopped)

    def _fail(self, problem: str) -> None:
        if not self._done.is_set():
            self._problem = problem
            self._done.set()


def hosted(spec: WorkerSpec, timeout: float | None = None) -> ServeChannel:
    """A worker for `spec`, built and running in this process behind a `ServeChannel`."""
    from launcher.worker.main import Worker

    channel = ServeChannel(spec.name)
    channel.start(Worker(spec, channel), timeout)
    return channel
