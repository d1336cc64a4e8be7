"""The open-loop sender in a process of its own, handing each connection to the bench's event loop.

Why a process: a sender thread inside the bench woke on time but then waited for the interpreter
lock whenever another thread of the bench (the event loop reading responses, the progress
display) held it and had been preempted by the OS; with the server keeping both cores of a small
machine busy that made 1-5 requests in 24 late by 65-205 ms. A child process has an interpreter
lock of its own, held by nobody else: it receives the whole schedule and the request bytes up
front, keeps the schedule (`arrivals.Sender`: sleep, then spin, at real-time priority where
allowed), opens the connections, writes each request when it is due, stamps the time the write
returned, and passes the connected socket to the parent (SCM_RIGHTS), whose event loop reads the
response as before.

The stamp is comparable across the two processes: `time.perf_counter` is CLOCK_MONOTONIC on
Linux, one clock for the whole machine (`tests/planner/app/bench/test_sendproc.py` checks it).

The wire: a SOCK_SEQPACKET socketpair, one pickled tuple per message, at most one descriptor
riding along.
- child to parent: ("ready", realtime), then per request ("sent", index, due_s, sent) with its
  connection or ("unsent", index, due_s, at, kind, message), and ("end",) after the last one;
- parent to child: ("go", t_start), then per response read ("done",), and ("idle",) with a
  connection the server kept alive, for the child to reuse.
End of file on the channel ends the child: the parent closes it when the load ends (or dies, and
the kernel closes it), and the child notices within `arrivals.MAX_NAP_S` while it waits.
The parent never blocks on the channel (what the child cannot take yet waits in a backlog), so
the two can never wait on each other.
"""

from __future__ import annotations

import asyncio
import gc
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
from collections import deque
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from planner.app.bench.arrivals import Pacer, Sender, Sent, Unsent, realtime
from planner.app.bench.http1 import Endpoint, Pool

MAX_MESSAGE = 64 * 1024  # bytes of one message (the longest is an unsent request's error)
START_TIMEOUT_S = 60.0  # for the child to start and say it is ready (a loaded machine is slow)
STOP_TIMEOUT_S = 5.0  # for the child to exit once told, before it is killed
_FD_SIZE = 4  # bytes of one descriptor in an SCM_RIGHTS message (a C int)
_ROOT = Path(__file__).resolve().parents[2]  # holds the `launcher` package


def _send(chan: socket.socket, message: tuple, sock: socket.socket | None = None) -> None:
    data = pickle.dumps(message)
    if sock is None:
        chan.send(data)
    else:
        socket.send_fds(chan, [data], [sock.fileno()])


def _recv(chan: socket.socket, flags: int = 0) -> tuple[tuple, socket.socket | None] | None:
    """The next message and the connection it carries; None at end of file. Raises
    BlockingIOError when nothing is there and the channel (or `flags`) says not to wait."""
    # Not socket.recv_fds: before Python 3.12 it drops `flags`.
    data, ancillary, _, _ = chan.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(_FD_SIZE), flags)
    if not data:
        return None
    fds = [int.from_bytes(payload[:_FD_SIZE], sys.byteorder, signed=True)
           for level, kind, payload in ancillary
           if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS]
    return pickle.loads(data), (socket.socket(fileno=fds[0]) if fds else None)


