"""piper-joe served end to end: it speaks (a recogniser understands it) in every placement the
planner accepts, with threads and copies too, with the same bytes and the same captions (word
timestamps) in each; an unchanged OpenAI client gets playable audio.

Slow: every placement starts real worker processes that load the voice."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path
import re
import subprocess
import sys
import time
import warnings
import wave

import numpy as np
import pytest

import planner
from launcher import launch
from launcher.serving.http import create_app
from planner import load_pipeline
from planner.placements import feasible_placements
from planner.plan import Copies, Threads

from tests.models import needs
from tests.models.asr import transcribe_wav, wer
from tests.models.piper.sentences import SENTENCES, WER_LIMIT
from tests.processes import interrupt

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

pytestmark = [pytest.mark.slow, needs.speech, needs.espeak]
ROOT = str(Path(__file__).resolve().parents[3])  # the repository


def _same_samples(a: bytes, b: bytes) -> bool:
    """The same 16-bit samples within the streamed decode's float tolerance (1e-4 of full scale,
    so at most 4 steps after rounding)."""
    x, y = np.frombuffer(a, "<i2").astype(np.int32), np.frombuffer(b, "<i2").astype(np.int32)
    return x.shape == y.shape and x.size > 0 and int(np.max(np.abs(x - y))) <= 4


CAPTIONED = f"{SENTENCES[0]} {SENTENCES[1]}"  # two sentences: the second's words offset


def _plans():
    """Every feasible placement, then the last again with two threads for the acoustic stage and
    the vocoder and two copies of the vocoder's process."""
    placements = feasible_placements(load_pipeline(model_path="piper-joe"))
    extra = [Threads("acoustic", 2), Threads("vocoder", 2), Copies("vocoder", 2)]
    result = planner.solve("piper-joe", requests=[*placements[-1].requests, *extra], cpus=64)
    assert result.ok, result.diagnostics
    return [p.plan for p in placements] + [result.plan]


def _captions(client) -> dict:
    """CAPTIONED's captions, whole (with its audio) and streamed (each line's words in order)."""
    whole = client.post("/dev/captioned_speech", json={"input": CAPTIONED, "voice": "joe",
                                                       "stream": False})
    streamed = client.post("/dev/captioned_speech", json={"input": CAPTIONED, "voice": "joe",
                                                          "response_format": "pcm"})
    assert whole.status_code == streamed.status_code == 200, (whole.text, streamed.text)
    lines = [json.loads(line) for line in streamed.text.splitlines()]
    return {"whole": whole.json()["timestamps"], "audio": base64.b64decode(whole.json()["audio"]),
            "streamed": [w for line in lines for w in line["timestamps"]]}


def _served(plan, topology) -> tuple[list[bytes], bytes, dict]:
    """WAV bodies of the fixed sentences, the first one streamed as pcm, and captions."""
    with launch(plan, device="cpu", startup_timeout=300) as d:
        client = TestClient(create_app(d, topology))
        bodies = []
        for text in SENTENCES:
            r = client.post("/v1/audio/speech", json={"model": "piper-joe", "input": text,
                                                      "voice": "joe"})
            assert r.status_code == 200, r.text
            assert r.headers["x-sample-rate"] == "22050"
            bodies.append(r.content)
        r = client.post("/v1/audio/speech", json={"input": SENTENCES[0], "voice": "joe",
                                                  "response_format": "pcm", "stream": True})
        assert r.status_code == 200, r.text
        captions = _captions(client)
        speech = client.post("/v1/audio/speech", json={"input": CAPTIONED, "voice": "joe"})
        assert captions["audio"] == speech.content  # asking for captions changes no bit
        return bodies, r.content, captions


@pytest.fixture(scope="module")
def served_everywhere():
    """Every feasible placement served in turn (seconds each: its workers load the voice), once
    for this module."""
    return [(plan, *_served(plan, {"model": plan.model})) for plan in _plans()]


@needs.asr
def test_it_speaks_with_the_same_bytes_in_every_feasible_placement(served_everywhere):
    assert {result.process_count() for result, *_ in served_everywhere} >= {1, 2, 3}
    assert any(g.copies == 2 for result, *_ in served_everywhere for g in result.groups)
    first = None
    for result, bodies, streamed, _ in served_everywhere:
        for body in bodies:
            with wave.open(io.BytesIO(body)) as w:
                assert w.getframerate() == 22_050 and w.getnchannels() == 1
                assert w.getnframes() > 22_050  # over a second of speech
        # the stream is the WAV's samples, up to float rounding: a whole response is decoded
        # in one piece, a stream in chunks with context
        assert _same_samples(streamed, bodies[0][44:])
        if first is None:
            first, first_stream = bodies, streamed
            heard = [transcribe_wav(b) for b in bodies]
            assert wer(SENTENCES, heard) <= WER_LIMIT, heard
        else:
            # bit-identical audio: what was heard in the first placement is heard in this one
            where = [g.stages for g in result.groups]
            assert bodies == first, f"audio differs in placement {where}"
            assert streamed == first_stream, f"streamed audio differs in placement {where}"


