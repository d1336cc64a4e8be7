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
"""

from __future__ import annotations

import asyncio

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT_S = 10.0
BODY_IDLE_S = 10.0
KEEP_ALIVE_S = 5.0

_TIMEOUT_408 = (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\n"
                b"connection: close\r\ncontent-length: 16\r\n\r\nrequest timeout\n")


def guarded(head_s: float = HEAD_TIMEOUT_S, body_s: float = BODY_IDLE_S) -> type[H11Protocol]:
    class GuardedH11(H11Protocol):
        _guard: asyncio.TimerHandle | None = None
        _guarding: str | None = None  # "head" | "body"

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm("head", head_s)  # also a connection that never sends a byte

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._follow()

        def on_response_complete(self) -> None:
            self._disarm()  # idle now: the keep-alive timer that uvicorn sets governs
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _follow(self) -> None:
            state = self.conn.their_state
            if state is h11.IDLE:  # part of a head so far
                if self._guarding != "head":
                    self._arm("head", head_s)
            elif state is h11.SEND_BODY:
                self._arm("body", body_s)  # each byte of the body restarts it
            else:
                self._disarm()  # the request is complete

        def _arm(self, what: str, seconds: float) -> None:
            self._disarm()
            self._guarding = what
            self._guard = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._guard is not None:
                self._guard.cancel()
            self._guard, self._guarding = None, None

        def _expire(self) -> None:
            what, self._guard, self._guarding = self._guarding, None, None
            if self.transport.is_closing():
                return
            if what == "head" and self.conn.their_state is h11.IDLE \
                    and self.conn.our_state is h11.IDLE:
                self.transport.write(_TIMEOUT_408)
            self.transport.close()

    return GuardedH11
