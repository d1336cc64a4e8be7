"""The body of a speech request (`POST /v1/audio/speech`, and `/dev/captioned_speech`, which
takes the same fields and more), checked field by field, and the error answers of the front door.

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
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from launcher.audio import MAX_SPEED, MIN_SPEED
from launcher.errors import RequestFailed
from launcher.facade import DeploymentFacade
from launcher.serving import encode
from launcher.serving.catalog import Catalog
from launcher.serving.limits import MAX_BODY_BYTES

MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm",
               **{f: media for f, (_, _, media) in encode.COMPRESSED.items()}}


def error(status: int, message: str, code: str,
          headers: Mapping[str, str] | None = None) -> JSONResponse:
    kind = "invalid_request_error" if status < 500 else "server_error"
    # A message may quote a stage's error text; JSONResponse encodes UTF-8 strictly.
    message = message.encode("utf-8", "backslashreplace").decode("utf-8")
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status,
                        headers=headers)


def refusal_headers(deployment: DeploymentFacade) -> dict[str, str]:
    """How a 429 or 503 tells the client what to do: when to try again, or, from a server that is
    going away, nothing to wait for (and this connection closes)."""
    if deployment.state.going_away:
        return {"Connection": "close"}
    return {"Retry-After": str(deployment.retry_after())}


def failed(exc: RequestFailed, deployment: DeploymentFacade) -> JSONResponse:
    """A request the deployment could not serve; a 429 (admission control) or 503 says when to
    try again, unless the server is going away."""
    headers = refusal_headers(deployment) if exc.status in (429, 503) else None
    return error(exc.status, str(exc), type(exc).__name__, headers)


class BadRequest(Exception):
    def __init__(self, status: int, message: str, code: str) -> None:
        super().__init__(message)
        self.response = error(status, message, code)


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
        raise BadRequest(400, f"'{field}' is not valid Unicode text: it has a lone surrogate "
                              f"U+{ord(value[exc.start]):04X} at character {exc.start}",
                         f"invalid_{field}") from None


def _too_large() -> BadRequest:
    # Made only when needed: a refusal builds its JSON response, which every request would pay.
    return BadRequest(413, f"request body over {MAX_BODY_BYTES} bytes", "body_too_large")


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


async def parse(request: Request, max_input_chars: int, catalog: Catalog, *,
                stream_by_default: bool = False) -> dict[str, Any]:
    """The request's fields, checked (`BadRequest` names the first field that fails), and its
    whole JSON `body` for an endpoint's own fields. `stream_by_default`: an absent `stream` is
    true where the format can be streamed (Kokoro-FastAPI's default for captioned speech)."""
    raw = await _read(request)
    try:
        body = json.loads(raw, parse_constant=_no_constants)
    except RecursionError:
        raise BadRequest(400, "body nests arrays or objects too deeply to parse; send a JSON "
                              "object", "invalid_json") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, NaN/Infinity
        raise BadRequest(400, f"body is not valid JSON: {exc}", "invalid_json") from None
    if not isinstance(body, dict):
        raise BadRequest(400, f"body must be a JSON object, not {_kind(body)}", "invalid_json")

    text = body.get("input")
    if not isinstance(text, str) or not text.strip():
        got = ("" if text is None else ", not a blank string" if isinstance(text, str)
               else f", not {_kind(text)}")
        raise BadRequest(400, f"'input' is required: a non-empty string{got}", "missing_input")
    if len(text) > max_input_chars:
        raise BadRequest(400, f"'input' has {len(text)} characters; the limit is "
                              f"{max_input_chars}", "input_too_long")
    _unicode("input", text)
    if not any(c.isalnum() for c in text):
        raise BadRequest(400, f"'input' {_shown(text)} has nothing to speak: no letter or digit "
                              "in any script; send words or numbers", "nothing_to_speak")

    fmt = body.get("response_format")
    fmt = "wav" if fmt is None else fmt
    if not isinstance(fmt, str) or fmt not in MEDIA_TYPES:
        raise BadRequest(400, f"'response_format' must be one of {', '.join(MEDIA_TYPES)}, not "
                              f"{_shown(fmt)}", "unsupported_response_format")
    if fmt in encode.COMPRESSED and (why := encode.available()) is not None:
        raise BadRequest(400, f"'response_format' {fmt} {why}; or ask for wav or pcm",
                         "unsupported_response_format")
    for key in ("voice", "model"):
        value = body.get(key)
        if value is not None and not isinstance(value, str):
            raise BadRequest(400, f"'{key}' must be a string, not {_kind(value)}",
                             f"invalid_{key}")
    voice, model = body.get("voice"), body.get("model")
    if voice is not None:
        _unicode("voice", voice)
        if (why := catalog.voice_problem(voice)) is not None:
            raise BadRequest(400, why, "invalid_voice")
        voice = catalog.voice_for(voice)
    if model is not None and (why := catalog.model_problem(model)) is not None:
        raise BadRequest(400, why, "model_not_found")
    stream = body.get("stream")
    if stream is None:  # unless asked otherwise, a stream where the format can be streamed
        stream = stream_by_default and fmt not in encode.COMPRESSED
    if not isinstance(stream, bool):
        raise BadRequest(400, f"'stream' must be true or false, not {_shown(stream)}",
                         "invalid_stream")
    if stream and fmt in encode.COMPRESSED:
        raise BadRequest(400, f"'stream' is not available with 'response_format' {fmt} (its "
                              "encoder writes the header last); stream wav or pcm",
                         "invalid_stream")
    speed = body.get("speed")
    if speed is not None and (isinstance(speed, bool) or not isinstance(speed, int | float)
                              or not MIN_SPEED <= speed <= MAX_SPEED):
        raise BadRequest(400, f"'speed' must be a number from {MIN_SPEED} to {MAX_SPEED}, not "
                              f"{speed if isinstance(speed, int | float) else _shown(speed)}",
                         "invalid_speed")
    options = {} if speed is None else {"speed": float(speed)}
    return {"input": text, "format": fmt, "voice": voice, "stream": stream, "options": options,
            "body": body}
