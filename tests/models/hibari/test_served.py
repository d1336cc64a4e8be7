"""hibari-heart served end to end: in every placement the planner accepts, with threads and
copies, the same bits per request, whole or streamed, and the same words and times when word
timestamps are asked; a recogniser understands it; served with no network at all, it lists its
model and one voice, refuses another, and downloads nothing.

Slow: every placement starts real worker processes that load the voice."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import wave
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import planner
from launcher import launch
from launcher.words import TIMESTAMPS
from planner.placements import feasible_placements
from planner.plan import Copies, Threads

from tests.models import needs
from tests.models.asr import transcribe, transcribe_wav, wer
from tests.models.hibari.offline import TEXT as OFFLINE_TEXT

pytestmark = [pytest.mark.slow, needs.hibari]
ROOT = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent
# Sentences no other test speaks: held out from everything the card was checked on while built.
SENTENCES = [
    "A gentle breeze carried the smell of rain across the open field.",
    "My brother repaired the old bicycle in the garage last Sunday.",
    "The library closes early on holidays, so plan your visit carefully.",
    "Our teacher explained the lesson twice because many students were confused.",
    "The small boat drifted slowly toward the rocky island at sunset.",
    "He found a silver coin buried under the sand on the beach.",
]
WER_LIMIT = 0.10
CAPTIONED = f"{SENTENCES[0]} {SENTENCES[1]}"  # two sentences: the second's words offset


def _plans():
    """Every feasible placement; the odd ones with two threads per stage, the first and the
    last with two copies of the vocoder's process (threads times copies are not checked against
    this machine's CPUs: they change how fast it runs, and this checks what it says)."""
    placements = feasible_placements(planner.load("hibari-heart"))
    out = []
    for i, p in enumerate(placements):
        extra = [Threads(s, 2) for s in ("frontend", "acoustic", "vocoder")] if i % 2 else []
        extra += [Copies("vocoder", 2)] if i in (0, len(placements) - 1) else []
        result = planner.solve("hibari-heart", requests=[*p.requests, *extra], cpus=64)
        assert result.ok, result.diagnostics
        out.append(result.plan)
    return out


def _served(plan) -> dict:
    """Each sentence whole and streamed, and CAPTIONED with word timestamps whole and streamed,
    all submitted at once (so copies share them)."""
    with launch(plan, device="cpu", startup_timeout=300) as d:
        handles = [(stream, d.submit(text, "heart", stream=stream))
                   for stream in (False, True) for text in SENTENCES]
        timed = {stream: d.submit(CAPTIONED, "heart", stream=stream, options={TIMESTAMPS: True})
                 for stream in (False, True)}
        audio = {(stream, i % len(SENTENCES)): np.asarray(h.result(timeout=300).samples)
                 for i, (stream, h) in enumerate(handles)}
        captioned = {stream: h.captioned_result(timeout=300) for stream, h in timed.items()}
        copies = {h.copies.get(plan.group_of("vocoder").name) for _, h in handles}
    return {"audio": audio, "copies": copies,
            "words": {s: [(w.word, w.start, w.end) for w in words]
                      for s, (_, words) in captioned.items()},
            "captioned_audio": {s: np.asarray(a.samples) for s, (a, _) in captioned.items()}}


@pytest.fixture(scope="module")
def served_everywhere():
    return [(plan, _served(plan)) for plan in _plans()]


def test_the_same_bits_in_every_placement_thread_and_copy_count(served_everywhere):
    assert sorted(len(plan.groups) for plan, _ in served_everywhere) == [1, 2, 2, 2, 3]
    assert {s.threads for plan, _ in served_everywhere for s in plan.stages} == {1, 2}
    first = served_everywhere[0][1]["audio"]
    for plan, served in served_everywhere:
        where = [(g.stages, g.copies) for g in plan.groups]
        if plan.group_of("vocoder").copies == 2:
            assert len(served["copies"]) == 2, f"one vocoder copy served everything in {where}"
        for key, audio in served["audio"].items():
            assert audio.dtype == np.float32 and audio.size > 24_000  # over a second of speech
            assert np.array_equal(audio, first[key]), f"audio {key} differs in {where}"
    for i in range(len(SENTENCES)):  # a sentence is the stream's piece: streamed = whole
        assert np.array_equal(first[True, i], first[False, i])


