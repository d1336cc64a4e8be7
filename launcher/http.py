"""The HTTP front door: an OpenAI-style speech endpoint plus health, topology and metrics.

Request limits (documented; each violation is a 4xx with a JSON message, never a 500):
- `input`: a non-empty string of at most `MAX_INPUT_CHARS` (4096) characters -> else 400;
- `response_format`: `wav` (default) or `pcm` (raw 16-bit little-endian mono at 24 kHz) -> else 400;
- `voice`, `model`: strings when present; `stream`: a boolean -> else 400;
- a body that is not a JSON object -> 400; a body over `MAX_BODY_BYTES` (1 MiB) -> 413.
`model` is accepted as any string (OpenAI clients send their own names); the served model is the
plan's. Worker failures answer 503 (process died or restarting), stage errors 500, timeouts 504.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from .audio import SAMPLE_RATE, pcm16, wav_header
from .deployment import Deployment
from .errors import RequestFailed

MAX_INPUT_CHARS = 4096
MAX_BODY_BYTES = 1 << 20
REQUEST_TIMEOUT_S = 120.0
MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm"}


def _error(status: int, message: str, code: str) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status)


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.response = _error(status, message, code)


async def _parse(request: Request, max_input_chars: int) -> dict[str, Any]:
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
        raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes", "body_too_large")
    raw = await request.body()
    if len(raw) > MAX_BODY_BYTES:
        raise _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes", "body_too_large")
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _BadRequest(400, f"body is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(body, dict):
        raise _BadRequest(400, "body must be a JSON object", "invalid_json")
    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        raise _BadRequest(400, "'input' is required: a non-empty string", "missing_input")
    if len(text) > max_input_chars:
        raise _BadRequest(400, f"'input' has {len(text)} characters; the limit is "
                               f"{max_input_chars}", "input_too_long")
    fmt = body.get("response_format", "wav")
    if fmt not in MEDIA_TYPES:
        raise _BadRequest(400, f"unsupported response_format {fmt!r}; use one of "
                               f"{', '.join(MEDIA_TYPES)}", "unsupported_response_format")
    for key in ("voice", "model"):
        if body.get(key) is not None and not isinstance(body[key], str):
            raise _BadRequest(400, f"'{key}' must be a string", f"invalid_{key}")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise _BadRequest(400, "'stream' must be true or false", "invalid_stream")
    return {"input": text, "format": fmt, "voice": body.get("voice"), "stream": stream}


def create_app(deployment: Deployment, topology: Mapping[str, Any], *,
               max_input_chars: int = MAX_INPUT_CHARS,
               request_timeout: float = REQUEST_TIMEOUT_S) -> Starlette:
    """The ASGI app for `deployment`; `topology` is served as-is at /v1/topology."""

    async def speech(request: Request) -> Response:
        try:
            req = await _parse(request, max_input_chars)
        except _BadRequest as bad:
            return bad.response
        headers = {"X-Sample-Rate": str(SAMPLE_RATE)}
        media = MEDIA_TYPES[req["format"]]
        try:
            handle = deployment.submit(req["input"], req["voice"], stream=req["stream"])
        except RequestFailed as exc:
            return _error(exc.status, str(exc), type(exc).__name__)
        if not req["stream"]:
            try:
                audio = await run_in_threadpool(handle.result, request_timeout)
            except RequestFailed as exc:
                return _error(exc.status, str(exc), type(exc).__name__)
            body = audio.wav() if req["format"] == "wav" else audio.pcm16()
            return Response(body, media_type=media, headers=headers)

        chunks = handle.chunks(request_timeout)
        try:
            # Wait for the first chunk here, so that a failure still gets a status code.
            first = await run_in_threadpool(next, chunks, None)
        except RequestFailed as exc:
            return _error(exc.status, str(exc), type(exc).__name__)

        async def body():
            try:
                if req["format"] == "wav":
                    yield wav_header(SAMPLE_RATE, None)
                chunk = first
                while chunk is not None:
                    yield pcm16(chunk)
                    chunk = await run_in_threadpool(next, chunks, None)
            except RequestFailed:
                return  # headers are gone; a short body is how a stream reports failure
            finally:
                if not handle.done:
                    handle.cancel()

        return StreamingResponse(body(), media_type=media, headers=headers)

    async def health(request: Request) -> Response:
        report = deployment.health()
        return JSONResponse(report, 200 if report["status"] == "ok" else 503)

    async def topology_view(request: Request) -> Response:
        return JSONResponse(dict(topology))

    async def metrics(request: Request) -> Response:
        return PlainTextResponse(deployment.metrics_text(),
                                 media_type="text/plain; version=0.0.4")

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return _error(exc.status_code, exc.detail or "error", "http_error")

    async def unexpected(request: Request, exc: Exception) -> Response:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}", "internal_error")

    return Starlette(
        routes=[
            Route("/v1/audio/speech", speech, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
            Route("/v1/topology", topology_view, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: unexpected},
    )
