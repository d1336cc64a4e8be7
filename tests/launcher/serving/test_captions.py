"""`POST /dev/captioned_speech` (Kokoro-FastAPI's captioned speech) on a fake deployment whose
request handle is the real one, fed three pieces of audio: the whole answer and the NDJSON stream
in Kokoro's shape, each word timed from the start of the response and sent with the audio that
reaches it; a card without word timings refused in one line. In process: milliseconds."""

from __future__ import annotations

import base64
import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest

from launcher.control.request_table import SpeechRequest
from launcher.words import TIMESTAMPS, WordTiming

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # Starlette's note about httpx2
    from starlette.testclient import TestClient

from launcher.serving.http import create_app

CAPTIONED, SPEECH = "/dev/captioned_speech", "/v1/audio/speech"
RATE = 1000  # samples per second: a piece of 500 samples is half a second
PIECES = [  # (samples, words timed from that piece's start), as a terminal stage hands them on
    (np.full(500, 0.25, np.float32), (WordTiming("Hello", 0.1, 0.4),
                                      WordTiming("there", 0.6, 0.9))),  # "there": next piece
    (np.full(500, -0.25, np.float32), ()),
    (np.full(300, 0.5, np.float32), (WordTiming("again", 0.05, 0.25),)),
]
WORDS = [{"word": "Hello", "start_time": 0.1, "end_time": 0.4},
         {"word": "there", "start_time": 0.6, "end_time": 0.9},
         {"word": "again", "start_time": 1.05, "end_time": 1.25}]


class Deployment:
    def __init__(self, word_timestamps: bool = True) -> None:
        self.plan = SimpleNamespace(model="piper-joe", model_paths=(), sample_rate=RATE,
                                    voices=("joe",), word_timestamps=word_timestamps)
        self.submitted = []

    def submit(self, text, voice=None, stream=False, options=None):
        self.submitted.append({"stream": stream, **(options or {})})
        handle = SpeechRequest(len(self.submitted), stream, lambda *_: None, RATE)
        for samples, words in PIECES:
            handle._chunk(samples, words)
        handle._end()
        return handle


def post(d, path=CAPTIONED, **body):
    return TestClient(create_app(d, {})).post(path, json={"input": "Hello there again",
                                                          **body})


def test_the_whole_answer_is_kokoros_object_with_the_speech_endpoints_audio():
    d = Deployment()
    r = post(d, stream=False)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    answer = r.json()
    assert set(answer) == {"audio", "audio_format", "timestamps"}
    assert answer["audio_format"] == "audio/wav" and answer["timestamps"] == WORDS
    assert base64.b64decode(answer["audio"]) == post(d, SPEECH).content  # the same WAV
    assert d.submitted[0] == {"stream": False, TIMESTAMPS: True}


def test_the_stream_is_one_json_line_per_piece_with_the_words_its_audio_reaches():
    d = Deployment()
    r = post(d)  # `stream` left out: streamed, as Kokoro-FastAPI does
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ndjson"
    assert r.headers["x-sample-rate"] == str(RATE)
    lines = [json.loads(x) for x in r.text.splitlines()]
    assert r.text.endswith("\n") and len(lines) == len(PIECES)
    assert all(line["audio_format"] == "audio/wav" for line in lines)
    assert [line["timestamps"] for line in lines] == [WORDS[:1], WORDS[1:2], WORDS[2:]]
    audio = b"".join(base64.b64decode(line["audio"]) for line in lines)
    assert audio[:4] == b"RIFF"  # the first piece carries the header
    assert audio == post(d, SPEECH, stream=True).content  # the speech endpoint's stream
    assert d.submitted[0] == {"stream": True, TIMESTAMPS: True}
    pcm = post(d, response_format="pcm")
    lines = [json.loads(x) for x in pcm.text.splitlines()]
    assert lines[0]["audio_format"] == "audio/pcm"
    assert len(base64.b64decode(lines[0]["audio"])) == 2 * 500  # 16-bit samples, no header


def test_a_card_without_word_timings_is_refused_in_one_line_unless_none_are_asked():
    d = Deployment(word_timestamps=False)
    r = post(d)
    assert r.status_code == 400 and r.json()["error"]["code"] == "timestamps_not_supported"
    message = r.json()["error"]["message"]
    assert "'piper-joe'" in message and "return_timestamps" in message and "\n" not in message
    assert d.submitted == []  # no stage ran
    r = post(d, return_timestamps=False, stream=False)
    assert r.status_code == 200 and r.json()["timestamps"] == []
    assert d.submitted == [{"stream": False}]  # the stages were not asked for words


def test_compressed_formats_answer_whole_and_bad_fields_are_named():
    pytest.importorskip("soundfile", reason="soundfile (speech extra) is not installed")
    d = Deployment()
    r = post(d, response_format="flac")  # cannot stream: whole, unless asked to
    assert r.status_code == 200 and r.json()["audio_format"] == "audio/flac"
    assert base64.b64decode(r.json()["audio"])[:4] == b"fLaC"
    assert r.json()["timestamps"] == WORDS
    r = post(d, response_format="mp3", stream=True)
    assert r.status_code == 400 and "'stream'" in r.json()["error"]["message"]
    r = post(d, return_timestamps="yes")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_return_timestamps"
    r = post(d, voice="nosuch")
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_voice"
