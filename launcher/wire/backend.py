"""The seam between the supervisor and whatever runs the worker processes.

The supervisor sees a `Backend`: start a unit, send a control message, wait for events, stop,
close, and what it can tell of its processes (alive now, helpers, where each runs). A worker
sees a `Channel`: a message to the supervisor, a message to a peer, the next control message for
it, and an inbox per stage for its payloads. Everything that crosses is a `protocol` message; how
it crosses (pipes, Unix sockets, shared memory, or an actor framework) is the backend's business.
`local` is the multiprocessing backend; another backend (Ray, for several machines) subclasses
`Backend`, gives its channel what `Channel` declares, and nothing else changes.

A backend's promises:
- `events` reports every message a process sent before it reports that process's `Exited`, and
  reports `Exited` once per process it started (never for one it was told to `stop`).
  Bookkeeping (`protocol.BOOKKEEPING`) may come late, but never after the `Exited` of any
  process it was sent before: a death is judged on everything the survivors had said.
- Worker to worker traffic never passes through the supervisor; `Channel.peer` connects (or
  reconnects, after the peer restarted) on first use and says which incarnation answered. A
  stage's payloads reach the thread that runs it (`Channel.inbox`) without another hop.
- A worker whose supervisor is gone finds out from `Channel.receive` or `to_supervisor` (they
  raise `EOFError`).
- A peer that dies is announced to the worker as a `protocol.PeerGone` from `receive`, whether
  the backend noticed it first or the supervisor said so.
"""

from __future__ import annotations

import select
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from launcher.wire.protocol import FromWorker, ToPeer, ToWorker, decode, encode, write_frame
from launcher.wire.specs import WorkerSpec

NOTES_S = 0.01  # a backend reads bookkeeping at least this often while requests flow


@dataclass(frozen=True)
class Unit:
    """Processes started, stopped and restarted together: one process group, or every rank of
    one tensor-parallel stage (rank 0 first)."""

    name: str
    workers: tuple[WorkerSpec, ...]


@dataclass(frozen=True)
class Received:
    process: str
    pid: int
    message: FromWorker


@dataclass(frozen=True)
class Exited:
    process: str
    pid: int
    exitcode: int | None  # negative: killed by that signal; None: unknown


Event = Received | Exited


class PeerUnreachable(ConnectionError):
    """No live process answers for that peer (it is restarting, or just died)."""


class Backend(ABC):
    """What runs the worker processes, as the supervisor uses it. The abstract methods are every
    backend's own; the others have a default a backend overrides where it knows better."""

    # False when the supervisor cannot map the workers' shared memory (another machine): then
    # every payload travels inside its message.
    shares_memory: bool = True
    # False when what a worker logs does not reach this process's stderr (a worker on another
    # node): then the supervisor's log carries a failed stage's traceback itself.
    shares_stderr: bool = True

    @abstractmethod
    def start(self, unit: Unit) -> dict[str, int]:
        """Start every worker of `unit` (replacing a dead incarnation); their pids by name."""

    @abstractmethod
    def send(self, process: str, message: ToWorker) -> bool:
        """Send a control message; False when the process is not there to receive it."""

    @abstractmethod
    def events(self, timeout: float) -> list[Event]:
        """Wait up to `timeout` s for the first event, then return all that are ready."""

    @abstractmethod
    def stop(self, processes: Iterable[str], grace: float) -> None:
        """Ask these processes to stop; after `grace` s, kill them; return once they are gone."""

    @abstractmethod
    def close(self) -> None:
        """Stop every process, and whatever the backend itself started (a fork server, say)."""

    def alive(self, process: str) -> bool:
        """Whether `process` runs now, asked from any thread: a death known before `events`
        reports it (/health and the router use it). By default True: the death is known when
        `events` reports it."""
        return True

    def helpers(self) -> dict[str, Any]:
        """The backend's own helper processes, for /health (the local fork server: pid, state,
        restarts); each one's `state` is "ok" while it is well. By default none."""
        return {}

    def where(self, process: str) -> dict[str, Any]:
        """Facts about where `process` runs, for /health (e.g. a Ray node and actor id)."""
        return {}


