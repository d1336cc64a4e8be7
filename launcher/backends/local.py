"""The local backend: every worker is an OS process on this machine, started by multiprocessing.

- Processes start from a fork server that has preloaded the plan's factory modules (see
  `forkserver`), or by spawn. Each gets a duplex control pipe to the supervisor, and a second
  pipe for its bookkeeping (`protocol.BOOKKEEPING`: who holds which request, stats); workers talk
  to each other over `links` (Unix sockets named after this deployment, authenticated with its
  secret key).
- `events` waits on every control pipe and every process's exit at once. A process's exit is
  watched by its pidfd (Linux), not by multiprocessing's sentinel: under the fork server, that
  sentinel is a pipe from the fork server, which every worker's sentinel reports as an exit when
  the fork server dies, though the workers live on. The fork server's own death is watched the
  same way: reported by `helpers` (and so /health) and healed at once, a new one started for
  later spawns, without touching the live workers.
- No read here blocks: the control pipe is drained only while it has data. Nothing waits on a
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

import logging
import multiprocessing as mp
import multiprocessing.connection as mpc
import multiprocessing.forkserver
import os
import secrets
import selectors
import signal
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from launcher.wire import ipc
from launcher.wire.backend import (
    Backend, Deaths, Event, Exited, Unit, hung_up, read_frames, send_frame, unregister,
)
from launcher.control.layout import with_fresh_rendezvous
from launcher.backends import forkserver
from launcher.backends.links import LocalChannel, remove_socket_dir
from launcher.wire.protocol import FrameReader, Stop, ToWorker
from launcher.wire.specs import WorkerSpec

log = logging.getLogger(__name__)


class ForkServerState(StrEnum):
    """The fork server later restarts spawn from, as /health shows it."""

    OK = "ok"
    EXITED = "exited"  # a moment ago: the supervisor's next look restarts it
    RESTARTING = "restarting"
    FAILED = "failed"  # a new one could not be started (the reason follows it on /health)


def _run(spec: WorkerSpec, control: mpc.Connection, notes: mpc.Connection, token: str,
         authkey: bytes) -> None:
    """The worker process's entry point."""
    from launcher.worker import main as worker

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
    forked: bool = False  # by the fork server, which reports its exit status
    exit: Any = field(init=False)  # readable once the process has exited: a pidfd, or sentinel

    def __post_init__(self) -> None:
        self.reader = FrameReader(self.conn.fileno())
        os.set_blocking(self.notes.fileno(), False)
        self.notes_reader = FrameReader(self.notes.fileno())
        self.exit = _pidfd(self.pid)
        if self.exit is None:
            self.exit = self.process.sentinel

    def exited(self, timeout: float = 0.0) -> bool:
        return bool(mpc.wait([self.exit], timeout))

    def down(self) -> bool:
        """Exited, or on its way out (`hung_up`): a peer that found it unreachable then is told
        how it ended once its exit is read, not only that it could not be reached."""
        return self.exited() or hung_up(self.conn)

    def exitcode(self) -> int | None:
        """How it ended; None when nobody can tell (the fork server that knew died too)."""
        if not isinstance(self.exit, _PidFd):
            self.process.join(0.5)
            return self.process.exitcode
        if mpc.wait([self.process.sentinel], 0.5):
            code = self.process.exitcode  # the fork server's report, unless it died first
            if code == 255 and self.forked and not _forkserver_alive():
                return None  # multiprocessing's stand-in for "the fork server is gone"
            return code
        return None

    def signal(self, sig: int) -> None:
        try:
            if isinstance(self.exit, _PidFd):
                signal.pidfd_send_signal(self.exit.fd, sig)
            else:
                os.kill(self.pid, sig)
        except (ProcessLookupError, OSError):
            pass  # gone already

    def close(self) -> None:
        if isinstance(self.exit, _PidFd):
            self.exit.close()


