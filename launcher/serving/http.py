"""The HTTP front door: an OpenAI-style speech endpoint, the model and voice lists (`catalog`),
health, topology and metrics.

Request limits (documented; each violation is a 4xx with a JSON message naming the field, never a
500, and the connection stays usable):
- the body: JSON (strict: no NaN/Infinity, nesting the parser can handle) that is an object -> else
  400; over `MAX_BODY_BYTES` (1 MiB) -> 413;
- `input`: a non-empty string of at most `MAX_INPUT_CHARS` (4096) characters that is valid Unicode
  (encodable as UTF-8: no lone surrogates such as a JSON "\\ud800") and has something to speak: a
  letter or digit of any script ("." or "?!" alone would be zero samples) -> else 400;
- `response_format`: `wav` (default), `pcm` (raw 16-bit little-endian mono at the card's sample
  rate, `X-Sample-Rate`), `flac` or `mp3` (with soundfile, see `encode`; not with `stream`) -> else
  400;
- `voice`: a string of valid Unicode, one of the card's `voices` (or `default`, or for a card of
  one voice an OpenAI voice name such as `alloy`) when it lists them; `model`: one of the names
  `GET /v1/models` lists (the card's name, its model paths, OpenAI's
  `tts-1`-style names; see `catalog`) or absent; `stream`: a boolean; `speed`: a number from 0.25
  to 4.0 (OpenAI's range; sent to the stages only when given) -> else 400.
  A `null` optional field is the same as an absent one; unknown fields are ignored.
Every field is type-checked before it is used, and no stage sees a request that fails a check.
A request beyond the deployment's admission bound (`launcher.control.admission`) answers 429, and
worker failures 503 (process died or restarting), both with a `Retry-After` header (a server
that is shutting down or has failed says `Connection: close` instead: no retry would help); stage
errors 500, timeouts 504. A stream that fails after its headers went out is aborted: the
connection closes without the final chunk, so clients raise instead of taking a short body for a
whole one. A client that goes away mid-request is one log line (a warning, not an error: its
request is cancelled as intended), not a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Mapping
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from launcher.serving import encode
from launcher.serving.catalog import Catalog
from launcher.audio import MAX_SPEED, MIN_SPEED, pcm16, wav_header
from launcher.errors import RequestFailed
from launcher.facade import DeploymentFacade
from launcher.serving.limits import MAX_BODY_BYTES, MAX_INPUT_CHARS, REQUEST_TIMEOUT_S
from launcher.control.request_table import SpeechRequest

MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm",
               **{f: media for f, (_, _, media) in encode.COMPRESSED.items()}}

log = logging.getLogger(__name__)


def _error(status: int, message: str, code: str,
           headers: Mapping[str, str] | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    # A message may quote a stage's error text; JSONResponse encodes UTF-8 strictly.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status,
                        headers=headers)


def _refusal_headers(deployment: DeploymentFacade) -> dict[str, str]:
    """How a 429 or 503 tells the client what to do: when to try again, or, from a server that is
    going away, nothing to wait for (and this connection closes)."""
    if deployment.state.going_away:
        return {"Connection": "close"}
    return {"Retry-After": str(deployment.retry_after())}


def _failed(exc: RequestFailed, deployment: DeploymentFacade) -> JSONResponse:
    """A request the deployment could not serve; a 429 (admission control) or 503 says when to
    try again, unless the server is going away."""
    headers = _refusal_headers(deployment) if exc.status in (429, 503) else None
    return _error(exc.status, str(exc), type(exc).__name__, headers)


class _BadRequest(Exception):
    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.response = _error(status, message, code)


def _kind(value: Any) -> str:
    """What a JSON value is, for messages that must not echo (possibly huge) client data."""
    match value:
        case None:
            return "null"
        case bool():
            return "a boolean"
        case int() | float():
            return "a number"
        case str():
            return "a string"
        case list():
            return "an array"
        case _:
            return "an object"


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "...")  # repr escapes surrogates
    return _kind(value)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _unicode(field: str, value: str) -> None:
    """Stages get text they can encode: a lone surrogate (JSON "\\ud800") is not Unicode text."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _BadRequest(400, f"'{field}' is not valid Unicode text: it has a lone surrogate "
                               f"U+{ord(value[exc.start]):04X} at character {exc.start}",
                          f"invalid_{field}") from None


