"""A backend with no processes: the test plays every worker.

It keeps the promises of `launcher.wire.backend.Backend` that the supervisor relies on (events in
the order they were made, one `Exited` per incarnation it started, none for one it was told to
stop), so the supervisor's decisions can be tested in milliseconds and without a fork.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterable
from typing import Any

from launcher.wire.backend import Backend, Event, Exited, Received, Unit


class FakeBackend(Backend):
    shares_memory = False  # every payload travels inside its message

    def __init__(self) -> None:
        self._pids = itertools.count(1000)
        self._events: queue.Queue[Event] = queue.Queue()
        self.lock = threading.Lock()
        self.pids: dict[str, int] = {}  # process -> its live incarnation's pid
        self.started: list[str] = []  # units, in the order they were (re)started
        self.sent: list[tuple[str, Any]] = []  # (process, control message)
        self.stopped: list[str] = []
        self.closed = False
        self._vanished: dict[str, tuple[int, int]] = {}  # dead, exit not yet reported

    # -- the Backend protocol ----------------------------------------------------------------
    def start(self, unit: Unit) -> dict[str, int]:
        with self.lock:
            self.started.append(unit.name)
            out = {w.name: next(self._pids) for w in unit.workers}
            self.pids.update(out)
            return out

    def send(self, process: str, message: Any) -> bool:
        with self.lock:
            if process not in self.pids:
                return False
            self.sent.append((process, message))
            return True

    def events(self, timeout: float) -> list[Event]:
        try:
            out = [self._events.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                out.append(self._events.get_nowait())
            except queue.Empty:
                return out

    def stop(self, processes: Iterable[str], grace: float) -> None:
        with self.lock:
            for name in processes:
                if self.pids.pop(name, None) is not None:
                    self.stopped.append(name)

    def close(self) -> None:
        self.closed = True
        self.stop(list(self.pids), 0.0)

    def where(self, process: str) -> dict[str, Any]:
        return {"fake": True}

    def alive(self, process: str) -> bool:
        with self.lock:
            return process in self.pids and process not in self._vanished


    # -- what the test's "workers" do ---------------------------------------------------------
    def say(self, process: str, *messages: Any) -> None:
        pid = self.pids[process]
        for m in messages:
            self._events.put(Received(process, pid, m))

    def die(self, process: str, exitcode: int = -9) -> None:
        with self.lock:
            pid = self.pids.pop(process)
        self._events.put(Exited(process, pid, exitcode))

    def vanish(self, process: str, exitcode: int = -9) -> None:
        """It dies now, but its exit is reported only by `report_exit`: a death the backend's
        `alive` knows before the supervisor reads it."""
        with self.lock:
            self._vanished[process] = (self.pids[process], exitcode)

    def report_exit(self, process: str) -> None:
        with self.lock:
            pid, exitcode = self._vanished.pop(process)
            self.pids.pop(process, None)
        self._events.put(Exited(process, pid, exitcode))

    def messages_to(self, process: str, kind: type) -> list[Any]:
        with self.lock:
            return [m for p, m in self.sent if p == process and isinstance(m, kind)]
