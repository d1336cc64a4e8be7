"""Captioned speech: `POST /dev/captioned_speech`, the speech endpoint's audio with when each word
is spoken, in the shape of Kokoro-FastAPI's endpoint of that name (what clients of OpenAI-style
speech servers already call for word timestamps).

The request is the speech body (`speech_body`: `input`, `voice`, `model`, `response_format`,
`speed`, `stream`) plus `return_timestamps` (a boolean, default true). As Kokoro-FastAPI's,
`stream` is true unless the body says otherwise, where the format can be streamed (wav, pcm);
flac and mp3 answer whole.

- Whole: one JSON object, `{"audio": base64 of the whole file in response_format,
  "audio_format": its media type, "timestamps": [{"word", "start_time", "end_time"}, ...]}`,
  times in seconds from the start of the audio.
- Streamed: newline-delimited JSON (`application/x-ndjson`), one object of the same shape per
  piece of audio as it is made: `audio` that piece's bytes (the first piece of a wav stream
  carries the header), `timestamps` the words whose start that piece's audio reaches (a word is
  never announced before its audio goes out), in seconds from the start of the response. The
  pieces' decoded audio, concatenated, is the streamed file. A stream that fails midway is
  aborted (its body ends unterminated), as the speech endpoint's is.

The words are the card's stages' own (`launcher.words`): a card whose stages yield none (its
`word_timestamps` is not set) answers 400 naming the model when timestamps are asked, rather than
an empty list a caller could take for silence; `return_timestamps: false` is served by any card
(the audio with an empty list).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable, Iterable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from launcher.audio import Audio, pcm16, wav_header
from launcher.facade import DeploymentFacade
from launcher.serving import encode
from launcher.serving.answer import Answer, answer
from launcher.serving.catalog import Catalog
from launcher.serving.speech_body import MEDIA_TYPES, BadRequest, error, parse
from launcher.words import TIMESTAMPS, WordTiming

NDJSON = "application/x-ndjson"
DECIMALS = 4  # seconds to 0.1 ms: finer than any model's frame


def timestamps_json(words: Iterable[WordTiming]) -> list[dict[str, object]]:
    return [{"word": w.word, "start_time": round(w.start, DECIMALS),
             "end_time": round(w.end, DECIMALS)} for w in words]


def _line(audio: bytes, media: str, words: Iterable[WordTiming]) -> bytes:
    body = {"audio": base64.b64encode(audio).decode("ascii"), "audio_format": media,
            "timestamps": timestamps_json(words)}
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _asked(body: dict) -> bool:
    value = body.get("return_timestamps")
    if value is None:
        return True
    if not isinstance(value, bool):
        raise BadRequest(400, "'return_timestamps' must be true or false",
                         "invalid_return_timestamps")
    return value


def endpoint(deployment: DeploymentFacade, catalog: Catalog, *, max_input_chars: int,
             request_timeout: float) -> Callable[[Request], Awaitable[Response]]:
    """The handler of `POST /dev/captioned_speech` for `deployment`."""

    async def captioned_speech(request: Request) -> Response:
        try:
            req = await parse(request, max_input_chars, catalog, stream_by_default=True)
            asked = _asked(req["body"])
        except BadRequest as bad:
            return bad.response
        plan = deployment.plan
        if asked and not plan.word_timestamps:
            return error(400, f"model '{plan.model}' gives no word timestamps: its stages yield "
                              "none (its card does not set `word_timestamps: true`); ask POST "
                              "/v1/audio/speech for the audio alone, or send "
                              "\"return_timestamps\": false", "timestamps_not_supported")
        options = {**req["options"], TIMESTAMPS: True} if asked else req["options"]
        fmt, timeout = req["format"], request_timeout
        media = MEDIA_TYPES[fmt]
        headers = {"X-Sample-Rate": str(plan.sample_rate)}
        head = [wav_header(plan.sample_rate, None)] if fmt == "wav" else []

        async def respond(whole: tuple[Audio, tuple[WordTiming, ...]]) -> Response:
            audio, words = whole
            body = await encode.whole(audio, fmt)
            return JSONResponse({"audio": base64.b64encode(body).decode("ascii"),
                                 "audio_format": media,
                                 "timestamps": timestamps_json(words if asked else ())},
                                headers=headers)

        def line(piece) -> bytes:
            samples, words = piece
            words = words if asked else ()
            audio = (head[0] if head else b"") + pcm16(samples)
            if not (audio or words):
                return b""  # nothing to say yet: the header waits for the first audio
            head.clear()
            return _line(audio, media, words)

        return await answer(request, deployment, req, options, Answer(
            whole=lambda h: h.captioned_result_async(timeout), respond=respond,
            pieces=lambda h: h.captioned_async(timeout), render=line, media_type=NDJSON),
            headers)

    return captioned_speech