def _too_large() -> _BadRequest:
    # Made only when needed: a refusal builds its JSON response, which every request would pay.
    return _BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes", "body_too_large")


async def _read(request: Request) -> bytes:
    length = request.headers.get("content-length")
    if length is not None and length.isascii() and length.isdigit() \
            and int(length) > MAX_BODY_BYTES:
        raise _too_large()
    parts, size = [], 0
    async for part in request.stream():  # also bounds a chunked body that gives no length
        size += len(part)
        if size > MAX_BODY_BYTES:
            raise _too_large()
        parts.append(part)
    return b"".join(parts)


async def _parse(request: Request, max_input_chars: int, catalog: Catalog) -> dict[str, Any]:
    raw = await _read(request)
    try:
        body = json.loads(raw, parse_constant=_no_constants)
    except RecursionError:
        raise _BadRequest(400, "body nests arrays or objects too deeply to parse; send a JSON "
                               "object", "invalid_json") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise _BadRequest(400, f"body is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(body, dict):
        raise _BadRequest(400, f"body must be a JSON object, not {_kind(body)}", "invalid_json")

    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        got = ("" if text is None else ", not a blank string" if isinstance(text, str)
               else f", not {_kind(text)}")
        raise _BadRequest(400, f"'input' is required: a non-empty string{got}", "missing_input")
    if len(text) > max_input_chars:
        raise _BadRequest(400, f"'input' has {len(text)} characters; the limit is "
                               f"{max_input_chars}", "input_too_long")
    _unicode("input", text)
    if not any(c.isalnum() for c in text):
        raise _BadRequest(400, f"'input' {_shown(text)} has nothing to speak: no letter or digit "
                               "in any script; send words or numbers", "nothing_to_speak")

    fmt = body.get("response_format")
    fmt = "wav" if fmt is None else fmt
    if not isinstance(fmt, str) or fmt not in MEDIA_TYPES:
        raise _BadRequest(400, f"'response_format' must be one of {', '.join(MEDIA_TYPES)}, not "
                               f"{_shown(fmt)}", "unsupported_response_format")
    if fmt in encode.COMPRESSED and (why := encode.available()) is not None:
        raise _BadRequest(400, f"'response_format' {fmt} {why}; or ask for wav or pcm",
                          "unsupported_response_format")
    for key in ("voice", "model"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise _BadRequest(400, f"'{key}' must be a string, not {_kind(value)}",
                              f"invalid_{key}")
    voice, model = body.get("voice"), body.get("model")
    if voice is not None:
        _unicode("voice", voice)
        if (why := catalog.voice_problem(voice)) is not None:
            raise _BadRequest(400, why, "invalid_voice")
        voice = catalog.voice_for(voice)
    if model is not None and (why := catalog.model_problem(model)) is not None:
        raise _BadRequest(400, why, "model_not_found")
    stream = body.get("stream")
    stream = False if stream is None else stream
    if not isinstance(stream, bool):
        raise _BadRequest(400, f"'stream' must be true or false, not {_shown(stream)}",
                          "invalid_stream")
    if stream and fmt in encode.COMPRESSED:
        raise _BadRequest(400, f"'stream' is not available with 'response_format' {fmt} (its "
                               "encoder writes the header last); stream wav or pcm",
                          "invalid_stream")
    speed = body.get("speed")
    if speed is not None and (isinstance(speed, bool) or not isinstance(speed, int | float)
                              or not MIN_SPEED <= speed <= MAX_SPEED):
        raise _BadRequest(400, f"'speed' must be a number from {MIN_SPEED} to {MAX_SPEED}, not "
                               f"{speed if isinstance(speed, int | float) else _shown(speed)}",
                          "invalid_speed")
    options = {} if speed is None else {"speed": float(speed)}
    return {"input": text, "format": fmt, "voice": voice, "stream": stream, "options": options}


class _StreamAborted(Exception):
    """A streamed response failed after its headers went out: the connection is closed without
    the final chunk, so the client sees a truncated body, not a complete short one."""


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
        except _StreamAborted as exc:
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


async def _unless_gone(request: Request, handle: SpeechRequest, work: Awaitable) -> object:
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


def create_app(deployment: DeploymentFacade, topology: Mapping[str, Any], *,
               max_input_chars: int = MAX_INPUT_CHARS,
               request_timeout: float = REQUEST_TIMEOUT_S) -> Starlette:
    """The ASGI app for `deployment`; `topology` is served as-is at /v1/topology."""

    sample_rate = deployment.plan.sample_rate
    catalog = Catalog.of(deployment.plan, created=int(time.time()))

    async def speech(request: Request) -> Response:
        try:
            req = await _parse(request, max_input_chars, catalog)
        except _BadRequest as bad:
            return bad.response
        headers = {"X-Sample-Rate": str(sample_rate)}
        media = MEDIA_TYPES[req["format"]]
        try:
            if req["options"]:
                handle = deployment.submit(req["input"], req["voice"], stream=req["stream"],
                                           options=req["options"])
            else:
                handle = deployment.submit(req["input"], req["voice"], stream=req["stream"])
        except RequestFailed as exc:
            return _failed(exc, deployment)
        if not req["stream"]:
            try:
                audio = await _unless_gone(request, handle, handle.result_async(request_timeout))
            except RequestFailed as exc:
                return _failed(exc, deployment)
            if req["format"] in encode.COMPRESSED:
                body = await run_in_threadpool(encode.encode, audio.samples, sample_rate,
                                               req["format"])
            else:
                body = audio.wav() if req["format"] == "wav" else audio.pcm16()
            return Response(body, media_type=media, headers=headers)

        chunks = handle.chunks_async(request_timeout)
        try:
            # Wait for the first chunk here, so that a failure still gets a status code.
            first = await _unless_gone(request, handle, anext(chunks, None))
        except RequestFailed as exc:
            return _failed(exc, deployment)

        async def body():
            try:
                if req["format"] == "wav":
                    yield wav_header(sample_rate, None)
                chunk = first
                while chunk is not None:
                    yield pcm16(chunk)
                    chunk = await anext(chunks, None)
            except RequestFailed as exc:
                # The status is gone: an unterminated body is how a stream reports failure.
                raise _StreamAborted(str(exc)) from None
            finally:
                if not handle.done:
                    handle.cancel()

        return StreamingResponse(body(), media_type=media, headers=headers)

    async def health(request: Request) -> Response:
        report = deployment.health()
        if report["status"] == "ok":
            return JSONResponse(report)
        return JSONResponse(report, 503, headers=_refusal_headers(deployment))

    async def models(request: Request) -> Response:
        return JSONResponse(catalog.models_json())

    async def model(request: Request) -> Response:
        name = request.path_params["name"]
        if (found := catalog.model_json(name)) is not None:
            return JSONResponse(found)
        return _error(404, catalog.model_problem(name) or f"no model {name!r} here",
                      "model_not_found")

    async def voices(request: Request) -> Response:
        return JSONResponse(catalog.voices_json())

    async def topology_view(request: Request) -> Response:
        return JSONResponse(dict(topology))

    async def metrics(request: Request) -> Response:
        body, content_type = deployment.metrics(request.headers.get("accept"))
        return Response(body, headers={"Content-Type": content_type})

    async def http_error(request: Request, exc: HTTPException) -> Response:
        return _error(exc.status_code, exc.detail or "error", "http_error")

    async def unexpected(request: Request, exc: Exception) -> Response:
        return _error(500, f"internal error: {type(exc).__name__}: {exc}", "internal_error")

    return Starlette(
        routes=[
            Route("/v1/audio/speech", speech, methods=["POST"]),
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