def test_the_same_words_and_times_in_every_placement_thread_and_copy_count(served_everywhere):
    first = served_everywhere[0][1]
    words = first["words"][False]
    assert [w for w, _, _ in words] == CAPTIONED.replace(",", "").replace(".", "").split()
    assert first["words"][True] == words  # streamed: the same words and times
    starts = [start for _, start, _ in words]
    assert starts == sorted(starts) and words[-1][2] <= first["captioned_audio"][False].size / 24e3
    # asking for words changes no bit of the audio: each sentence as it was on its own
    said = np.concatenate([first["audio"][False, 0], first["audio"][False, 1]])
    assert all(np.array_equal(a, said) for a in first["captioned_audio"].values())
    for plan, served in served_everywhere:
        where = [(g.stages, g.copies) for g in plan.groups]
        assert served["words"] == first["words"], f"words differ in placement {where}"


@needs.asr
def test_it_speaks_held_out_sentences(served_everywhere):
    audio = served_everywhere[0][1]["audio"]
    heard = [transcribe(audio[False, i], 24_000) for i in range(len(SENTENCES))]
    assert wer(SENTENCES, heard) <= WER_LIMIT, heard


def _isolation(env: dict) -> tuple[list[str], dict]:
    """The command prefix and environment that leave a process no network: a network namespace
    with only loopback (as root, or in a user namespace), else the audit hook."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        if shutil.which("unshare") and subprocess.run(
                [*prefix, "true"], capture_output=True, timeout=30).returncode == 0:
            return prefix, env
    hook = HERE / "no_network"
    return [], {**env, "PYTHONPATH": os.pathsep.join([str(hook), env["PYTHONPATH"]])}


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """One server (two processes) with no network, a fresh voice cache and a fresh cache of
    rewritten graphs, asked by a client in the same namespace."""
    tmp = tmp_path_factory.mktemp("offline")
    (tmp / "hibari-home").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HIBARI_HOME": str(tmp / "hibari-home"),
           "STAGE_PLANNER_CACHE": str(tmp / "graphs"), "NO_COLOR": "1"}
    prefix, env = _isolation(env)
    done = subprocess.run([*prefix, sys.executable, "-m", "tests.models.hibari.offline",
                           str(tmp), "--isolate-stage", "vocoder"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), tmp


def test_served_offline_it_speaks_lists_one_voice_and_downloads_nothing(offline):
    report, out = offline
    assert report["internet"] == [], "the network was reachable: this test proves nothing"
    assert report["server_exit"] == 0 and "Traceback" not in report["server_output"]
    models = [m["id"] for m in report["models"]["json"]["data"]]
    assert models[:3] == ["hibari-heart", "maureesewilliams/hibari", "hibari-tts"]
    voices = report["voices"]["json"]["data"]
    assert voices[0] == {"id": "heart", "object": "voice", "default": True}
    assert "bella" not in {v["id"] for v in voices}  # hibari's, but a download: never offered
    assert report["wav"] == {"status": 200, "rate": "24000"}
    body = (out / "wav").read_bytes()
    with wave.open(io.BytesIO(body)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24_000, 1, 2)
        assert w.getnframes() > 24_000
    assert report["stream"]["status"] == 200 and (out / "stream").read_bytes() == body[44:]
    assert report["bella"]["status"] == 400
    assert "'bella'" in (out / "bella").read_text() and "heart" in (out / "bella").read_text()
    assert report["hibari_home"] == []  # nothing downloaded, nothing cached by hibari
    assert wer([OFFLINE_TEXT], [transcribe_wav(body)]) <= WER_LIMIT


def test_serve_without_hibari_exits_2_saying_how_to_install_it():
    code = ("import sys; sys.modules['hibari'] = None; "
            "sys.argv = ['planner', 'serve', 'hibari-heart', '--port', '0']; "
            "from planner.app.cli import run_and_exit; run_and_exit()")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "hibari missing" in proc.stderr and "pip install -c constraints.txt" in proc.stderr
    assert "nothing was started" in proc.stderr and "Traceback" not in proc.stderr
    assert "ready:" not in proc.stdout


def test_tunes_profiler_runs_the_cards_stages():
    """`planner tune` profiles the stages in its own process with its own payloads (and
    `planner bench` sends what the offline client's stream request sends): the smoke of tune's
    side on this card; both were run end to end on it as on piper-joe."""
    from planner.app.profiling.stage_timing import build_stage, run_request

    plan = planner.solve("hibari-heart").plan
    stages = {s.name: build_stage(s, "cpu", {}) for s in plan.stages}
    for stream in (False, True):
        audio = run_request(plan, stages, OFFLINE_TEXT, defaultdict(list), defaultdict(list),
                            stream=stream)
        assert audio.numel() > 24_000, stream
