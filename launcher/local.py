"""The local backend: every worker is an OS process on this machine, started by multiprocessing.

- Processes start from a fork server that has torch preloaded (or by spawn). Each gets a duplex
  control pipe to the supervisor, and a second pipe for its bookkeeping (`protocol.BOOKKEEPING`:
  who holds which request, stats); workers talk to each other over `links` (Unix sockets named
  after this deployment, authenticated with its secret key).
- `events` waits on every control pipe and every process's sentinel at once. Nothing waits on a
  bookkeeping pipe, so writing to it wakes nobody: `events` reads them all every `NOTES_S`, and
  always before it reports an exit, so a death is judged on everything sent before it. A
  process's remaining messages are read before its exit is reported.
- `stop` sends `Stop`, waits `grace` s, then terminates and kills. A worker also exits by itself
  when its control pipe closes, so none outlives this process, even after a SIGKILL. Whatever
  shared-memory blocks a process that is gone left behind are unlinked.
- `close` stops every worker, then the fork server and resource tracker too, when this backend
  started them and no other local backend of this process still runs: nothing it started is left.
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.connection as mpc
import multiprocessing.forkserver
import multiprocessing.resource_tracker
import os
import secrets
import selectors
import signal
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from . import ipc
from .backend import NOTES_S, Event, Exited, Unit, read_frames, unregister
from .layout import with_fresh_rendezvous
from .links import LocalChannel
from .protocol import FrameReader, Stop, ToWorker, encode, write_frame
from .specs import WorkerSpec

PRELOAD = ["launcher.local", "launcher.worker", "launcher.standins"]


def _run(spec: WorkerSpec, control: mpc.Connection, notes: mpc.Connection, token: str,
         authkey: bytes) -> None:
    """The worker process's entry point."""
    from . import worker

    worker.main(spec, LocalChannel(spec.name, control, notes, token, authkey))


@dataclass
class _Handle:
    spec: WorkerSpec
    process: Any
    conn: mpc.Connection
    notes: mpc.Connection  # read without waiting (non-blocking)
    pid: int
    lock: threading.Lock = field(default_factory=threading.Lock)
    reader: FrameReader = field(init=False)
    notes_reader: FrameReader = field(init=False)

    def __post_init__(self) -> None:
        self.reader = FrameReader(self.conn.fileno())
        os.set_blocking(self.notes.fileno(), False)
        self.notes_reader = FrameReader(self.notes.fileno())