class _PidFd:
    """A process's pidfd: readable once it exited, whoever its parent is (Linux 5.3+)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _pidfd(pid: int | None) -> _PidFd | None:
    if pid is None or not hasattr(os, "pidfd_open"):
        return None
    try:
        return _PidFd(os.pidfd_open(pid))
    except OSError:  # already gone (and reaped), or no pidfds here
        return None


class LocalBackend(Backend):
    """`backend.Backend` for one machine. `events`, `start` and `stop` are called from one thread
    (the supervisor's) and `close` after it ended; `send` from any thread."""

    def __init__(self, start_method: str = "forkserver",
                 preload: Sequence[str] = tuple(forkserver.PRELOAD)) -> None:
        self.token = secrets.token_hex(6)
        self._authkey = secrets.token_bytes(32)
        self._ctx = mp.get_context(start_method)
        if start_method == "forkserver":
            # Preloaded once in the fork server (`forkserver.preload_for` the plan's factories:
            # torch where they import it), so each worker starts without importing them again.
            self._ctx.set_forkserver_preload(list(preload))
        self._procs: dict[str, _Handle] = {}
        self._selector = selectors.DefaultSelector()
        self._deaths = Deaths()
        self._closed = False
        self._forkserver = start_method == "forkserver"
        self._fs_watch: _PidFd | None = None  # the fork server's pidfd, while it runs
        self._fs_lock = threading.Lock()
        self._fs_state = ForkServerState.OK
        self._fs_failure = ""  # why it is FAILED
        self._fs_restarts = 0
        self._fs_pending = False  # a new fork server to watch
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
            handle = _Handle(spec, process, parent_end, notes_in, process.pid,
                             forked=self._forkserver)
            self._procs[spec.name] = handle
            self._selector.register(parent_end, selectors.EVENT_READ, (handle, "conn"))
            self._selector.register(handle.exit, selectors.EVENT_READ, (handle, "exit"))
            pids[spec.name] = process.pid
        self._watch_forkserver()
        return pids

    def send(self, process: str, message: ToWorker) -> bool:
        handle = self._procs.get(process)
        return handle is not None and send_frame(handle.conn, handle.lock, message)

    def events(self, timeout: float) -> list[Event]:
        out: list[Event] = []
        exited: list[_Handle] = []
        self._watch_restarted()
        for key, _ in self._selector.select(timeout):
            handle, kind = key.data
            if kind == "forkserver":
                self._forkserver_died()
                continue
            if self._procs.get(handle.spec.name) is not handle:
                continue  # stopped or replaced meanwhile
            if kind == "conn":
                read_frames(handle.spec.name, handle.pid, handle.reader, out, drain=False)
            else:
                exited.append(handle)
        return self._deaths.report(
            out, exited,
            notes=[(h.spec.name, h.pid, h.notes_reader) for h in self._procs.values()],
            last_words=_drain, exited=lambda h: Exited(h.spec.name, h.pid, h.exitcode()),
            forget=lambda h: self._forget(h.spec.name))

    def stop(self, processes: Iterable[str], grace: float) -> None:
        handles = [h for name in processes if (h := self._procs.get(name)) is not None]
        for handle in handles:
            self._unregister(handle)
            if grace > 0:
                self.send(handle.spec.name, Stop())
        for handle in handles:
            _end(handle, grace)
        for handle in handles:
            self._forget(handle.spec.name)

    def alive(self, process: str) -> bool:
        """Whether the process runs, asked its pidfd and control pipe now (any thread): a death
        is known here before `events` reports it."""
        handle = self._procs.get(process)
        try:
            return handle is not None and not handle.down()
        except (OSError, ValueError):  # forgotten (its pidfd closed) meanwhile
            return False

    def helpers(self) -> dict[str, Any]:
        """For /health: the fork server later restarts spawn from (`state`: a `ForkServerState`,
        failed with why; `restarts`: how often it died and was replaced)."""
        if not self._forkserver:
            return {}
        with self._fs_lock:
            state: str = self._fs_state
            if state == ForkServerState.OK and self._fs_watch is not None \
                    and not _forkserver_alive():
                state = ForkServerState.EXITED
            elif state == ForkServerState.FAILED:
                state = f"{state}: {self._fs_failure}"
            return {"fork_server": {"pid": forkserver.forkserver_pid(), "state": state,
                                    "restarts": self._fs_restarts}}

    def pids(self) -> dict[str, int]:
        return {name: h.pid for name, h in self._procs.items()}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stop(list(self._procs), grace=2.0)
        remove_socket_dir(self.token)
        self._unwatch_forkserver()
        self._selector.close()
        _helpers.release()

    # -- helpers ---------------------------------------------------------------------------------
    def _unregister(self, handle: _Handle) -> None:
        unregister(self._selector, handle.conn, handle.exit)

    # -- the fork server -------------------------------------------------------------------------
    def _watch_forkserver(self) -> None:
        if not self._forkserver or self._fs_watch is not None:
            return
        fd = _pidfd(forkserver.forkserver_pid())
        if fd is not None:
            self._fs_watch = fd
            self._selector.register(fd, selectors.EVENT_READ, (None, "forkserver"))

    def _unwatch_forkserver(self) -> None:
        if self._fs_watch is not None:
            unregister(self._selector, self._fs_watch)
            self._fs_watch.close()
            self._fs_watch = None

    def _forkserver_died(self) -> None:
        """Live workers are not affected; later spawns need a new fork server: start one now,
        on a thread of its own (it imports torch: seconds), and watch it in turn."""
        self._unwatch_forkserver()
        with self._fs_lock:
            if self._fs_state == ForkServerState.RESTARTING:
                return
            self._fs_state = ForkServerState.RESTARTING
            self._fs_restarts += 1
        log.warning("the fork server died; starting another for later restarts (running workers "
                    "are not affected)")

        def heal() -> None:
            failure = ""
            try:
                mp.forkserver.ensure_running()  # reaps the dead one, starts a new one
            except Exception as exc:  # noqa: BLE001 - reported on /health
                failure = f"cannot restart the fork server: {type(exc).__name__}: {exc}"
                log.error("%s", failure, exc_info=exc)
            with self._fs_lock:
                self._fs_state = ForkServerState.FAILED if failure else ForkServerState.OK
                self._fs_failure = failure
                self._fs_pending = not failure

        threading.Thread(target=heal, name="fork server restart", daemon=True).start()

    def _watch_restarted(self) -> None:
        """On the supervisor's thread: watch a fork server restarted meanwhile."""
        with self._fs_lock:
            pending, self._fs_pending = self._fs_pending, False
        if pending and not self._closed:
            self._watch_forkserver()

    def _forget(self, name: str) -> None:
        """A process that is gone: close what pointed at it, unlink the blocks it left."""
        handle = self._procs.pop(name, None)
        if handle is None:
            return
        self._unregister(handle)
        handle.conn.close()
        handle.notes.close()
        handle.close()
        try:
            handle.process.close()
        except ValueError:
            pass  # still running only if killing it failed; nothing more to do here
        spec = handle.spec
        ipc.sweep(ipc.owner_prefix(spec.shm_prefix, spec.name, handle.pid))


def _drain(handle: _Handle, out: list[Event]) -> None:
    """Whatever `handle`'s control pipe holds now, without waiting for more: the process may
    still be alive (a blocking read would then wait for it)."""
    fd = handle.conn.fileno()
    while mpc.wait([fd], 0):
        if not read_frames(handle.spec.name, handle.pid, handle.reader, out, drain=False):
            return  # end of file


def _end(handle: _Handle, grace: float) -> None:
    """Stop the process, judged by its pidfd: after the fork server died, multiprocessing would
    take a live worker for dead and never signal it."""
    if not handle.exited(grace):
        handle.signal(signal.SIGTERM)  # the worker unlinks its blocks on SIGTERM
        if not handle.exited(1.0):
            handle.signal(signal.SIGKILL)
            handle.exited(1.0)
    if handle.exited():
        handle.process.join(0.1)  # reaps it when it is our child (spawn)


class _Helpers:
    """multiprocessing's fork server and resource tracker are per interpreter, shared by every
    backend: the first backend finds out whether they already ran, the last one to close stops
    those that did not (or that `forkserver.start_early` started ahead of it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open = 0
        self._ours = (False, False)

    def acquire(self) -> None:
        with self._lock:
            if self._open == 0:
                early_fs, early_tracker = forkserver.claim()
                self._ours = (early_fs or forkserver.forkserver_pid() is None,
                              early_tracker or forkserver.tracker_pid() is None)
            self._open += 1

    def release(self) -> None:
        with self._lock:
            self._open -= 1
            if self._open:
                return
            forkserver.stop(*self._ours)


def _forkserver_alive() -> bool:
    pid = forkserver.forkserver_pid()
    if pid is None:
        return False
    fd = _pidfd(pid)  # not waitpid: reaping it here would break multiprocessing's own restart
    if fd is None:
        return False
    try:
        return not mpc.wait([fd], 0)
    finally:
        fd.close()


_helpers = _Helpers()
