"""The HTTP front door: an OpenAI-style speech endpoint, captioned speech (`captions`), the
model and voice lists (`catalog`), health, topology and metrics.

A request body is checked field by field before any stage sees it (`speech_body`, which lists
the limits; each violation is a 4xx naming the field). A request beyond the deployment's
admission bound (`launcher.control.admission`) answers 429, and worker failures 503 (process died
or restarting), both with a `Retry-After` header (a server that is shutting down or has failed
says `Connection: close` instead: no retry would help); stage errors 500, timeouts 504. A stream
that fails after its headers went out is aborted: the connection closes without the final chunk,
so clients raise instead of taking a short body for a whole one. A client that goes away
mid-request is one log line (a warning, not an error: its request is cancelled as intended), not
a traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from launcher.audio import Audio, pcm16, wav_header
from launcher.facade import DeploymentFacade
from launcher.serving import captions, encode
from launcher.serving.catalog import Catalog
from launcher.serving.answer import Answer, answer
from launcher.serving.disconnects import StreamAborted
from launcher.serving.limits import MAX_INPUT_CHARS, REQUEST_TIMEOUT_S
from launcher.serving.speech_body import MEDIA_TYPES, BadRequest, error, parse, refusal_headers

__all__ = ["MAX_INPUT_CHARS", "MEDIA_TYPES", "create_app"]

log = logging.getLogger(__name__)


class _ClientDisconnects:
    """ASGI middleware: a client that goes away before its response is complete (mid-upload or
    mid-stream) is one log line, not a traceback; its request is cancelled by the handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen = {"gone": False, "complete": False, "bytes": 0}

        async def receive_() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                seen["gone"] = True
            return message

        async def send_(message: Message) -> None:
            try:
                await send(message)
            except OSError:  # how a server on ASGI spec 2.4 says the client is gone
                seen["gone"] = True
                raise
            if message["type"] == "http.response.body":
                seen["bytes"] += len(message.get("body", b""))
                seen["complete"] = not message.get("more_body", False)

        try:
            await self.app(scope, receive_, send_)
        except ClientDisconnect:
            seen["gone"] = True
        except StreamAborted as exc:
            # Returning without the last body message makes the server close the connection
            # with the chunked body unterminated: every HTTP client reports that as an error.
            log.warning("stream of %s %s aborted after %d bytes: %s", scope["method"],
                        scope["path"], seen["bytes"], exc)
            return
        except OSError:
            if not seen["gone"]:
                raise
        if seen["gone"] and not seen["complete"]:
            log.warning("client disconnected during %s %s after %d response bytes; request "
                        "dropped", scope["method"], scope["path"], seen["bytes"])


def create_app(deployment: DeploymentFacade, topology: Mapping[str, Any], *,
               max_input_chars: int = MAX_INPUT_CHARS,
               request_timeout: float = REQUEST_TIMEOUT_S) -> Starlette:
    """The ASGI app for `deployment`; `topology` is served as-is at /v1/topology."""

    sample_rate = deployment.plan.sample_rate
    catalog = Catalog.of(deployment.plan, created=int(time.time()))

    async def speech(request: Request) -> Response:
        try:
            req = await parse(request, max_input_chars, catalog)
        except BadRequest as bad:
            return bad.response
        fmt, timeout = req["format"], request_timeout
        headers = {"X-Sample-Rate": str(sample_rate)}
        head = [wav_header(sample_rate, None)] if fmt == "wav" else []

        async def respond(audio: Audio) -> Response:
            return Response(await encode.whole(audio, fmt), media_type=MEDIA_TYPES[fmt],
                            headers=headers)

        def render(chunk) -> bytes:
            return (head.pop() if head else b"") + pcm16(chunk)

        return await answer(request, deployment, req, req["options"], Answer(
            whole=lambda h: h.result_async(timeout), respond=respond,
            pieces=lambda h: h.chunks_async(timeout), render=render,
            media_type=MEDIA_TYPES[fmt]), headers)

    async def health(request: Request) -> Response:
        report = deployment.health()
        if report["status"] == "ok":
            return JSONResponse(report)
        return JSONResponse(report, 503, headers=refusal_headers(deployment))

    async def models(request: Request) -> Response:
        return JSONResponse(catalog.models_json())

    async def model(request: Request) -> Response:
        name = request.path_params["name"]
        if (found := catalog.model_json(name)) is not None:
            return JSONResponse(found)
        return error(404, catalog.model_problem(name) or f"no model {name!r} here",
                     "model_not_found")

    async def voices(request: Request) -> Response:
        return JSONResponse(catalog.voices_json())

    async def topology_view(request: Request) -> Response:
        return JSONResponse(dict(topology))

    async def metrics(request: Request) -> Response:
        body, content_type = deployment.metrics(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return error(exc.status_code, exc.detail or "error", "http_error")

    async def unexpected(request: Request, exc: Exception) -> Response:
        return error(500, f"internal error: {type(exc).__name__}: {exc}", "internal_error")

    return Starlette(
        routes=[
            Route("/v1/audio/speech", speech, methods=["POST"]),
            Route("/dev/captioned_speech", captions.endpoint(
                deployment, catalog, max_input_chars=max_input_chars,
                request_timeout=request_timeout), methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{name:path}", model, methods=["GET"]),
            Route("/v1/audio/voices", voices, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/topology", topology_view, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        middleware=[Middleware(_ClientDisconnects)],
        exception_handlers={HTTPException: http_error, Exception: unexpected},
    )
