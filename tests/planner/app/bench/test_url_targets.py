"""`planner bench --url`: how a target is written, what is sent to it, how its audio is measured
(from the answer, never an assumed rate), and what a user reads when it cannot be measured."""

from __future__ import annotations

import json
import socket
import struct

import pytest

from launcher.audio import wav_header
from planner.app.bench.http1 import Endpoint
from planner.app.bench.load_shapes import Closed, Load
from planner.app.bench.loadgen import run_load
from planner.app.bench.speech import NotAudio, Speech, WavReader
from planner.app.bench.targets import TargetError, check, parse
from planner.app.cli import main
from tests.planner.app.bench.fake_piper import RATE, FakePiper, audio_seconds
from tests.planner.app.bench.stub_server import Reply, StubServer


# -- the option -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "base", "path", "body"), [
    ("ours=http://127.0.0.1:8000", "http://127.0.0.1:8000", "/v1/audio/speech",
     {"input": "Hi.", "response_format": "wav", "stream": False}),
    ("kokoro=http://h:8880/v1,model=kokoro,voice=af_heart,format=pcm,rate=24000",
     "http://h:8880", "/v1/audio/speech",
     {"model": "kokoro", "input": "Hi.", "voice": "af_heart", "response_format": "pcm",
      "stream": False}),
    ("vllm=http://h:8091/v1/audio/speech,voice=vivian,body.stream_format=audio,"
     "body.max_new_tokens=512", "http://h:8091", "/v1/audio/speech",
     {"input": "Hi.", "voice": "vivian", "response_format": "wav", "stream": False,
      "stream_format": "audio", "max_new_tokens": 512}),
    ("piper=piper+http://h:5000", "http://h:5000", "/synthesize", {"text": "Hi."}),
    ("piper=piper+http://h:5000/synthesize,voice=en_US-joe-medium,body.length_scale=1.2",
     "http://h:5000", "/synthesize",
     {"text": "Hi.", "voice": "en_US-joe-medium", "length_scale": 1.2}),
])
def test_a_target_sends_the_body_its_server_takes(text, base, path, body):
    target = parse(text)
    assert (target.base, target.speech.path) == (base, path)
    assert target.speech.body("Hi.", stream=False) == body
    assert target.process_count is None and not target.is_baseline


def test_a_stream_asks_for_pcm_unless_a_format_was_given():
    assert parse("a=http://h:1").for_stream(True).speech.format == "pcm"
    assert parse("a=http://h:1,format=wav").for_stream(True).speech.format == "wav"
    assert parse("a=piper+http://h:1").for_stream(True).speech.format == "wav"
    assert parse("a=http://h:1").for_stream(True).speech.body("x", True)["stream"] is True


@pytest.mark.parametrize(("text", "says"), [
    ("nourl", "is not NAME=URL"),
    ("a b=http://h:1", "is not NAME=URL"),
    ("a=https://h:443", "plain HTTP/1.1"),
    ("a=h:8000", "plain HTTP/1.1"),
    ("a=http://h:port", "plain HTTP/1.1"),
    ("a=http://h:1,colour=red", "'colour=red' is not an option"),
    ("a=http://h:1,voice=x,voice=y", "give each once"),
    ("a=http://h:1,format=mp3", "format=mp3 cannot be measured"),
    ("a=http://h:1,rate=fast", "rate=fast is not a sample rate"),
    ("a=piper+http://h:1,model=m", "piper's /synthesize takes text"),
])
def test_a_malformed_target_names_the_culprit(text, says):
    with pytest.raises(TargetError) as caught:
        parse(text)
    assert caught.value.exit_code == 2 and says in str(caught.value)


def test_an_api_key_is_read_from_the_environment_sent_as_a_bearer_and_never_written(
        monkeypatch):
    monkeypatch.setenv("TTS_API_KEY", "sk-123")
    target = parse("vllm=http://h:8091/v1,api_key_env=TTS_API_KEY")
    head = target.speech.request(Endpoint.parse(target.base), "Hi.", False).split(b"\r\n\r\n")[0]
    assert b"\r\nAuthorization: Bearer sk-123" in head
    assert "sk-123" not in json.dumps(target.to_dict()) + repr(target)
    assert target.to_dict()["api_key_env"] == "TTS_API_KEY"
    assert b"Authorization" not in parse("a=http://h:1").speech.request(
        Endpoint.parse("http://h:1"), "Hi.", False)


