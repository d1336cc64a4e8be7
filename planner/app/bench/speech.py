"""What one speech request is on the wire, and how many seconds of audio its answer holds.

Two dialects (`Speech.api`):
- `openai`: `POST /v1/audio/speech` with OpenAI's body (`model`, `input`, `voice`,
  `response_format`, `stream`), as this project's server, sglang-omni, vLLM-Omni and
  Kokoro-FastAPI take it; `model` and `voice` are sent only when named (else the server's
  default), `stream` always (Kokoro-FastAPI streams unless told not to);
- `piper`: piper-tts's own server, `POST /synthesize` with `{"text": ...}` (and `voice` when
  named), answered with a whole WAV file: it never streams.

The audio's length comes from what the server returned, never from an assumed rate: a WAV
file's `fmt ` chunk (sample rate, channels, bytes per sample), or for raw `pcm` (OpenAI's: 16-bit
little-endian mono, no header) the rate the answer's `X-Sample-Rate` header gives (this project's
server and sglang-omni send it), else the rate the user stated or the server's models list gave
(`Speech.rate`). A 200 answer that is not audio (a JSON body, server-sent events) or pcm whose
rate nobody said is an error that names what is missing (`NotAudio`).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the HTTP client (asyncio) is loaded where a request is built, not by the CLI
    from planner.app.bench.http1 import Endpoint

OPENAI, PIPER = "openai", "piper"
PCM, WAV = "pcm", "wav"
FORMATS = (PCM, WAV)
OPENAI_PATH = "/v1/audio/speech"
PIPER_PATH = "/synthesize"
PCM_SAMPLE_BYTES = 2  # OpenAI's pcm: 16-bit mono
NOT_AUDIO_TYPES = ("application/json", "text/event-stream")  # a 200 with these is no audio
MAX_WAV_HEAD = 64 * 1024  # bytes before a WAV file's `data` chunk begins
_UNKNOWN_SIZES = (0, 0xFFFFFFFF)  # a streamed WAV's placeholder data sizes: "until the end"
_PCM_TAGS = (1, 3, 0xFFFE)  # WAVE_FORMAT_PCM, _IEEE_FLOAT, _EXTENSIBLE


class NotAudio(Exception):
    """A successful answer whose audio cannot be measured; the message says why and what fixes
    it."""


@dataclass(frozen=True)
class Speech:
    """How to ask one server for speech, and how to read the answer's audio."""

    api: str = OPENAI
    path: str = OPENAI_PATH
    model: str | None = None
    voice: str | None = None
    format: str = PCM  # the response_format asked for (piper: always wav)
    rate: int | None = None  # pcm: the sample rate where the answer does not say it
    extra: tuple[tuple[str, Any], ...] = ()  # more body fields, as the user gave them
    # More request headers: an API key's `Authorization`, never printed or written out.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def body(self, text: str, stream: bool) -> dict[str, Any]:
        if self.api == PIPER:
            out: dict[str, Any] = {"text": text}
            if self.voice is not None:
                out["voice"] = self.voice
        else:
            out = {} if self.model is None else {"model": self.model}
            out["input"] = text
            if self.voice is not None:
                out["voice"] = self.voice
            out.update(response_format=self.format, stream=stream)
        out.update(self.extra)
        return out

    def request(self, endpoint: Endpoint, text: str, stream: bool) -> bytes:
        """The bytes of one request for `text`, ready to write."""
        from planner.app.bench.http1 import post_json

        return post_json(endpoint, self.path, self.body(text, stream), self.headers)

    def reader(self, headers: dict[str, str]) -> WavReader | PcmReader:
        """What counts the audio of a 200 answer with these (lower-case) headers."""
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind in NOT_AUDIO_TYPES:
            why = ("server-sent events, not raw audio (vLLM-Omni streams raw bytes with "
                   "body.stream_format=audio)" if kind == "text/event-stream" else "JSON")
            raise NotAudio(f"the answer is {why}")
        if self.format == WAV:
            return WavReader()
        stated = headers.get("x-sample-rate")
        try:
            rate = int(stated) if stated is not None else self.rate
        except ValueError:
            raise NotAudio(f"its X-Sample-Rate header {stated!r} is not a number") from None
        if rate is None:
            raise NotAudio("it answered pcm without saying its sample rate (no X-Sample-Rate "
                           "header, no sample_rate in GET /v1/models); state it with rate=HZ, "
                           "or ask for WAV (format=wav), whose header says it")
        if rate <= 0:
            raise NotAudio(f"a sample rate of {rate} Hz")
        return PcmReader(rate)


OURS = Speech(model="tts-1", voice="default")  # what bench asks of the placements it serves


class PcmReader:
    """Raw 16-bit mono at a known rate: every byte is audio."""

    def __init__(self, rate: int) -> None:
        self.rate = rate

    def feed(self, data: bytes) -> float:
        """Seconds of audio in `data`."""
        return len(data) / PCM_SAMPLE_BYTES / self.rate


class WavReader:
    """A RIFF/WAVE file read as it arrives: its header (which may span reads), then audio at the
    rate, channels and sample size its `fmt ` chunk gives. A `data` size of 0 or 0xFFFFFFFF (a
    streamed WAV's placeholder) means audio until the end; any other stops the count there."""

    def __init__(self) -> None:
        self.rate: int | None = None
        self._head = b""
        self._frame_bytes = 0
        self._left: int | None = None  # audio bytes the data chunk still holds; None: to the end

    def feed(self, data: bytes) -> float:
        if self.rate is None:
            self._head += data
            audio = self._parse()
            if audio is None:
                return 0.0
            data = audio
        size = len(data) if self._left is None else min(len(data), self._left)
        if self._left is not None:
            self._left -= size
        return size / self._frame_bytes / self.rate  # type: ignore[operator]

    def _parse(self) -> bytes | None:
        """The bytes after the `data` chunk's header, once it has arrived; None before."""
        head = self._head
        if len(head) >= 12 and (head[:4] != b"RIFF" or head[8:12] != b"WAVE"):
            raise NotAudio(f"the answer is not a WAV file (it starts {head[:12]!r})")
        pos, fmt = 12, None
        while len(head) >= pos + 8:
            chunk, size = head[pos:pos + 4], struct.unpack_from("<I", head, pos + 4)[0]
            if chunk == b"data":
                if fmt is None:
                    raise NotAudio("its WAV file has no `fmt ` chunk before its audio")
                tag, channels, rate, _, align, _bits = fmt
                if tag not in _PCM_TAGS or channels < 1 or rate < 1 or align < 1:
                    raise NotAudio(f"its WAV file is not PCM audio (format {tag}, {channels} "
                                   f"channels, {rate} Hz)")
                self.rate, self._frame_bytes = rate, align
                self._left = None if size in _UNKNOWN_SIZES else size
                self._head = b""
                return head[pos + 8:]
            if len(head) < pos + 8 + size:
                break
            if chunk == b"fmt ":
                if size < 16:
                    raise NotAudio("its WAV file's `fmt ` chunk is too short")
                fmt = struct.unpack_from("<HHIIHH", head, pos + 8)
            pos += 8 + size + (size & 1)  # chunks are padded to an even length
        if len(head) > MAX_WAV_HEAD:
            raise NotAudio(f"its WAV file has no audio in its first {MAX_WAV_HEAD} bytes")
        return None


def json_value(text: str) -> Any:
    """A `body.KEY=VALUE` value: JSON where it parses (true, 3, "x", [1]), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text
