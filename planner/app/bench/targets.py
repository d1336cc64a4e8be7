"""`planner bench --url NAME=URL[,KEY=VALUE...]`: a speech server that is already running, measured
beside the placements bench serves itself, never started or stopped by it.

    --url kokoro=http://127.0.0.1:8880,model=kokoro,voice=af_heart,format=wav
    --url vllm=http://gpu1:8091/v1,voice=vivian,rate=HZ,body.stream_format=audio
    --url piper=piper+http://127.0.0.1:5000

The URL: `http://HOST:PORT` (OpenAI's speech API at /v1/audio/speech), a base URL ending in `/v1`
as OpenAI clients take it (then /audio/speech), or the full path of the endpoint;
`piper+http://HOST:PORT` is piper-tts's own server (POST /synthesize, a whole WAV). After it,
comma-separated options, as docker's `--mount` takes them (`speech.Speech` says how each is
sent):
- `model=M`, `voice=V`: the names the server expects (left out: the server's defaults);
- `format=pcm|wav`: the response_format (default pcm with --stream, which sglang-omni requires of
  a stream, and wav without: its header says the rate); piper's server answers wav only;
- `rate=HZ`: the sample rate of a server's pcm where its answers do not say it (Kokoro-FastAPI's
  is 24 kHz); never assumed;
- `body.KEY=VALUE`: another field of the request body (VALUE as JSON where it parses), e.g.
  `body.stream_format=audio` (vLLM-Omni's raw streams), `body.language=English`.

Before any load, `check` sends one request as the run will and turns what goes wrong into one
paragraph naming the server and a fix (`TargetError`): an unreachable address, an endpoint that
is not there, a request the server refuses, an answer that is not measurable audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import httpx

from planner.app.bench.exits import EXIT_INVALID, EXIT_RUN_FAILED
from planner.app.bench.http1 import Endpoint
from planner.app.bench.load_shapes import Closed, Load
from planner.app.bench.loadgen import run_load
from planner.app.bench.placements import Placement
from planner.app.bench.speech import (
    FORMATS, OPENAI, OPENAI_PATH, PCM, PIPER, PIPER_PATH, WAV, Speech, json_value,
)

PIPER_SCHEME = "piper+"
MODELS_TIMEOUT_S = 5.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+:@-]*$")
_KEYS = ("model", "voice", "format", "rate")
SYNTAX = "NAME=URL[,model=M][,voice=V][,format=pcm|wav][,rate=HZ][,body.KEY=VALUE]"


class TargetError(ValueError):
    """A --url target cannot be measured; one paragraph, with bench's exit code for it."""

    def __init__(self, message: str, exit_code: int = EXIT_INVALID) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class UrlTarget:
    """A running server, named as the user named it; one more row of bench's table. What bench
    cannot know of it (its processes, start time, memory, stage profile) stays unknown."""

    name: str
    url: str  # as given, options left off
    base: str  # http://host:port: where the bench connects
    speech: Speech
    format_given: bool = False  # format= was given (else it follows --stream)

    # What a served `Placement` says of itself, unknown or empty here.
    process_count = None
    is_baseline = False
    flags = ()
    groups = ()
    tp_stages = ()

    @property
    def signature(self) -> frozenset:
        return frozenset({("url", self.name)})

    def ideal_rps(self, per_request_s: object) -> None:
        return None

    def describe(self) -> str:
        api = "piper's /synthesize" if self.speech.api == PIPER else "OpenAI speech API"
        return f"{self.url} ({api}; running outside bench)"

    def for_stream(self, stream: bool) -> UrlTarget:
        """This target with the response format a run of this kind asks for."""
        if self.format_given or self.speech.api == PIPER:
            return self
        return replace(self, speech=replace(self.speech, format=PCM if stream else WAV))

    def to_dict(self) -> dict:
        s = self.speech
        return {"name": self.name, "url": self.url, "api": s.api, "path": s.path,
                "model": s.model, "voice": s.voice, "format": s.format, "rate": s.rate,
                "body": dict(s.extra)}


Target = Placement | UrlTarget  # one row of bench's table: served by bench, or running already


