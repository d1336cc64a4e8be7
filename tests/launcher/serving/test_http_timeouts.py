"""Read timeouts: a partial request is closed within its bound (a head cut short gets a 408), a
complete request takes as long as its handler needs. A real uvicorn server, bounds of 0.5 s."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from launcher.serving import http_timeouts

from tests.waiting import wait_until

BOUND_S = 0.5


async def slow_echo(request: Request) -> PlainTextResponse:
    body = await request.body()
    await asyncio.sleep(3 * BOUND_S)  # longer than any read bound: the response is not limited
    return PlainTextResponse(body.decode())


# `guarded` serves httptools' protocol where httptools is installed, h11's where not: both kept.
PROTOCOLS = {"httptools": http_timeouts._guarded_httptools, "h11": http_timeouts._guarded_h11}


def test_guarded_is_the_httptools_protocol_where_httptools_is_installed():
    pytest.importorskip("httptools")
    assert http_timeouts.guarded().__name__ == "GuardedHttpTools"


@pytest.fixture(scope="module", params=sorted(PROTOCOLS))
def address(request):
    app = Starlette(routes=[Route("/", slow_echo, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    if request.param == "httptools":
        pytest.importorskip("httptools")
    config = uvicorn.Config(app, log_level="error", lifespan="off",
                            http=PROTOCOLS[request.param](BOUND_S, BOUND_S),
                            timeout_keep_alive=BOUND_S)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_until(lambda: server.started, 10, fail=False)
    yield sock.getsockname()
    server.should_exit = True
    thread.join(10)
    sock.close()


def closed_after(address, *parts: bytes, gap: float = 0.0) -> tuple[bytes, float]:
    """Send `parts` (with `gap` s between them), then read until the server closes: what it
    said, and how long after connecting it closed (the test fails past 10 s)."""
    with socket.create_connection(address) as c:
        c.settimeout(10)
        start = time.monotonic()
        try:
            for part in parts:
                c.sendall(part)
                time.sleep(gap)
        except OSError:
            pass  # closed while we were still dripping
        got = b""
        while chunk := c.recv(4096):
            got += chunk
        return got, time.monotonic() - start


HEAD = b"POST / HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n"


def test_a_connection_that_says_nothing_is_closed_with_a_408(address):
    said, after = closed_after(address)
    assert said.startswith(b"HTTP/1.1 408 ") and after < 5


def test_a_head_cut_short_is_closed_and_dripping_does_not_extend_it(address):
    said, after = closed_after(address, *[bytes([b]) for b in HEAD[:30]], gap=BOUND_S / 5)
    assert said.startswith(b"HTTP/1.1 408 ") and after < 5


def test_a_body_that_stops_is_closed_without_an_answer(address):
    said, after = closed_after(address, HEAD + b"abc")
    assert said == b"" and after < 5


def test_a_complete_request_takes_as_long_as_its_handler_then_keep_alive_is_bounded(address):
    said, after = closed_after(address, HEAD + b"0123456789")
    assert said.startswith(b"HTTP/1.1 200 ") and said.endswith(b"0123456789")
    assert after >= 3 * BOUND_S  # answered after the slow handler, then closed when idle
