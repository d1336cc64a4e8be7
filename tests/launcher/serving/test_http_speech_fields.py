"""The OpenAI speech fields a real model's card adds: its sample rate, its voices, `speed`, and the
compressed formats. In process on a fake deployment (no worker starts): milliseconds."""

from __future__ import annotations

import io
import warnings
import wave
from types import SimpleNamespace

import pytest
import torch

from launcher.audio import Audio

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

from launcher.serving.http import create_app
from tests.launcher.serving.handles import AwaitableReads

SPEECH = "/v1/audio/speech"
TONE = torch.sin(torch.arange(2205, dtype=torch.float32) * 0.1) * 0.5


class Handle(AwaitableReads):
    done = False

    def result(self, timeout=None):
        return Audio(TONE, 22_050)

    def chunks(self, timeout=None):
        yield TONE[:1000]
        yield TONE[1000:]

    def cancel(self):
        self.done = True


class Deployment:
    def __init__(self, sample_rate=22_050, voices=("joe",)):
        self.plan = SimpleNamespace(model="piper-joe", model_paths=(), sample_rate=sample_rate,
                                    voices=voices)
        self.submitted = []

    def submit(self, text, voice=None, stream=False, options=None):
        self.submitted.append((text, voice, stream, options))
        return Handle()


def post(d, **body):
    return TestClient(create_app(d, {})).post(SPEECH, json={"input": "hello", **body})


def test_the_cards_sample_rate_is_in_the_header_and_the_wav():
    d = Deployment()
    r = post(d, voice="joe")
    assert r.status_code == 200 and r.headers["x-sample-rate"] == "22050"
    with wave.open(io.BytesIO(r.content)) as w:
        assert w.getframerate() == 22_050 and w.getnframes() == TONE.numel()
    streamed = post(d, voice="joe", stream=True)
    assert streamed.headers["x-sample-rate"] == "22050"
    assert streamed.content[24:28] == (22_050).to_bytes(4, "little")  # the streamed header too
    assert streamed.content[44:] == r.content[44:]


def test_a_voice_the_card_does_not_list_is_a_400_naming_the_voices():
    d = Deployment()
    r = post(d, voice="nosuch")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_voice"
    assert "'nosuch'" in r.json()["error"]["message"] and "joe" in r.json()["error"]["message"]
    assert post(d, voice="default").status_code == 200  # the card's first voice
    assert post(d, voice="alloy").status_code == 200  # OpenAI's name for a card of one voice
    assert post(Deployment(voices=()), voice="alloy").status_code == 200  # a card without a list
    assert [s[1] for s in d.submitted] == ["default", "joe"]


def test_speed_reaches_the_stages_only_when_given_and_within_openais_range():
    d = Deployment()
    assert post(d, speed=1.5).status_code == 200
    assert post(d).status_code == 200
    assert [s[3] for s in d.submitted] == [{"speed": 1.5}, None]
    for bad in (0.1, 5, "fast", True):
        r = post(d, speed=bad)
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_speed"
        assert "'speed'" in r.json()["error"]["message"]
    assert len(d.submitted) == 2


def test_flac_and_mp3_are_encoded_and_do_not_stream():
    pytest.importorskip("soundfile", reason="soundfile (speech extra) is not installed")
    import soundfile

    d = Deployment()
    for fmt, media in (("flac", "audio/flac"), ("mp3", "audio/mpeg")):
        r = post(d, response_format=fmt)
        assert r.status_code == 200 and r.headers["content-type"] == media
        _, rate = soundfile.read(io.BytesIO(r.content), dtype="float32")
        assert rate == 22_050
    flac, _ = soundfile.read(io.BytesIO(post(d, response_format="flac").content),
                             dtype="float32")
    assert flac.size == TONE.numel() and abs(flac - TONE.numpy()).max() < 1e-4  # lossless 16-bit
    r = post(d, response_format="flac", stream=True)
    assert r.status_code == 400 and "'stream'" in r.json()["error"]["message"]
    r = post(d, response_format="opus")
    assert r.status_code == 400 and "'response_format'" in r.json()["error"]["message"]
