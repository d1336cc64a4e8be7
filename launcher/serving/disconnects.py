"""A client that goes away mid-request: its request is cancelled, not left running, and a stream
that fails after its headers went out ends unterminated, so the client sees the failure. Both
streaming endpoints (`http`, `captions`) send their bodies through `streamed`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request

from launcher.control.request_table import SpeechRequest
from launcher.errors import RequestFailed


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


async def first_of(request: Request, handle: SpeechRequest, items: AsyncIterator[Any]) -> Any:
    """The stream's first item (None: it has none), waited for before the response starts, so
    that a failure still gets a status code; raises the request's failure, or the disconnect."""
    return await unless_gone(request, handle, anext(items, None))


async def streamed(handle: SpeechRequest, first: Any, items: AsyncIterator[Any],
                   render: Callable[[Any], bytes]) -> AsyncIterator[bytes]:
    """A streamed body: `first`, then each next item as it comes (awaited: the thread that feeds
    the handle wakes the loop), each as `render` writes it (an empty rendering sends nothing). A
    failure now, when the status is gone, aborts the stream unterminated; a request left
    unfinished (its client gone) is cancelled at once."""
    try:
        item = first
        while item is not None:
            if data := render(item):
                yield data
            item = await anext(items, None)
    except RequestFailed as exc:
        raise StreamAborted(str(exc)) from None
    finally:
        if not handle.done:
            handle.cancel()