def test_captions_are_the_words_said_with_the_same_times_in_every_placement(served_everywhere):
    first = served_everywhere[0][3]
    assert [w["word"] for w in first["whole"]] == CAPTIONED.replace(".", "").split()
    starts = [w["start_time"] for w in first["whole"]]
    assert starts == sorted(starts) and starts[-1] < len(first["audio"][44:]) / 2 / 22_050
    assert first["streamed"] == first["whole"]  # streamed: the same words and times
    for result, _, _, captions in served_everywhere:
        where = [(g.stages, g.copies) for g in result.groups]
        assert captions == first, f"captions differ in placement {where}"


def _serve(*args: str, env: dict | None = None) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "planner", "serve", "piper-joe", "--port", "0", *args],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if m := re.search(r"ready: piper-joe on http://127\.0\.0\.1:(\d+)", line):
            return proc, int(m.group(1))
    proc.kill()
    proc.wait()
    raise AssertionError("server did not get ready:\n" + "".join(seen[-20:]))


def _stop(proc: subprocess.Popen) -> None:
    interrupt(proc)


@needs.asr
def test_an_unchanged_openai_client_gets_playable_speech():
    openai = pytest.importorskip("openai", reason="the openai client is not installed (dev extra)")
    proc, port = _serve()
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                               max_retries=0, timeout=120)
        speech = client.audio.speech.create(model="piper-joe", voice="joe",
                                            input=SENTENCES[1], response_format="wav")
        body = speech.content
        with wave.open(io.BytesIO(body)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (22_050, 1, 2)
        assert wer([SENTENCES[1]], [transcribe_wav(body)]) <= WER_LIMIT
        flac = client.audio.speech.create(model="piper-joe", voice="joe", input=SENTENCES[1],
                                          response_format="flac")
        assert flac.content[:4] == b"fLaC"
        faster = client.audio.speech.create(model="piper-joe", voice="joe", input=SENTENCES[1],
                                            response_format="pcm", speed=1.5)
        assert len(faster.content) < len(body) - 44  # speed shortens the audio
        with client.audio.speech.with_streaming_response.create(
                model="piper-joe", voice="joe", input=SENTENCES[1], response_format="wav",
                extra_body={"stream": True}) as streamed:
            # a streamed WAV leaves its sizes open (0xFFFFFFFF); the samples are the same (up
            # to the rounding of a chunked decode)
            assert _same_samples(b"".join(streamed.iter_bytes())[44:], body[44:])
        with pytest.raises(openai.BadRequestError, match="voice"):
            client.audio.speech.create(model="piper-joe", voice="nosuch", input="Hi.")
    finally:
        _stop(proc)


def test_openai_code_ported_as_is_gets_the_voice_of_the_card():
    # OpenAI's model and voice names, as code written for OpenAI sends them: piper-joe's one
    # voice answers to `alloy` (docs/serving.md), the same audio as asking for `joe`.
    openai = pytest.importorskip("openai", reason="the openai client is not installed (dev extra)")
    proc, port = _serve()
    try:
        speech = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                               max_retries=0, timeout=120).audio.speech
        got = {(m, v): speech.create(model=m, voice=v, input=SENTENCES[0],
                                     response_format="wav").content
               for m, v in (("tts-1", "alloy"), ("piper-joe", "joe"))}
    finally:
        _stop(proc)
    with wave.open(io.BytesIO(got["tts-1", "alloy"])) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (22_050, 1, 2)
        assert w.getnframes() > 0
    assert got["tts-1", "alloy"] == got["piper-joe", "joe"]


def test_serve_without_espeak_ng_exits_2_saying_how_to_install_it():
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "serve", "piper-joe", "--port", "0"], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT, "ESPEAK_NG": "no-such-espeak-ng"},
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "apt-get install -y espeak-ng" in proc.stderr and "nothing was started" in proc.stderr
    assert "ready:" not in proc.stdout and "Traceback" not in proc.stderr