class SenderProcess:
    """The parent's side: starts the child, tells it when to start, yields what it sent,
    and hands back finished connections."""

    def __init__(self, endpoint: Endpoint, schedule: Sequence[float], requests: Sequence[bytes],
                 max_in_flight: int, connect_timeout_s: float) -> None:
        self._job = {"host": endpoint.host, "port": endpoint.port, "schedule": tuple(schedule),
                     "requests": tuple(requests), "max_in_flight": max_in_flight,
                     "connect_timeout_s": connect_timeout_s}
        self._chan, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._backlog: deque[tuple[tuple, socket.socket | None]] = deque()
        self._gone = False  # the child closed its end: nothing more goes to it
        self._writing = False  # waiting for the channel to take the backlog
        self.realtime: bool | None = None
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            p for p in (str(_ROOT), os.environ.get("PYTHONPATH")) if p))
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "planner.app.bench.sendproc", str(theirs.fileno())],
                stdin=subprocess.PIPE, pass_fds=(theirs.fileno(),), env=env)
        finally:
            theirs.close()  # the child's copy is the only one: its exit is our end of file
        try:
            assert self._proc.stdin is not None
            with self._proc.stdin:
                pickle.dump(self._job, self._proc.stdin)
            self._chan.settimeout(START_TIMEOUT_S)
            got = _recv(self._chan)
            if got is None:
                raise RuntimeError("the open-loop sender process exited before it started "
                                   f"(exit code {self._proc.wait()})")
            (_, self.realtime), _ = got
            self._chan.setblocking(False)
        except BaseException:
            self.close()
            raise

    def go(self, t_start: float) -> None:
        """Start the schedule, its times counted from `t_start` (perf_counter)."""
        self._put(("go", t_start))

    async def items(self) -> AsyncIterator[Sent | Unsent]:
        """Each request as the child sent it (or could not), until the last."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[tuple, socket.socket | None] | None] = asyncio.Queue()

        def readable() -> None:
            while True:
                try:
                    got = _recv(self._chan)
                except BlockingIOError:
                    return
                queue.put_nowait(got)
                if got is None:
                    loop.remove_reader(self._chan)
                    return

        loop.add_reader(self._chan, readable)
        try:
            while (got := await queue.get()) is not None:
                match got:
                    case (("sent", index, due_s, sent), sock) if sock is not None:
                        sock.setblocking(False)
                        yield Sent(index, due_s, sent, sock)
                    case (("unsent", index, due_s, at, kind, message), _):
                        yield Unsent(index, due_s, at, kind, message)
                    case (("end",), _):
                        return
            raise RuntimeError("the open-loop sender process ended before its schedule did "
                               f"(exit code {self._proc.wait()})")
        finally:
            loop.remove_reader(self._chan)

    def give(self, sock: socket.socket) -> None:
        """Hand back a connection the server kept alive, for a later request."""
        self._put(("idle",), sock)

    def done(self) -> None:
        """A response was read to its end: one request fewer in flight."""
        self._put(("done",))

    def close(self) -> None:
        """End the child (end of file on its channel) and wait for it to exit."""
        if self._writing:
            asyncio.get_running_loop().remove_writer(self._chan)
            self._writing = False
        self._drop_backlog()
        self._chan.close()
        try:
            self._proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # stuck in a connect: it has nothing left to do
            self._proc.kill()
            self._proc.wait()

    def _put(self, message: tuple, sock: socket.socket | None = None) -> None:
        if self._gone:
            if sock is not None:
                sock.close()
            return
        self._backlog.append((message, sock))
        self._flush()

    def _flush(self) -> None:
        """Send what waits, as far as the child's side takes it now; the rest when it can."""
        while self._backlog:
            message, sock = self._backlog[0]
            try:
                _send(self._chan, message, sock)
            except BlockingIOError:
                if not self._writing:
                    asyncio.get_running_loop().add_writer(self._chan, self._flush)
                    self._writing = True
                return
            except OSError:  # the child has ended: it needs nothing more
                self._gone = True
                self._drop_backlog()
                break
            self._backlog.popleft()
            if sock is not None:
                sock.close()  # the child has its own descriptor now
        if self._writing:
            asyncio.get_running_loop().remove_writer(self._chan)
            self._writing = False

    def _drop_backlog(self) -> None:
        for _, sock in self._backlog:
            if sock is not None:
                sock.close()
        self._backlog.clear()


class _Child:
    """The child's side: keeps the schedule, and between requests takes in what the parent
    sends (finished responses, idle connections, end of file)."""

    def __init__(self, chan: socket.socket, job: dict, t_start: float) -> None:
        self._chan = chan
        self._pool = Pool(Endpoint(job["host"], job["port"]), job["connect_timeout_s"])
        self._finished = 0
        self._pacer = Pacer(sleep=self._nap)
        requests = job["requests"]
        self._sender = Sender(job["schedule"], t_start, self._pool,
                              lambda i: requests[i % len(requests)], self._hand_off,
                              self._count_finished, job["max_in_flight"], self._pacer)

    def run(self) -> None:
        try:
            self._sender.run()
            if not self._pacer.stop.is_set():
                _send(self._chan, ("end",))
        except (BrokenPipeError, ConnectionResetError):
            pass  # the parent is gone: so is the reason to send
        finally:
            self._pool.close()

    def _nap(self, seconds: float) -> None:
        """Sleep `seconds`, or less when the parent sends something (then take it in)."""
        if select.select([self._chan], [], [], seconds)[0]:
            self._take_news()

    def _take_news(self) -> None:
        while True:
            try:
                got = _recv(self._chan, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                got = None
            if got is None:  # the parent ended the load, or died
                self._pacer.stop.set()
                return
            match got:
                case (("done",), _):
                    self._finished += 1
                case (("idle",), sock) if sock is not None:
                    self._pool.give(sock)

    def _count_finished(self) -> int:
        self._take_news()  # a response may have ended since the last nap
        return self._finished

    def _hand_off(self, item: Sent | Unsent) -> None:
        match item:
            case Sent(index, due_s, sent, sock):
                try:
                    _send(self._chan, ("sent", index, due_s, sent), sock)
                finally:
                    sock.close()  # the parent has its own descriptor now
            case Unsent(index, due_s, at, kind, message):
                _send(self._chan, ("unsent", index, due_s, at, kind, message))


def main() -> None:
    # Ctrl-C reaches the whole process group: the parent ends this child by closing the channel.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chan = socket.socket(fileno=int(sys.argv[1]))
    job = pickle.load(sys.stdin.buffer)
    gc.freeze()  # what exists now is never garbage: keep it out of any collection's scan
    _send(chan, ("ready", realtime()))
    got = _recv(chan)
    if got is None:
        return
    (_, t_start), _ = got
    _Child(chan, job, t_start).run()


if __name__ == "__main__":
    main()