def parse(text: str) -> UrlTarget:
    """`NAME=URL[,KEY=VALUE...]` -> a target; a malformed one is a `TargetError` (exit 2)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not _NAME.match(name) or not rest:
        raise TargetError(f"--url {text!r} is not {SYNTAX}: give a name (letters, digits, "
                          ". _ + : @ -), '=' and the server's address, e.g. --url "
                          "kokoro=http://127.0.0.1:8880,model=kokoro,voice=af_heart.")
    url, *options = rest.split(",")
    api = PIPER if url.startswith(PIPER_SCHEME) else OPENAI
    plain = url[len(PIPER_SCHEME):] if api == PIPER else url
    parts = urlsplit(plain)
    try:
        Endpoint.parse(plain)  # a scheme other than http, no host, a port that is no number
    except ValueError:
        raise TargetError(
            f"--url {name}: {url!r} is not an address bench can reach: it speaks plain "
            "HTTP/1.1 to http://HOST:PORT[/PATH] (piper's own server: piper+http://HOST:PORT); "
            "for an https endpoint, measure it from a host that reaches it over http.") from None
    fields: dict[str, str] = {}
    extra: dict[str, object] = {}
    for option in options:
        key, eq, value = option.partition("=")
        key = key.strip()
        if key.startswith("body.") and eq and key[5:]:
            extra[key[5:]] = json_value(value)
        elif key in _KEYS and eq and value and key not in fields:
            fields[key] = value
        else:
            raise TargetError(f"--url {name}: {option!r} is not an option of a --url target; "
                              f"give each once as KEY=VALUE, KEY one of {', '.join(_KEYS)} or "
                              f"body.FIELD ({SYNTAX}).")
    fmt = fields.get("format")
    if fmt is not None and fmt not in FORMATS:
        raise TargetError(f"--url {name}: format={fmt} cannot be measured: bench reads pcm "
                          "(raw 16-bit mono) or wav, whose length it can tell; give format=pcm "
                          "or format=wav.")
    rate = fields.get("rate")
    if rate is not None and not (rate.isascii() and rate.isdigit() and int(rate) > 0):
        raise TargetError(f"--url {name}: rate={rate} is not a sample rate; give the server's "
                          "rate in Hz, e.g. rate=22050.")
    if api == PIPER and ({"model", "rate"} & set(fields) or fmt not in (None, WAV)):
        raise TargetError(f"--url {name}: piper's /synthesize takes text (and voice=), not "
                          f"{', '.join(sorted({'model', 'rate', 'format'} & set(fields)))}: it "
                          "answers a whole WAV file, whose header gives the rate; drop them.")
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    if api == PIPER:
        path = path if parts.path.strip("/") else PIPER_PATH
    elif not parts.path.strip("/"):
        path = OPENAI_PATH
    elif parts.path.rstrip("/").endswith("/v1"):
        path = parts.path.rstrip("/") + OPENAI_PATH[3:]
    speech = Speech(api=api, path=path, model=fields.get("model"), voice=fields.get("voice"),
                    format=fmt or WAV, rate=int(rate) if rate else None,
                    extra=tuple(extra.items()))
    return UrlTarget(name=name, url=url, base=f"http://{parts.netloc}", speech=speech,
                     format_given=fmt is not None)


def check(target: UrlTarget, stream: bool, text: str) -> UrlTarget:
    """`target` as the run will ask it (its pcm rate from the server's models list where the
    user gave none), after one request that answered measurable audio; else a `TargetError`
    (exit 3) naming the server and a fix."""
    speech = target.speech
    if speech.api == OPENAI and speech.format == PCM and speech.rate is None:
        speech = replace(speech, rate=models_rate(target.base, speech.model))
    probe = run_load(target.base, Load(Closed(1), (text,), 1, None, stream, speech=speech))
    sample = probe.samples[0]
    if sample.ok:
        return replace(target, speech=speech)
    where = f"--url {target.name} ({target.url})"
    kind, error = sample.error_kind or "", sample.error or ""
    if kind == "connect":
        why = (f"cannot be reached ({error}); bench measures a server that is already running "
               "and never starts or stops one: start it there, or correct the host and port")
    elif kind == "http-404":
        why = (f"has no speech endpoint at POST {speech.path} ({error}); give the server's "
               "address, its /v1 base or the endpoint's full path; piper's own server is "
               "piper+http://HOST:PORT")
    elif kind.startswith("http-4"):
        why = (f"refused the request ({error}); give the model and voice it expects: --url "
               f"{target.name}={target.url},model=M,voice=V (its GET /v1/models and "
               "/v1/audio/voices list them), and any field it needs as body.KEY=VALUE")
    elif kind.startswith("http-5"):
        why = f"failed the request ({error}); its own log says why"
    elif kind == "not-audio":
        why = f"answered, but not with audio bench can measure: {error.removeprefix('not audio: ')}"
    else:
        why = f"did not answer a speech request ({error})"
    raise TargetError(f"{where} {why}. Nothing was measured.", EXIT_RUN_FAILED)


def models_rate(base: str, model: str | None) -> int | None:
    """The `sample_rate` the server's GET /v1/models gives for `model` (or for its only model),
    where it gives one; None otherwise (OpenAI's list has no such field)."""
    try:
        data = httpx.get(f"{base}/v1/models", timeout=MODELS_TIMEOUT_S).json()["data"]
        entries = [m for m in data if model is None or m.get("id") == model]
        rates = {m.get("sample_rate") for m in entries}
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    rate = rates.pop() if len(rates) == 1 else None
    return rate if isinstance(rate, int) and rate > 0 else None
