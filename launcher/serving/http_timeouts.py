"""Read timeouts for the HTTP server: uvicorn's h11 protocol bounds only the idle time between
requests on a kept-alive connection; a client that sends half a request head, or stops in the
middle of its body, held its connection (and its slot) for ever: 1,500 such stayed open.

`guarded(head_s, body_s)` is the protocol class `serve` gives uvicorn:
- the request head must be complete within `head_s` of the connection opening (or of its first
  byte, after a kept-alive response): a fixed deadline, so dripping bytes does not extend it;
- while the body is read, `body_s` of silence closes the connection (every byte restarts it);
- once the request is complete, the response takes as long as it takes, and between requests
  uvicorn's own keep-alive bound (`KEEP_ALIVE_S`) applies.
A connection closed for its head gets a 408 first; one closed mid-body is only closed (the
handler sees the client as gone).

It is uvicorn's httptools protocol (llhttp, a C parser) where httptools is installed (the serve
extra has it): h11's pure-Python parsing and writing took close to half of the front door's
event-loop CPU per request (docs/performance.md); else uvicorn's h11 protocol, guarded alike.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_S = 10.0
BODY_IDLE_S = 10.0
KEEP_ALIVE_S = 5.0

_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                b"connection: close\r\ncontent-length: 16\r\n\r\nrequest timeout\n")


def guarded(head_s: float = HEAD_TIMEOUT_S, body_s: float = BODY_IDLE_S) -> type[Any]:
    try:
        return _guarded_httptools(head_s, body_s)
    except ImportError:
        return _guarded_h11(head_s, body_s)


class _Guard:
    """The deadline of one connection's head or body: one timer on the event loop."""

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self.handle: asyncio.TimerHandle | None = None
        self.what: str | None = None  # "head" | "body"

    def arm(self, what: str, seconds: float) -> None:
        self.disarm()
        self.what = what
        self.handle = self.protocol.loop.call_later(seconds, self._expire)

    def disarm(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.handle, self.what = None, None

    def _expire(self) -> None:
        what, self.handle, self.what = self.what, None, None
        transport = self.protocol.transport
        if transport.is_closing():
            return
        if what == "head" and self.protocol.idle():
            transport.write(_TIMEOUT_408)
        transport.close()


class _Deadlines:
    """What both protocols do alike: the head's deadline from the connection's opening, none
    once a response is complete (uvicorn's keep-alive bound governs), none once it is lost."""

    head_s: float
    body_s: float

    def connection_made(self, transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._guard = _Guard(self)
        self._guard.arm("head", self.head_s)  # also a connection that never sends a byte

    def on_response_complete(self) -> None:
        self._guard.disarm()
        super().on_response_complete()  # type: ignore[misc]

    def connection_lost(self, exc: Exception | None) -> None:
        self._guard.disarm()
        super().connection_lost(exc)  # type: ignore[misc]


def _guarded_httptools(head_s: float, body_s: float) -> type[Any]:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpTools(_Deadlines, HttpToolsProtocol):
        def on_message_begin(self) -> None:  # the first byte of a request head
            super().on_message_begin()
            if self._guard.what != "head":
                self._guard.arm("head", self.head_s)

        def on_headers_complete(self) -> None:
            super().on_headers_complete()
            self._guard.arm("body", self.body_s)  # until on_message_complete (maybe at once)

        def on_body(self, body: bytes) -> None:
            super().on_body(body)
            self._guard.arm("body", self.body_s)  # each byte of the body restarts it

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._guard.disarm()  # the request is complete

        def idle(self) -> bool:
            """No request is being answered: a 408 cannot cut into a response."""
            return self.cycle is None or self.cycle.response_complete

    GuardedHttpTools.head_s, GuardedHttpTools.body_s = head_s, body_s
    return GuardedHttpTools


def _guarded_h11(head_s: float, body_s: float) -> type[H11Protocol]:
    class GuardedH11(_Deadlines, H11Protocol):
        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            state = self.conn.their_state
            if state is h11.IDLE:  # part of a head so far
                if self._guard.what != "head":
                    self._guard.arm("head", self.head_s)
            elif state is h11.SEND_BODY:
                self._guard.arm("body", self.body_s)  # each byte of the body restarts it
            else:
                self._guard.disarm()  # the request is complete

        def idle(self) -> bool:
            """No request is being answered: a 408 cannot cut into a response."""
            return self.conn.their_state is h11.IDLE and self.conn.our_state is h11.IDLE

    GuardedH11.head_s, GuardedH11.body_s = head_s, body_s
    return GuardedH11