class Channel(Protocol):
    process: str  # the name of the process this channel belongs to
    pid: int

    def to_supervisor(self, *messages: FromWorker) -> None:
        """Send to the supervisor, in this order and together (thread-safe); raises `EOFError`
        when the supervisor is gone."""

    def peer(self, process: str, stage: str) -> int:
        """The pid of the live incarnation of `process`, connecting to its stage `stage` first
        if needed; raises `PeerUnreachable`."""

    def to_peer(self, pid: int, message: ToPeer) -> None:
        """Send to the peer process `pid` (thread-safe); raises `PeerUnreachable` when that
        incarnation is gone. A reader gives a lease back to the pid in the block's name."""

    def inbox(self, stage: str) -> Inbox:
        """Where the stage's thread waits for its payloads: the `Deliver`s peers send it, and
        whatever this process `put`s there."""

    def listen(self) -> None:
        """Accept peers from now on (once every stage is built)."""

    def unlisten(self) -> None:
        """Stop accepting peers and remove what `listen` made (the worker is exiting: this may
        run in a signal handler, so it takes no lock)."""

    def receive(self) -> ToWorker:
        """The next control message (from the supervisor, a lease a peer gave back, a peer's
        death); raises `EOFError` when the supervisor is gone. One thread calls it."""


class Inbox(Protocol):
    def put(self, item: object) -> None:
        """From any thread of this process."""

    def get(self, timeout: float | None = None) -> object:
        """The next item or peer's `Deliver`, by the stage's thread; `queue.Empty` on timeout."""

    def empty(self) -> bool: ...

    def qsize(self) -> int: ...


def unregister(selector: Any, *watched: Any) -> None:
    """Stop watching each of `watched` (a connection, a process sentinel); one that was never
    registered, or whose descriptor is closed already, is no error."""
    for obj in watched:
        try:
            selector.unregister(obj)
        except (KeyError, ValueError, OSError):
            pass


# The peer closed its end: POLLHUP on a Unix socket pair; on TCP only POLLRDHUP says it.
_GONE = select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)


def hung_up(conn: Any) -> bool:
    """Whether the worker at the other end of its control connection has closed it: a worker
    never does while it runs, and the kernel does it first when the worker dies, before its exit
    can be read (with a CUDA context about 0.1 s before, measured on an H200). False for a
    closed connection of ours (no descriptor left to ask)."""
    try:
        fd = conn.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, _GONE)
    return any(events & _GONE for _, events in poller.poll(0))


def send_frame(conn: Any, lock: Any, message: ToWorker) -> bool:
    """`message` written to a worker's control connection, one writer at a time; False if the
    connection is dead or closed (the worker's exit is reported by the backend's `events`)."""
    data = encode(message)
    try:
        with lock:
            write_frame(conn, data)
        return True
    except (OSError, ValueError):
        return False


def read_frames(process: str, pid: int, reader: Any, out: list[Event], drain: bool) -> bool:
    """What `process` (pid `pid`) sent on one connection, appended to `out` as `Received`: one
    read's worth, or with `drain` all there is. False once the connection reached its end."""
    try:
        while True:
            for frame in reader.read():
                out += [Received(process, pid, m) for m in decode(frame)]
            if not drain:
                return True
    except BlockingIOError:
        return True  # nothing more now
    except (EOFError, OSError):
        return False


W = TypeVar("W")  # a backend's handle on one worker process


class Deaths:
    """The end of every `Backend.events` call, in the order the seam promises: every live
    process's bookkeeping (each `NOTES_S`, and whenever someone died), then for each death what
    it still had to say and its `Exited`. Both backends close their `events` with it, so the rule
    that a death is judged on everything the survivors said is kept in one place."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._notes_read = float("-inf")

    def report(self, out: list[Event], dead: list[W], *,
               notes: Iterable[tuple[str, int, Any]],
               last_words: Callable[[W, list[Event]], None],
               exited: Callable[[W], Exited], forget: Callable[[W], None]) -> list[Event]:
        """`notes`: (process, pid, bookkeeping reader) of every live process, read when due;
        for each of `dead`: `last_words` appends what it sent, then its `Exited`, then `forget`."""
        now = self._clock()
        if dead or now - self._notes_read >= NOTES_S:
            self._notes_read = now
            for process, pid, reader in notes:
                if reader is not None:
                    read_frames(process, pid, reader, out, drain=True)
        for worker in dead:
            last_words(worker, out)
            out.append(exited(worker))
            forget(worker)
        return out