class LocalBackend:
    """`backend.Backend` for one machine. `events`, `start` and `stop` are called from one thread
    (the supervisor's) and `close` after it ended; `send` from any thread."""

    shares_memory = True

    def __init__(self, start_method: str = "forkserver") -> None:
        self.token = secrets.token_hex(6)
        self._authkey = secrets.token_bytes(32)
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # Preloaded once in the fork server, so each worker starts without re-importing torch.
            self._ctx.set_forkserver_preload(PRELOAD)
        self._procs: dict[str, _Handle] = {}
        self._selector = selectors.DefaultSelector()
        self._notes_read = 0.0
        self._closed = False
        _helpers.acquire()

    def start(self, unit: Unit) -> dict[str, int]:
        unit = with_fresh_rendezvous(unit)
        pids = {}
        for spec in unit.workers:
            self._forget(spec.name)
            parent_end, child_end = self._ctx.Pipe(duplex=True)
            notes_in, notes_out = self._ctx.Pipe(duplex=True)  # a socket: room for bursts
            process = self._ctx.Process(target=_run, name=f"stage-planner:{spec.name}",
                                        args=(spec, child_end, notes_out, self.token,
                                              self._authkey), daemon=True)
            process.start()
            child_end.close()  # so that the worker's death reads as EOF here
            notes_out.close()
            handle = _Handle(spec, process, parent_end, notes_in, process.pid)
            self._procs[spec.name] = handle
            self._selector.register(parent_end, selectors.EVENT_READ, (handle, "conn"))
            self._selector.register(process.sentinel, selectors.EVENT_READ, (handle, "exit"))
            pids[spec.name] = process.pid
        return pids

    def send(self, process: str, message: ToWorker) -> bool:
        handle = self._procs.get(process)
        if handle is None:
            return False
        data = encode(message)
        try:
            with handle.lock:
                write_frame(handle.conn, data)
            return True
        except (OSError, ValueError):
            return False  # dead or closed: its exit is reported by `events`

    def events(self, timeout: float) -> list[Event]:
        out: list[Event] = []
        exited: list[_Handle] = []
        for key, _ in self._selector.select(timeout):
            handle, kind = key.data
            if self._procs.get(handle.spec.name) is not handle:
                continue  # stopped or replaced meanwhile
            if kind == "conn":
                read_frames(handle.spec.name, handle.pid, handle.reader, out, drain=False)
            else:
                exited.append(handle)
        now = time.monotonic()
        if exited or now - self._notes_read >= NOTES_S:
            # Every process's bookkeeping, before any death is reported: who held what then.
            self._notes_read = now
            for handle in self._procs.values():
                read_frames(handle.spec.name, handle.pid, handle.notes_reader, out, drain=True)
        for handle in exited:
            read_frames(handle.spec.name, handle.pid, handle.reader, out, drain=True)
            handle.process.join(0.5)
            out.append(Exited(handle.spec.name, handle.pid, handle.process.exitcode))
            self._forget(handle.spec.name)
        return out

    def stop(self, processes: Iterable[str], grace: float) -> None:
        handles = [h for name in processes if (h := self._procs.get(name)) is not None]
        for handle in handles:
            self._unregister(handle)
            if grace > 0:
                self.send(handle.spec.name, Stop())
        for handle in handles:
            _end(handle.process, grace)
        for handle in handles:
            self._forget(handle.spec.name)

    def where(self, process: str) -> dict[str, Any]:
        return {}

    def pids(self) -> dict[str, int]:
        return {name: h.pid for name, h in self._procs.items()}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop(list(self._procs), grace=2.0)
        self._selector.close()
        _helpers.release()

    # -- helpers ---------------------------------------------------------------------------------
    def _unregister(self, handle: _Handle) -> None:
        unregister(self._selector, handle.conn, handle.process.sentinel)

    def _forget(self, name: str) -> None:
        """A process that is gone: close what pointed at it, unlink the blocks it left."""
        handle = self._procs.pop(name, None)
        if handle is None:
            return
        self._unregister(handle)
        handle.conn.close()
        handle.notes.close()
        try:
            handle.process.close()
        except ValueError:
            pass  # still running only if killing it failed; nothing more to do here
        spec = handle.spec
        ipc.sweep(ipc.owner_prefix(spec.shm_prefix, spec.name, handle.pid))


def _end(process: Any, grace: float) -> None:
    process.join(grace)
    if process.is_alive():
        process.terminate()  # the worker unlinks its blocks on SIGTERM
        process.join(1.0)
    if process.is_alive():
        process.kill()
        process.join(1.0)


class _Helpers:
    """multiprocessing's fork server and resource tracker are per interpreter, shared by every
    backend: the first backend finds out whether they already ran, the last one to close stops
    those that did not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._ours = (False, False)

    def acquire(self) -> None:
        with self._lock:
            if self._open == 0:
                self._ours = (_forkserver_pid() is None, _tracker_pid() is None)
            self._open += 1

    def release(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open:
                return
            forkserver, tracker = self._ours
            try:
                if forkserver and (pid := _forkserver_pid()) is not None:
                    # It holds nothing to flush; a signal spares it tearing torch down (~0.5 s).
                    os.kill(pid, signal.SIGTERM)
                    mp.forkserver._forkserver._stop()
                if tracker and _tracker_pid() is not None:
                    mp.resource_tracker._resource_tracker._stop()
            except (AttributeError, OSError, ChildProcessError):
                pass  # private API moved, or already gone: they exit with this process anyway


def _forkserver_pid() -> int | None:
    return getattr(mp.forkserver._forkserver, "_forkserver_pid", None)


def _tracker_pid() -> int | None:
    return getattr(mp.resource_tracker._resource_tracker, "_pid", None)


_helpers = _Helpers()
