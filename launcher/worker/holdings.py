"""A worker's side of the request table: what this process has of each request, and what it
tells the supervisor about it (see `protocol` for the rules the supervisor relies on).

Thread-safe: every stage thread of the process, and its control thread (cancellations), use it.
"""

from __future__ import annotations

import threading
from collections import deque

from launcher.wire.protocol import HandedOver, PassedOn, Released, Result

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

    def cancel(self, request_id: int) -> None:
        with self._lock:
            if request_id not in self.cancelled:
                self.cancelled.add(request_id)
                self._cancelled_order.append(request_id)
                if len(self._cancelled_order) > FORGET_AFTER:
                    self.cancelled.discard(self._cancelled_order.popleft())
            self._finished.pop(request_id, None)
            self._handed.pop(request_id, None)

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
