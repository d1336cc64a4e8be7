"""A speech endpoint with known timings, for the load generator's tests: a real HTTP/1.1 server
on 127.0.0.1 in a thread of the test process (the bench's client speaks to sockets, so a fake
transport cannot stand in for it), answering the n-th request with `handler(n)`."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self


@dataclass(frozen=True)
class Reply:
    """How to answer one request: the head at once, the first body bytes after `first_s`,
    then each chunk followed by its wait. `hang_up`: close the connection without a word."""

    status: int = 200
    first_s: float = 0.0
    chunks: tuple[tuple[bytes, float], ...] = ()
    chunked: bool = True  # else one Content-Length body, sent after first_s
    hang_up: bool = False
    headers: tuple[tuple[str, str], ...] = (("x-sample-rate", "24000"),)  # beside the framing


class StubServer:
    def __init__(self, handler: Callable[[int], Reply]) -> None:
        self._handler = handler
        self._count = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stub-server", daemon=True)
        self.url = ""
        self.heads: list[bytes] = []  # each request's head, as it arrived

    def __enter__(self) -> Self:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        server = self._loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:  # keep-alive: one request after another on this connection
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                self.heads.append(head)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                reply = self._handler(next(self._count))
                if reply.hang_up:
                    return
                await self._answer(reply, writer)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @staticmethod
    async def _answer(reply: Reply, writer: asyncio.StreamWriter) -> None:
        head = f"HTTP/1.1 {reply.status} Stub\r\n" + "".join(f"{k}: {v}\r\n"
                                                           for k, v in reply.headers)
        if not reply.chunked:
            body = b"".join(data for data, _ in reply.chunks)
            await asyncio.sleep(reply.first_s)
            writer.write(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            return
        writer.write(f"{head}Transfer-Encoding: chunked\r\n\r\n".encode())
        await writer.drain()
        await asyncio.sleep(reply.first_s)
        for data, wait in reply.chunks:
            if data:
                writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                await writer.drain()
            if wait:
                await asyncio.sleep(wait)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
