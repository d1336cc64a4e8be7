"""The bench's HTTP/1.1 client: just enough of the protocol to POST a speech request and read
its answer, whole or streamed, at a small fraction of a general client's CPU per request.

Why not httpx: on a 2-core machine the load generator shares the CPUs with the server it
measures, and httpx spends ~4 ms of CPU per streamed request. Every millisecond the client
spends is taken from the server, and, worse, delays the next request due (see `arrivals`).
This client parses a response with a handful of `bytes` operations per network read.

What it speaks: plain `http://` to one host, `Content-Length`, chunked or close-delimited
bodies, keep-alive (a connection goes back to the pool only after a complete response that
did not ask to close). No TLS, redirects, proxies, compression or 1xx responses: the bench
talks to the server it started, or to one a user named with `--url` on a reachable host.
"""

from __future__ import annotations

import asyncio
import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

HEAD_LIMIT = 64 * 1024  # a response head longer than this is a protocol error
# An idle connection older than this is closed rather than reused: well inside uvicorn's
# 5 s keep-alive timeout, so a request is never written to a connection the server is closing.
MAX_IDLE_S = 1.0


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response this client understands."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"the bench speaks plain http://host:port only, not {url!r}")
        return cls(parts.hostname, parts.port or 80)

    def connect(self, timeout_s: float) -> socket.socket:
        """A connection in blocking mode (with `timeout_s`), for a thread."""
        sock = socket.create_connection((self.host, self.port), timeout=timeout_s)
        # A request is one small write; never hold it back waiting for an ACK (Nagle).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    async def connect_async(self, timeout_s: float) -> socket.socket:
        """A connection in non-blocking mode, for the running event loop."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.get_running_loop().sock_connect(sock, (self.host, self.port))
        except BaseException:
            sock.close()
            raise
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock


class Pool:
    """Idle keep-alive connections to one endpoint, shared by the thread that writes requests
    and the event loop that reads responses (hence the lock)."""

    def __init__(self, endpoint: Endpoint, connect_timeout_s: float,
                 max_idle_s: float = MAX_IDLE_S) -> None:
        self.endpoint = endpoint
        self.connect_timeout_s = connect_timeout_s
        self._max_idle_s = max_idle_s
        self._idle: deque[tuple[socket.socket, float]] = deque()
        self._lock = threading.Lock()

    def take(self) -> socket.socket | None:
        """The freshest idle connection the server has not closed, or None."""
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock, since = self._idle.pop()
            if time.monotonic() - since < self._max_idle_s and not _closed_by_peer(sock):
                return sock
            sock.close()

    def connect(self) -> socket.socket:
        return self.endpoint.connect(self.connect_timeout_s)

    def give(self, sock: socket.socket) -> None:
        with self._lock:
            self._idle.append((sock, time.monotonic()))

    def fill(self, count: int) -> None:
        """Open connections until `count` are idle (ahead of requests about to be due)."""
        while self.idle < count:
            self.give(self.connect())

    @property
    def idle(self) -> int:
        return len(self._idle)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = list(self._idle), deque()
        for sock, _ in idle:
            sock.close()


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle connection with something to read has been closed (or broken) by the server."""
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    return bool(poll.poll(0))


def post_json(endpoint: Endpoint, path: str, body: dict,
              headers: Sequence[tuple[str, str]] = ()) -> bytes:
    """The bytes of one POST of `body` as JSON to `path` (with `headers` beside the framing),
    ready to write."""
    data = json.dumps(body).encode()
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host  # IPv6
    more = "".join(f"{name}: {value}\r\n" for name, value in headers)
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{endpoint.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            f"Accept-Encoding: identity\r\n{more}\r\n")
    return head.encode("latin-1") + data


@dataclass
class Response:
    """An HTTP/1.1 response read incrementally: `feed` each network read, get its body bytes.

    After the head, `status` and `headers` (lower-case names) are set; `done` once the body is
    complete (for a close-delimited body, only `finish` at end of stream completes it).
    """

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    done: bool = False
    _buf: bytes = b""
    _left: int | None = None  # bytes left of the current chunk / the whole body
    _chunked: bool = False
    _state: str = "head"  # head, body, size, data, crlf, trailer

    @property
    def reusable(self) -> bool:
        """Whether the connection may carry another request."""
        return (self.done and self.headers.get("connection", "").lower() != "close"
                and self._state != "eof")

    def feed(self, data: bytes) -> list[bytes]:
        """Consume one read; return the body bytes it held (transfer framing removed)."""
        buf = self._buf + data if self._buf else data
        self._buf = b""
        out: list[bytes] = []
        pos = 0
        while pos < len(buf) and not self.done:
            if self._state == "head":
                end = buf.find(b"\r\n\r\n", pos)
                if end < 0:
                    if len(buf) - pos > HEAD_LIMIT:
                        raise ProtocolError("response head too long")
                    break
                self._head(buf[pos:end])
                pos = end + 4
            elif self._state == "body":  # Content-Length or close-delimited
                take = len(buf) - pos if self._left is None else min(self._left, len(buf) - pos)
                out.append(buf[pos:pos + take])
                pos += take
                if self._left is not None:
                    self._left -= take
                    self.done = self._left == 0
            elif self._state == "data":
                take = min(self._left, len(buf) - pos)  # type: ignore[type-var]
                out.append(buf[pos:pos + take])
                pos += take
                self._left -= take  # type: ignore[operator]
                if self._left == 0:
                    self._state = "crlf"
            else:  # a line: a chunk size, the CRLF after a chunk, or a trailer
                end = buf.find(b"\r\n", pos)
                if end < 0:
                    break
                line, pos = buf[pos:end], end + 2
                self._line(line)
        self._buf = buf[pos:] if not self.done else b""
        return out

    def finish(self) -> None:
        """The server closed the connection: complete a close-delimited body, or fail."""
        if self._state == "body" and self._left is None:
            self.done, self._state = True, "eof"
        elif not self.done:
            raise ProtocolError("the server closed the connection mid-response")

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        self.status = int(code)
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            self._chunked, self._state = True, "size"
        elif "content-length" in self.headers:
            try:
                self._left, self._state = int(self.headers["content-length"]), "body"
            except ValueError:
                raise ProtocolError("a Content-Length that is not a number") from None
            self.done = self._left == 0
        else:
            self._state = "body"  # to the end of the connection

    def _line(self, line: bytes) -> None:
        if self._state == "size":
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise ProtocolError(f"not a chunk size: {line[:40]!r}") from None
            self._left, self._state = size, ("data" if size else "trailer")
        elif self._state == "crlf":
            if line:
                raise ProtocolError("a chunk is longer than its size")
            self._state = "size"
        elif not line:  # the blank line after the (usually absent) trailers
            self.done = True
