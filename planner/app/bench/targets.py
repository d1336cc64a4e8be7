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
  `body.stream_format=audio` (vLLM-Omni's raw streams), `body.language=English`;
- `api_key_env=VAR`: the server wants an API key (vLLM's and SGLang's `--api-key`): bench sends
  `Authorization: Bearer` with the key held in environment variable VAR. The key itself is never
  an option: bench writes its command line into results.json.

Before any load, `check` sends one request as the run will and turns what goes wrong into one
paragraph naming the server and a fix (`TargetError`): an unreachable address, an endpoint that
is not there, a request the server refuses, an answer that is not measurable audio.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

import httpx

from planner.app.bench.exits import EXIT_RUN_FAILED, BenchError
from planner.app.bench.http1 import Endpoint
from planner.app.bench.load_shapes import Closed, Load
from planner.app.bench.loadgen import run_load
from planner.app.bench.placements import NAME, Placement
from planner.app.bench.speech import (
    FORMATS, OPENAI, OPENAI_PATH, PCM, PIPER, PIPER_PATH, WAV, Speech, json_value,
)

PIPER_SCHEME = "piper+"
MODELS_TIMEOUT_S = 5.0
_KEYS = ("model", "voice", "format", "rate", "api_key_env")
SYNTAX = ("NAME=URL[,model=M][,voice=V][,format=pcm|wav][,rate=HZ][,body.KEY=VALUE]"
          "[,api_key_env=VAR]")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class TargetError(BenchError):
    """A --url target cannot be measured: malformed (exit 2) or not answering speech (exit 3)."""


@dataclass(frozen=True)
class UrlTarget:
    """A running server, named as the user named it; one more row of bench's table. What bench
    cannot know of it (its processes, start time, memory, stage profile) stays unknown."""

    name: str
    url: str  # as given, options left off
    base: str  # http://host:port: where the bench connects
    speech: Speech
    format_given: bool = False  # format= was given (else it follows --stream)
    api_key_env: str | None = None  # the variable the API key was read from (the key: never)

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
                "body": dict(s.extra), "api_key_env": self.api_key_env}


Target = Placement | UrlTarget  # one row of bench's table: served by bench, or running already


def parse(text: str) -> UrlTarget:
    """`NAME=URL[,KEY=VALUE...]` -> a target; a malformed one is a `TargetError` (exit 2)."""
    name, sep, rest = text.partition("=")
    name = name.strip()
    if not sep or not NAME.match(name) or not rest:
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
        elif key in ("api_key", "key", "token") and eq:
            raise TargetError(f"--url {name}: a key is never given on the command line (bench "
                              "writes its command into results.json): export it and name the "
                              f"variable, e.g. --url {name}={url},api_key_env=TTS_API_KEY.")
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
    headers = _authorization(name, fields.get("api_key_env"))
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    if api == PIPER:
        path = path if parts.path.strip("/") else PIPER_PATH
    elif not parts.path.strip("/"):
        path = OPENAI_PATH
    elif parts.path.rstrip("/").endswith("/v1"):
        path = parts.path.rstrip("/") + OPENAI_PATH[3:]
    speech = Speech(api=api, path=path, model=fields.get("model"), voice=fields.get("voice"),
                    format=fmt or WAV, rate=int(rate) if rate else None,
                    extra=tuple(extra.items()), headers=headers)
    return UrlTarget(name=name, url=url, base=f"http://{parts.netloc}", speech=speech,
                     format_given=fmt is not None, api_key_env=fields.get("api_key_env"))


def _authorization(name: str, variable: str | None) -> tuple[tuple[str, str], ...]:
    """The `Authorization` header of the key in environment variable `variable` (none without
    one); a variable that is unset, empty or holds what no header can carry is a TargetError."""
    if variable is None:
        return ()
    if not _ENV_NAME.match(variable):
        raise TargetError(f"--url {name}: api_key_env={variable} is not the name of an "
                          "environment variable; give one such as TTS_API_KEY.")
    key = os.environ.get(variable, "").strip()
    if not key:
        raise TargetError(f"--url {name}: api_key_env={variable}, but {variable} is "
                          f"{'empty' if variable in os.environ else 'not set'}; export the "
                          f"server's API key first: export {variable}=... (the value its "
                          "--api-key was given).")
    if not key.isascii() or not key.isprintable():
        raise TargetError(f"--url {name}: the key in {variable} holds characters an HTTP header "
                          "cannot carry (a line break, say); export the key alone.")
    return (("Authorization", f"Bearer {key}"),)


def check(target: UrlTarget, stream: bool, text: str) -> UrlTarget:
    """`target` as the run will ask it (its pcm rate from the server's models list where the
    user gave none), after one request that answered measurable audio; else a `TargetError`
    (exit 3) naming the server and a fix."""
    speech = target.speech
    if speech.api == OPENAI and speech.format == PCM and speech.rate is None:
        speech = replace(speech, rate=models_rate(target.base, speech.model,
                                                  dict(speech.headers)))
    probe = run_load(target.base, Load(Closed(1), (text,), 1, None, stream, speech=speech))
    sample = probe.samples[0]
    if sample.ok:
        return replace(target, speech=speech)
    where = f"--url {target.name} ({target.url})"
    kind, error = sample.error_kind or "", sample.error or ""
    if kind == "connect":
        why = (f"cannot be reached ({error}); bench measures a server that is already running "
               "and never starts or stops one: start it there, or correct the host and port")
    elif kind in ("http-401", "http-403"):
        why = (f"refused the API key in ${target.api_key_env} ({error}); export the key the "
               "server was started with" if target.api_key_env else
               f"wants an API key ({error}); export it and name the variable: --url "
               f"{target.name}={target.url},api_key_env=TTS_API_KEY")
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


def models_rate(base: str, model: str | None,
                headers: dict[str, str] | None = None) -> int | None:
    """The `sample_rate` the server's GET /v1/models gives for `model` (or for its only model),
    where it gives one; None otherwise (OpenAI's list has no such field)."""
    try:
        data = httpx.get(f"{base}/v1/models", headers=headers,
                         timeout=MODELS_TIMEOUT_S).json()["data"]
        entries = [m for m in data if model is None or m.get("id") == model]
        rates = {m.get("sample_rate") for m in entries}
    except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
        return None
    rate = rates.pop() if len(rates) == 1 else None
    return rate if isinstance(rate, int) and rate > 0 else None
