"""A worker's side of the request table: what this process has of each request, and what it
tells the supervisor about it (see `protocol` for the rules the supervisor relies on), and the
copies the request is bound to (its `Deliver`'s route), kept while this process has it.

Thread-safe: every stage thread of the process, and its control thread (cancellations), use it.
"""

from __future__ import annotations

import threading
from collections import deque

from collections.abc import Mapping

from launcher.wire.protocol import HandedOver, PassedOn, Released, Result, Route

FORGET_AFTER = 4096  # cancelled request ids remembered (late payloads of them are dropped)


class Holdings:
    def __init__(self, stages: int) -> None:
        self._stages = stages
        self._lock = threading.Lock()
        self._finished: dict[int, set[str]] = {}  # request -> stages done with it here
        self._handed: dict[int, set[tuple[str, int]]] = {}  # request -> (process, pid) told
        # Read without the lock by the stage threads (`in`): a set is safe to test meanwhile.
        self.cancelled: set[int] = set()
        self._cancelled_order: deque[int] = deque()
        # request -> {group: copy}; read without the lock (a dict lookup is atomic)
        self._routes: dict[int, Mapping[str, str]] = {}

    def bind(self, request_id: int, route: Route) -> None:
        """Keep the request's route while this process has the request (a cancelled one's is
        not kept: nothing of it will be handed on)."""
        if not route or request_id in self._routes:
            return
        with self._lock:
            if request_id not in self.cancelled:
                self._routes[request_id] = dict(route)

    def route(self, request_id: int) -> Route:
        """The route to hand on with the request (empty: no copied group, or not kept)."""
        return tuple(self._routes.get(request_id, {}).items())

    def copy_of(self, request_id: int, group: str) -> str | None:
        """The copy of `group` the request is bound to; None when its route is not kept here
        (it was cancelled, or finished, meanwhile)."""
        return self._routes.get(request_id, {}).get(group)

    def cancel(self, request_id: int) -> None:
        with self._lock:
            if request_id not in self.cancelled:
                self.cancelled.add(request_id)
                self._cancelled_order.append(request_id)
                if len(self._cancelled_order) > FORGET_AFTER:
                    self.cancelled.discard(self._cancelled_order.popleft())
            self._finished.pop(request_id, None)
            self._handed.pop(request_id, None)
            self._routes.pop(request_id, None)

    def first_handoff(self, request_id: int, process: str, pid: int) -> bool:
        """Record a handoff to `process` (pid `pid`); True if the supervisor has not been told
        of one yet (it is told once per receiving incarnation)."""
        with self._lock:
            told = self._handed.setdefault(request_id, set())
            if (process, pid) in told:
                return False
            told.add((process, pid))
            return True

    def finish(self, stage: str, request_id: int) -> bool:
        """Record that `stage` is done with the request; True once every stage here is."""
        with self._lock:
            done = self._finished.setdefault(request_id, set())
            done.add(stage)
            if len(done) < self._stages:
                return False
            del self._finished[request_id]
            self._handed.pop(request_id, None)
            self._routes.pop(request_id, None)
            return True


def release_notes(notes: list, request_id: int) -> None:
    """Add that this process is done with the request, in as few messages as say it: the
    supervisor reads every one of them, and it serves every request."""
    last = notes[-1] if notes else None
    if type(last) is Result and last.last and last.request_id == request_id:
        return  # the request ends with its last result: nobody will ask who holds it
    if type(last) is HandedOver and last.request_id == request_id:
        notes[-1] = PassedOn(request_id, last.process, last.pid)
        return
    notes.append(Released(request_id))
