"""The local backend's worker side: a control pipe to the supervisor and direct links to peers.

A worker whose stages receive from other processes listens on a Unix-domain socket named after
its process, in a directory of the deployment's own (`socket_dir`: mode 0700, owned by this user,
checked before use), so no other user's process can even connect; the abstract namespace was
open to every local process. A sender connects on first use, once per (process, stage) it hands
payloads to, authenticates with the deployment's secret key, and both ends say `Hello`, so every
link is tied to one incarnation of its peer. The receiving side runs that handshake on a thread
of its own, bounded by `HANDSHAKE_S`: a peer that connects and says nothing stalls nothing. A peer that restarts listens again under the same name once its stages
are built; the old link's end-of-file tells both sides that it died (`PeerGone` for the worker),
and the next send connects anew.

Who reads what:
- the stage thread reads the links that carry its payloads, so a payload from another process
  is read, unpacked and run by one thread, with no handoff between threads on the way;
- the control thread (`receive`) reads the supervisor's pipe, accepts new connections (their
  handshake runs on a short-lived thread), and reads the links this process opened, on which
  its leases come back.
Connecting happens on the sending thread, so two workers handing payloads to each other never
wait on one another. Any thread may send.
"""

from __future__ import annotations

import logging
import multiprocessing.connection as mpc
import os
import selectors
import socket
import stat
import struct
import tempfile
import threading
import time
from collections import deque

from launcher.wire.backend import PeerUnreachable
from launcher.backends.inbox import Link, StageInbox, Watch
from launcher.wire.ipc import safe_name
from launcher.wire.protocol import (
    BOOKKEEPING, Deliver, FrameReader, Free, FromWorker, Hello, PeerGone, ToPeer, ToWorker, decode,
    encode, write_frame,
)

log = logging.getLogger(__name__)

LISTEN_RETRY_S = 2.0  # a dead incarnation may hold the address for a moment after it died
HANDSHAKE_S = 2.0  # a connecting peer has this long to authenticate and say Hello


def socket_dir(token: str) -> str:
    """The private directory of deployment `token`'s sockets: created 0700 on first use; one
    that exists must be this user's own, 0700 and no symlink, else nothing listens there."""
    path = os.path.join(tempfile.gettempdir(), f"stage-planner-{os.getuid()}-{token}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(f"{path} is not a private directory of this user (mode 0700); "
                              "refusing to listen for peers there")
    return path


def address(token: str, process: str) -> str:
    """Where `process` of deployment `token` listens for peers."""
    return os.path.join(socket_dir(token), safe_name(process))


def remove_socket_dir(token: str) -> None:
    """Remove the deployment's socket directory and what its dead workers left there."""
    path = os.path.join(tempfile.gettempdir(), f"stage-planner-{os.getuid()}-{token}")
    try:
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        os.rmdir(path)
    except OSError:
        pass  # gone already, or not ours to remove


