"""Which copy of each process group a request uses: chosen once, at admission, for its life.

A group the plan runs in several copies (`ProcessGroup.copies`) is several worker processes
with the same stages. A request is bound to one copy of each such group when it is admitted,
and every stage of that group serves it in that copy: a streamed request's chunks all reach one
vocoder copy, and state a stage keeps in its process (a prepared-request registry) is found by
the next stage of the same group.

The copy is the one with the least work in flight (requests bound to it and not yet finished),
ties to the lowest index; a copy that is down (dead, restarting, still building) is skipped.

Pure bookkeeping (no processes, no I/O), thread-safe: client threads bind and release, the
supervisor's thread releases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from launcher.wire.protocol import Route


class NoCopyUp(LookupError):
    """Every copy of a group is down: the request cannot be bound."""

    def __init__(self, group: str) -> None:
        super().__init__(f"every copy of process group '{group}' is down")
        self.group = group


class CopyChooser:
    def __init__(self, groups: Mapping[str, tuple[str, ...]]) -> None:
        """`groups`: every process group's copy names, index order (one name: a single copy)."""
        self._groups = {g: tuple(names) for g, names in groups.items()}
        self._lock = threading.Lock()
        # The supervisor's `RequestTable` knows the same requests (each handle's `copies`), so
        # these counts could be derived from it, but only by walking every request in flight
        # on every `bind`: an O(in flight) scan (up to the admission bound) per submit, under
        # the supervisor's lock and the table's. A count kept here costs O(groups), and keeps
        # the choice testable without a table. Both are updated at the same two points
        # (`Supervisor.submit` opens and binds under one lock, `Supervisor._close` closes and
        # releases), so they cannot drift apart.
        self._in_flight = {c: 0 for names in self._groups.values() for c in names}
        self._served = dict.fromkeys(self._in_flight, 0)  # requests ever bound to each
        self._bound: dict[int, tuple[str, ...]] = {}  # request -> the copies it is bound to

    def bind(self, request_id: int, up: Callable[[str], bool]) -> Route:
        """Bind the request to one copy of each group (least in flight among those `up`
        says run, lowest index on a tie); its route names the copies of copied groups.
        Raises `NoCopyUp` (and binds nothing) when a group has none up; a request bound
        already keeps its copies."""
        with self._lock:
            if (held := self._bound.get(request_id)) is not None:
                return self._route(held)
            chosen = []
            for group, names in self._groups.items():
                # Least loaded first; `up` is asked only until one answers (it may cost a
                # system call).
                ranked = sorted(range(len(names)), key=lambda i: (self._in_flight[names[i]], i))
                pick = next((names[i] for i in ranked if up(names[i])), None)
                if pick is None:
                    raise NoCopyUp(group)
                chosen.append(pick)
            for c in chosen:
                self._in_flight[c] += 1
                self._served[c] += 1
            self._bound[request_id] = tuple(chosen)
            return self._route(self._bound[request_id])

    def release(self, request_id: int) -> None:
        """The request finished (any outcome): its copies have one request less in flight."""
        with self._lock:
            for c in self._bound.pop(request_id, ()):
                self._in_flight[c] -= 1

    def copy_of(self, request_id: int, group: str) -> str | None:
        """The copy of `group` the request is bound to (None when it is not bound)."""
        with self._lock:
            held = self._bound.get(request_id)
        if held is None:
            return None
        names = self._groups[group]
        return next(c for c in held if c in names)

    def in_flight(self) -> dict[str, int]:
        """Requests bound to each copy, not finished."""
        with self._lock:
            return dict(self._in_flight)

    def served(self) -> dict[str, int]:
        """Requests ever bound to each copy (every request, for a single-copy group)."""
        with self._lock:
            return dict(self._served)

    def _route(self, held: tuple[str, ...]) -> Route:
        return tuple((g, c) for (g, names), c in zip(self._groups.items(), held)
                     if len(names) > 1)

