"""One request's answer, whole or streamed, as both speech endpoints give it (`http`'s speech,
`captions`): submit it, and either await the whole result or start a stream once its first piece
is there. A failure before the status went out answers its status code (`speech_body.failed`),
a client gone away cancels the request (`disconnects`). What differs between the endpoints is
what they await and how they write it: the `Answer` each passes in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from launcher.control.request_table import SpeechRequest
from launcher.errors import RequestFailed
from launcher.facade import DeploymentFacade
from launcher.serving.disconnects import first_of, streamed, unless_gone
from launcher.serving.speech_body import failed

Whole = TypeVar("Whole")
Piece = TypeVar("Piece")


@dataclass(frozen=True)
class Answer(Generic[Whole, Piece]):
    """How an endpoint answers: `whole` awaits a whole response's result and `respond` writes
    it; `pieces` iterates a stream's pieces and `render` writes each (b"": nothing to send for
    it yet) in a body of `media_type`."""

    whole: Callable[[SpeechRequest], Awaitable[Whole]]
    respond: Callable[[Whole], Awaitable[Response]]
    pieces: Callable[[SpeechRequest], AsyncIterator[Piece]]
    render: Callable[[Piece], bytes]
    media_type: str


async def answer(request: Request, deployment: DeploymentFacade, req: Mapping[str, Any],
                 options: Mapping[str, Any] | None, how: Answer,
                 headers: Mapping[str, str]) -> Response:
    """Submit the parsed request `req` (`speech_body.parse`) and answer it as `how` says."""
    try:
        handle = deployment.submit(req["input"], req["voice"], stream=req["stream"],
                                   options=options or None)
    except RequestFailed as exc:
        return failed(exc, deployment)
    if not req["stream"]:
        try:
            result = await unless_gone(request, handle, how.whole(handle))
        except RequestFailed as exc:
            return failed(exc, deployment)
        return await how.respond(result)
    pieces = how.pieces(handle)
    try:
        first = await first_of(request, handle, pieces)
    except RequestFailed as exc:
        return failed(exc, deployment)
    return StreamingResponse(streamed(handle, first, pieces, how.render),
                             media_type=how.media_type, headers=dict(headers))
