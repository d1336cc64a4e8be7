"""A client that goes away mid-request: its request is cancelled, not left running, and a stream
that fails after its headers went out ends unterminated, so the client sees the failure."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

from starlette.requests import ClientDisconnect, Request

from launcher.control.request_table import SpeechRequest


class StreamAborted(Exception):
    """A streamed response failed after its headers went out: the connection is closed without
    the final chunk, so the client sees a truncated body, not a complete short one."""


async def unless_gone(request: Request, handle: SpeechRequest, work: Awaitable) -> object:
    """The result of `work`; if the client goes away first, its request is cancelled (in every
    process that holds it) and the disconnect is raised for `_ClientDisconnects` to log."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    handle.cancel()  # the waiting thread then gets the cancellation and ends
    task.add_done_callback(lambda t: t.cancelled() or t.exception())  # retrieved: no warning
    raise ClientDisconnect()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone away (the body has been read: the only message left
    for this request is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