def _receive_timeout(sock: socket.socket, seconds: float) -> None:
    """Bound every blocking read on the socket's descriptor (0: no bound), also the raw reads
    a multiprocessing connection makes."""
    whole = int(seconds)
    value = struct.pack("ll", whole, int((seconds - whole) * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


class LocalChannel:
    """`backend.Channel` over multiprocessing connections."""

    def __init__(self, process: str, control: mpc.Connection, notes: mpc.Connection, token: str,
                 authkey: bytes) -> None:
        self.process, self.pid = process, os.getpid()
        self._control, self._control_lock = control, threading.Lock()
        self._notes, self._notes_lock = notes, threading.Lock()
        self._control_reader = FrameReader(control.fileno())
        self._token, self._authkey = token, authkey
        self._listener: socket.socket | None = None
        self._lock = threading.Lock()
        self._connecting: dict[tuple[str, str], threading.Lock] = {}
        self._out: dict[tuple[str, str], Link] = {}  # links opened here, by (process, stage)
        # every link, by the peer's pid; tuples are replaced, never changed: read without lock
        self._by_pid: dict[int, tuple[Link, ...]] = {}
        self._inboxes: dict[str, StageInbox] = {}
        self._watch = Watch()  # the control thread's: supervisor, listener, links opened here
        self._ready: deque[ToWorker] = deque()
        self._watch.selector.register(control, selectors.EVENT_READ, "control")

    # -- sending ---------------------------------------------------------------------------------
    def to_supervisor(self, *messages: FromWorker) -> None:
        """Bookkeeping goes on its own pipe, which the supervisor reads at its own pace (it
        wakes nobody); the rest on the control pipe. Each keeps its order."""
        urgent = tuple(m for m in messages if not isinstance(m, BOOKKEEPING))
        notes = tuple(m for m in messages if isinstance(m, BOOKKEEPING))
        try:
            for conn, lock, part in ((self._control, self._control_lock, urgent),
                                     (self._notes, self._notes_lock, notes)):
                if part:
                    data = encode(part)
                    with lock:
                        write_frame(conn, data)
        except (OSError, ValueError):
            raise EOFError("the supervisor is gone") from None

    def peer(self, process: str, stage: str) -> int:
        link = self._out.get((process, stage))
        if link is not None:
            return link.pid
        with self._lock:
            gate = self._connecting.setdefault((process, stage), threading.Lock())
        with gate:
            link = self._out.get((process, stage)) or self._connect(process, stage)
            return link.pid

    def to_peer(self, pid: int, message: ToPeer) -> None:
        links = self._by_pid.get(pid, ())
        if isinstance(message, Deliver):
            link = next((k for k in links if k.outbound and k.stage == message.target), None)
        else:  # a lease goes back on the link its block came by, or any other to its owner
            link = next((k for k in links if not k.outbound), links[0] if links else None)
        if link is None:
            raise PeerUnreachable(f"no link to process {pid}")
        try:
            link.send(message)
        except (OSError, ValueError) as exc:  # ValueError: closed here meanwhile
            self._drop(link)
            raise PeerUnreachable(f"link to process {pid} broke: {exc}") from None

    def _connect(self, process: str, stage: str) -> Link:
        try:
            conn = mpc.Client(address(self._token, process), family="AF_UNIX",
                              authkey=self._authkey)
            conn.send_bytes(encode(Hello(self.process, self.pid, stage)))
            hello = decode(conn.recv_bytes())
        except (OSError, EOFError) as exc:
            raise PeerUnreachable(f"process '{process}' is not accepting handoffs "
                                  f"({type(exc).__name__}: {exc})") from None
        link = Link(conn, process, hello.pid, stage, outbound=True)
        self._add(link)
        self._watch.adopt(link)  # leases come back on it
        return link

    # -- receiving -------------------------------------------------------------------------------
    def inbox(self, stage: str) -> StageInbox:
        """The payloads for `stage`, read by its own thread. Create every inbox before
        `listen`."""
        return self._inboxes.setdefault(stage, StageInbox(self))

    def listen(self) -> None:
        where, deadline = address(self._token, self.process), time.monotonic() + LISTEN_RETRY_S
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        while True:
            try:
                # The name outlives a dead incarnation (a file); only this process's incarnations
                # use it, and the one before is gone: its name is taken over.
                if os.path.exists(where):
                    os.unlink(where)
                listener.bind(where)
                break
            except OSError:
                if time.monotonic() > deadline:
                    listener.close()
                    raise
                time.sleep(0.02)
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener
        self._watch.selector.register(listener, selectors.EVENT_READ, "listener")

    def unlisten(self) -> None:
        """At exit: remove this process's socket name, and the deployment's directory with the
        last one (no lock: called from a signal handler too)."""
        if self._listener is None:
            return
        where = address(self._token, self.process)
        try:
            os.unlink(where)
            os.rmdir(os.path.dirname(where))
        except OSError:
            pass  # another process still listens there, or it is gone already

    def receive(self) -> ToWorker:
        while not self._ready:
            for what in self._watch.select():
                if what == "control":
                    # EOFError: the supervisor is gone
                    self._ready.extend(decode(f) for f in self._control_reader.read())
                elif what == "listener":
                    self._accept()
                else:
                    self._read(what)
        message = self._ready.popleft()
        if isinstance(message, PeerGone):
            for link in self._by_pid.get(message.pid, ()):
                if link.process == message.process:
                    self._drop(link)
        return message

    def forward(self, message: ToWorker) -> None:
        """A control message read on another thread (a stage's link): to `receive`."""
        self._ready.append(message)
        self._watch.wake()

    def lost(self, link: Link) -> None:
        """A link reached end-of-file: its peer died (said once per link)."""
        if self._drop(link):
            log.debug("the link to process '%s' (pid %d, stage %s) ended: it died", link.process,
                      link.pid, link.stage)
            self.forward(PeerGone(link.process, link.pid))

    def _accept(self) -> None:
        """On the control thread: take the connection, and leave its handshake to a thread of
        its own, so a peer that says nothing holds up nothing here."""
        try:
            sock, _ = self._listener.accept()
        except OSError:  # BlockingIOError: another wake-up took it; or the peer went away
            return
        threading.Thread(target=self._handshake, args=(sock,), name="handshake",
                         daemon=True).start()

    def _handshake(self, sock: socket.socket) -> None:
        sock.setblocking(True)
        _receive_timeout(sock, HANDSHAKE_S)
        conn = mpc.Connection(os.dup(sock.fileno()))  # options stay with `sock`, the same socket
        try:
            mpc.deliver_challenge(conn, self._authkey)  # the peer authenticates itself here
            mpc.answer_challenge(conn, self._authkey)
            hello = decode(conn.recv_bytes())
            conn.send_bytes(encode(Hello(self.process, self.pid)))
            inbox = self._inboxes.get(hello.stage)
            if inbox is None:
                raise EOFError("no such stage here")
            _receive_timeout(sock, 0)  # a link waits as long as its peer lives
        except Exception as exc:  # noqa: BLE001 - a peer that died while connecting, a stranger,
            conn.close()  # or a silent one: dropped, and nothing else waited for it
            log.debug("a connecting peer was turned away: %s: %s", type(exc).__name__, exc)
            return
        finally:
            sock.close()
        link = Link(conn, hello.process, hello.pid, hello.stage, outbound=False)
        self._add(link)
        inbox.watch.adopt(link)

    def _read(self, link: Link) -> None:
        try:
            messages = link.read()
        except (EOFError, OSError):
            self.lost(link)
            return
        self._ready.extend(m for m in messages if isinstance(m, Free))

    # -- bookkeeping -----------------------------------------------------------------------------
    def _add(self, link: Link) -> None:
        with self._lock:
            if link.outbound:
                self._out[(link.process, link.stage)] = link
            self._by_pid[link.pid] = (*self._by_pid.get(link.pid, ()), link)

    def _drop(self, link: Link) -> bool:
        with self._lock:
            if link.dead:
                return False
            link.dead = True
            if self._out.get((link.process, link.stage)) is link:
                del self._out[(link.process, link.stage)]
            links = tuple(k for k in self._by_pid.get(link.pid, ()) if k is not link)
            if links:
                self._by_pid[link.pid] = links
            else:
                self._by_pid.pop(link.pid, None)
        watch = self._watch if link.outbound else self._inboxes[link.stage].watch
        watch.retire(link)
        return True