@pytest.mark.parametrize(("text", "env", "says"), [
    ("a=http://h:1,api_key=sk-123", {}, "never given on the command line"),
    ("a=http://h:1,api_key_env=NOT_SET_HERE", {}, "NOT_SET_HERE is not set; export"),
    ("a=http://h:1,api_key_env=EMPTY_KEY", {"EMPTY_KEY": ""}, "EMPTY_KEY is empty"),
    ("a=http://h:1,api_key_env=BAD_KEY", {"BAD_KEY": "sk\r\nX-Evil: 1"}, "a line break"),
    ("a=http://h:1,api_key_env=$KEY", {}, "is not the name of an environment variable"),
])
def test_a_key_that_cannot_be_sent_names_the_fix(monkeypatch, text, env, says):
    monkeypatch.delenv("NOT_SET_HERE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(TargetError) as caught:
        parse(text)
    assert caught.value.exit_code == 2 and says in str(caught.value)


def test_a_server_that_wants_a_key_says_so_and_gets_it(monkeypatch):
    unauthorized = Reply(status=401, chunks=((b'{"error": "Unauthorized"}', 0),), chunked=False)
    with StubServer(lambda n: unauthorized) as stub:
        with pytest.raises(TargetError, match="wants an API key .*api_key_env=TTS_API_KEY"):
            check(parse(f"k=http://{stub.url[7:]}"), False, "Hi.")
        monkeypatch.setenv("WRONG_KEY", "nope")
        with pytest.raises(TargetError, match=r"refused the API key in \$WRONG_KEY"):
            check(parse(f"k=http://{stub.url[7:]},api_key_env=WRONG_KEY"), False, "Hi.")
    pcm = Reply(chunks=((bytes(4800), 0),), headers=())
    monkeypatch.setenv("TTS_API_KEY", "sk-123")
    with StubServer(lambda n: pcm) as stub:
        checked = check(parse(f"k=http://{stub.url[7:]},format=pcm,rate=24000,"
                              "api_key_env=TTS_API_KEY"), True, "Hi.")
        assert checked.speech.rate == 24_000
        assert all(b"Authorization: Bearer sk-123" in head for head in stub.heads)


# -- the audio's length, from the answer ---------------------------------------------------------
def _wav(rate: int, frames: int, channels: int = 1, sized: bool = True) -> bytes:
    """A WAV file with a LIST chunk before its data, as some writers put one."""
    align = 2 * channels
    listing = b"LIST" + struct.pack("<I", 5) + b"INFO!" + b"\0"  # odd size: padded
    size = frames * align if sized else 0xFFFFFFFF
    fmt = struct.pack("<4sIHHIIHH", b"fmt ", 16, 1, channels, rate, rate * align, align, 16)
    return (b"RIFF" + struct.pack("<I", 0) + b"WAVE" + fmt + listing + b"data"
            + struct.pack("<I", size) + bytes(frames * align))


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_a_wav_answer_is_measured_by_its_header_however_it_arrives(piece):
    data = _wav(16_000, 8_000, channels=2) + b"trailing"  # sized: the trailer is not audio
    reader = WavReader()
    seconds = sum(reader.feed(data[i:i + piece]) for i in range(0, len(data), piece))
    assert seconds == pytest.approx(0.5) and reader.rate == 16_000
    streamed = WavReader()  # a streamed WAV's placeholder size: audio to the end
    assert streamed.feed(_wav(22_050, 22_050, sized=False)) == pytest.approx(1.0)


def test_an_answer_that_is_not_measurable_audio_says_what_fixes_it():
    with pytest.raises(NotAudio, match="not a WAV file"):
        WavReader().feed(b"ID3\x04" + bytes(40))
    with pytest.raises(NotAudio, match="rate=HZ"):
        Speech(format="pcm").reader({})
    with pytest.raises(NotAudio, match="stream_format=audio"):
        Speech(format="pcm", rate=24_000).reader({"content-type": "text/event-stream"})
    # the answer's own header wins over a stated rate
    assert Speech(format="pcm", rate=24_000).reader({"x-sample-rate": "22050"}).rate == 22_050


def test_piper_answers_are_measured_from_their_wav_header():
    text = "Piper's own server answers whole files."
    with FakePiper() as piper:
        load = run_load(piper.url, Load(Closed(2), (text,), 3, None, True,
                                        speech=parse(f"p=piper+{piper.url}").speech))
    assert [s.error for s in load.samples] == [None] * 3
    assert [s.audio_s for s in load.samples] == pytest.approx([audio_seconds(text)] * 3)
    assert all(0 < s.ttfa_s <= s.latency_s for s in load.samples)
    assert piper.requests == [("/synthesize", {"text": text})] * 3


# -- a target that cannot be measured -------------------------------------------------------------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_check_names_what_went_wrong_and_the_fix():
    port = _closed_port()
    with pytest.raises(TargetError, match="cannot be reached .* never starts or stops one") as e:
        check(parse(f"gone=http://127.0.0.1:{port}"), False, "Hi.")
    assert e.value.exit_code == 3
    refused = Reply(status=400, chunks=((b'{"error": "Unsupported model: tts-1"}', 0),),
                    chunked=False)
    with StubServer(lambda n: refused) as stub, pytest.raises(
            TargetError, match="Unsupported model.*model=M,voice=V"):
        check(parse(f"k=http://{stub.url[7:]}"), False, "Hi.")
    silent = Reply(chunks=((bytes(4800), 0),), headers=())
    with StubServer(lambda n: silent) as stub:
        with pytest.raises(TargetError, match="without saying its sample rate.*rate=HZ"):
            check(parse(f"k=http://{stub.url[7:]},format=pcm"), True, "Hi.")
        # stated, it is measured
        stated = check(parse(f"k=http://{stub.url[7:]},format=pcm,rate=24000"), True, "Hi.")
        assert stated.speech.rate == 24_000
    with FakePiper() as piper, pytest.raises(TargetError, match="no speech endpoint .* piper+"):
        check(parse(f"p={piper.url}"), False, "Hi.")


def test_a_bad_or_unreachable_url_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["bench", "--url", "a=ftp://h:1", "--output", str(out)]) == 2
    assert main(["bench", "--url", f"gone=http://127.0.0.1:{_closed_port()}",
                 "--output", str(out)]) == 3
    with FakePiper(status=500) as piper:
        assert main(["bench", "--url", f"p=piper+{piper.url}", "--output", str(out)]) == 3
    err = capsys.readouterr().err
    errors = " ".join(err.split()).split("error: ")[1:]
    assert len(errors) == 3 and err.count("\nerror: ") == 2  # each one paragraph
    assert "'ftp://h:1'" in errors[0] and "--url gone" in errors[1]
    assert "cannot be reached" in errors[1]
    assert "failed the request (HTTP 500" in errors[2]
    assert not out.exists()


def test_a_url_only_run_measures_the_server_alone(tmp_path, capsys):
    out = tmp_path / "out"
    with FakePiper() as piper:
        code = main(["bench", "--url", f"piper=piper+{piper.url},voice=joe", "--requests",
                     "4", "--rounds", "2", "--warmup", "1", "--concurrency", "2",
                     "--output", str(out)])
    assert code == 0, capsys.readouterr().err
    data = json.loads((out / "results.json").read_text())
    assert data["settings"]["model"] is None and data["baseline"] is None
    [row] = data["placements"]
    assert (row["name"], row["api"], row["voice"], row["process_count"]) == (
        "piper", "piper", "joe", None)
    [run] = data["runs"]
    assert run["startup_s"] is None and run["processes"] == [] and run["device"] is None
    assert run["peak_rss_total_bytes"] is None and len(run["round_throughput_rps"]) == 2
    load = run["load"]
    assert (load["requests"], load["ok"]) == (4, 4) and load["rtf"]["p50"] > 0
    assert "running outside bench" in (out / "results.md").read_text()
    assert {body["voice"] for _, body in piper.requests} == {"joe"}
    # 1 check, 1 warm-up per round, 4 measured
    assert len(piper.requests) == 1 + 2 + 4 and RATE == 22_050
