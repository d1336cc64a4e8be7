"""The chaos tests' harness: a deployment served over real HTTP (uvicorn in a thread, as `serve`
configures it), client threads that post speech requests in a loop until stopped, and how a
client sees each request end."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import uvicorn

from launcher.serving.http_timeouts import guarded

from tests.waiting import wait_until

SPEECH = "/v1/audio/speech"


@contextmanager
def served(app, start_s: float = 30.0) -> Iterator[str]:
    """Serve `app` on a free local port while the block runs; yields its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off",
                                           http=guarded()))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        wait_until(lambda: server.started, start_s, "the server")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def speech_outcome(c: httpx.Client, body: dict, on_status=None) -> str:
    """Post one speech request and say how it ended, as a client sees it: "ok" (200 and some
    audio), "short" (200 and no audio), "refused" (429/503 with `Retry-After`), "<status>-bare"
    (one without it), "http-<status>" (any other status), "aborted" (the connection closed before
    the body was whole: how a stream reports a failure after its 200), "hang" (the client's
    timeout). `on_status(status)` is called once the status line is in, before the body."""
    try:
        with c.stream("POST", SPEECH, json=body) as r:
            if on_status is not None:
                on_status(r.status_code)
            data = r.read()
            if r.status_code == 200:
                return "ok" if len(data) > 44 else "short"
            if r.status_code in (429, 503):
                return "refused" if "retry-after" in r.headers else f"{r.status_code}-bare"
            return f"http-{r.status_code}"
    except httpx.RemoteProtocolError:
        return "aborted"
    except httpx.TimeoutException:
        return "hang"


class Load:
    """Client threads, each calling `one(client index)` in a loop until the block ends; what a
    call returns is appended to `outcomes`. Joined within `join_s` at the end (a client's request
    timeout and some)."""

    def __init__(self, one, clients: int, join_s: float) -> None:
        self.outcomes: list = []
        self.stop = threading.Event()
        self._one, self._join_s = one, join_s
        self._threads = [threading.Thread(target=self._client, args=(i,))
                         for i in range(clients)]

    def _client(self, i: int) -> None:
        while not self.stop.is_set():
            self.outcomes.append(self._one(i))

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self._threads:
            t.join(self._join_s)
        assert not any(t.is_alive() for t in self._threads), "a client thread hangs"
