"""The piper-joe stages on the real voice, in this process: ids, determinism, streaming."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from models.onnx_tools import sessions
from models.piper.acoustic_stage import chunk_bounds, chunk_schedule

from tests.models import needs

TEXT = "The quick brown fox jumped over the lazy dog. We will meet again next week!"

# SHA-256 of the float32 audio (whole, streamed) of TEXT and of PINNED_TEXT, as the stages gave it
# before they moved from launcher/ to models/ (the same bits at 2 threads and, served, in every
# placement, with copies: tests above and test_served.py). onnxruntime's kernels are picked by the
# CPU's instruction set, and the ids by espeak-ng's version: the bits hold for one such platform.
PINNED_TEXT = "Hello, world. Forty three! It is 7:30 pm on the 3rd of March."
PINNED_ON = ("1.32.0", "1.51", "x86_64", "avx512f")  # onnxruntime, espeak-ng, machine, ISA
PINNED = {
    (TEXT, False): "2f2f7c6c25ff27c447a8057230dd777508c8c21a359ca37c2f1160bc13e3b437",
    (TEXT, True): "a6f98391c4e78fece23b8a725efb8412ac2f43290ebab2fc38579a2f609d8ee4",
    (PINNED_TEXT, False): "4059bdbf58b632609ca54b590fdff1e94898d4b9e1e8b84cd89e529867bb64f1",
    (PINNED_TEXT, True): "84704be55dc6123335c8cb41cc5ffcb322d57e2c78f34039937feea1af9b0708",
}


def test_chunks_follow_the_schedule_across_sentences_and_cover_every_frame():
    assert chunk_bounds(100, (24, 64), 0) == [(0, 24), (24, 88), (88, 100)]
    assert chunk_bounds(100, (24, 64), 3) == [(0, 64), (64, 100)]  # a later sentence
    assert chunk_bounds(300, (24, 64, 128), 0) == [(0, 24), (24, 88), (88, 216), (216, 300)]
    assert chunk_bounds(50, (24, 64, 128), 1) == [(0, 50)]  # cut short by the sentence's end
    assert chunk_bounds(10, (24, 64), 0) == [(0, 10)]
    assert chunk_bounds(0, (24, 64), 0) == []


def test_the_card_gives_the_schedule_as_a_list_or_as_the_older_scalars():
    assert chunk_schedule([24, 64, 128]) == (24, 64, 128)
    assert chunk_schedule(64, first_chunk_frames=24) == (24, 64)
    assert chunk_schedule(64) == (64,)
    with pytest.raises(ValueError, match="not a list with `first_chunk_frames`"):
        chunk_schedule([24, 64], first_chunk_frames=12)
    for bad in ([], [24, 0], [24, 6.5], "24,64", True):
        with pytest.raises(ValueError, match="chunk_frames"):
            chunk_schedule(bad)


@pytest.fixture(scope="module")
def stages():
    from models import piper

    return piper.acoustic(), piper.vocoder()


@pytest.fixture(scope="module")
def frontend():
    from models import piper

    return piper.frontend()


@needs.speech
@needs.espeak
def test_ids_of_fixed_sentences_pinned_to_the_installed_espeak_ng(frontend):
    from models.piper.espeak import version

    if version() != "1.51":
        pytest.skip(f"ids are pinned to espeak-ng 1.51 (Debian 12); this is {version()}")
    ids = frontend.sentences("Hello, world. Forty three!")
    assert ids == [
        [1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 8, 0, 3, 0, 35, 0, 120, 0, 62, 0, 122,
         0, 24, 0, 17, 0, 10, 0, 2],
        [1, 0, 19, 0, 120, 0, 54, 0, 122, 0, 88, 0, 92, 0, 21, 0, 3, 0, 126, 0, 88, 0, 120, 0,
         21, 0, 122, 0, 4, 0, 2],
    ]


@needs.speech
@needs.espeak
def test_frontend_payload_has_ids_and_sentence_lengths(frontend):
    out = frontend({"text": TEXT, "voice": None})
    assert out["sentence_lengths"].tolist() == [len(s) for s in frontend.sentences(TEXT)]
    assert int(out["sentence_lengths"].sum()) == out["ids"].size
    assert out["ids"].dtype == out["sentence_lengths"].dtype == np.int64
    assert out["text"] is None
    nothing = frontend({"text": "... !", "voice": None})
    assert nothing["ids"].size == 0 and nothing["sentence_lengths"].size == 0


@needs.speech
def test_same_ids_same_z_and_a_new_seed_new_z(stages):
    from models import piper

    acoustic, _ = stages
    ids = np.array([1, 0, 20, 0, 59, 0, 24, 0, 120, 0, 27, 0, 100, 0, 10, 0, 2], dtype=np.int64)
    first = acoustic.z(ids)
    assert np.array_equal(first, acoustic.z(ids))  # the noises are inputs, seeded by the ids
    other = piper.acoustic(seed=1).z(ids)
    assert first.shape[0] == 192 and not np.array_equal(first, other[:, :first.shape[1]])
    assert acoustic.z(ids, speed=2.0).shape[1] < first.shape[1]  # speed shortens


def _one_shot(acoustic, vocoder, payload) -> np.ndarray:
    ids, lengths = np.asarray(payload["ids"]), np.asarray(payload["sentence_lengths"]).tolist()
    parts, offset = [], 0
    for n in lengths:
        parts.append(vocoder.decode(acoustic.z(ids[offset:offset + n])))
        offset += n
    return np.concatenate(parts)


@needs.speech
@needs.espeak
def test_streamed_audio_equals_the_one_shot_decode_within_float_rounding(stages, frontend):
    acoustic, vocoder = stages
    payload = {**frontend({"text": TEXT, "voice": None}), "stream": True}
    chunks = list(acoustic(payload))
    biggest = max(acoustic.schedule)
    assert len(chunks) > 3 and all(c["z"].shape[1] <= biggest + 2 * 12 for c in chunks)
    assert chunks[0]["z"].shape[1] - chunks[0]["z_right"] == acoustic.schedule[0]
    streamed = np.concatenate([vocoder(c)["audio"] for c in chunks])
    one_shot = _one_shot(acoustic, vocoder, payload)
    assert streamed.shape == one_shot.shape
    assert np.max(np.abs(streamed - one_shot)) < 1e-4
    # and the streamed path is itself deterministic, bit for bit
    again = np.concatenate([vocoder(c)["audio"] for c in acoustic(payload)])
    assert np.array_equal(again, streamed)


@needs.speech
@needs.espeak
def test_two_intra_op_threads_give_the_same_bits_as_one(stages, frontend):
    """A plan's threads change how fast a stage runs, never its audio (whole or streamed)."""
    from models import piper

    two = piper.acoustic(threads=2), piper.vocoder(threads=2)
    for stream in (False, True):
        payload = {**frontend({"text": TEXT, "voice": None}), "stream": stream}
        audio = [np.concatenate([v(piece)["audio"] for piece in a(payload)]) for a, v in
                 (stages, two)]
        assert np.array_equal(*audio), stream


def _platform() -> tuple[str, str, str, str]:
    import platform

    import onnxruntime

    from models.piper.espeak import version

    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").exists() else []
    isa = next((f for f in ("avx512f", "avx2") if f in flags), "other")
    return onnxruntime.__version__, version(), platform.machine(), isa


@needs.speech
@needs.espeak
def test_the_audio_is_the_bits_pinned_before_the_stages_moved(stages, frontend):
    if _platform() != PINNED_ON:
        pytest.skip(f"the audio is pinned on {PINNED_ON} (onnxruntime, espeak-ng, machine, ISA); "
                    f"this is {_platform()}")
    acoustic, vocoder = stages
    for (text, stream), digest in PINNED.items():
        payload = {**frontend({"text": text, "voice": None}), "stream": stream}
        audio = np.concatenate([vocoder(c)["audio"] for c in acoustic(payload)])
        assert hashlib.sha256(audio.astype(np.float32).tobytes()).hexdigest() == digest, \
            (text, stream)


@needs.speech
@needs.espeak
def test_a_whole_response_gets_each_sentence_in_one_piece_without_context(stages, frontend):
    acoustic, vocoder = stages
    payload = {**frontend({"text": TEXT, "voice": None}), "stream": False}
    pieces = list(acoustic(payload))
    assert len(pieces) == payload["sentence_lengths"].size == 2
    assert all(p["z_left"] == p["z_right"] == 0 for p in pieces)
    whole = np.concatenate([vocoder(p)["audio"] for p in pieces])
    assert np.array_equal(whole, _one_shot(acoustic, vocoder, payload))  # the same bits
    # a payload without the flag (a profiler, a direct caller) is a whole response
    plain = {k: v for k, v in payload.items() if k != "stream"}
    assert [p["z"].shape for p in acoustic(plain)] == [p["z"].shape for p in pieces]


@needs.speech
def test_a_request_with_nothing_to_say_gives_empty_audio(stages):
    acoustic, vocoder = stages
    chunks = list(acoustic({"ids": np.zeros(0, dtype=np.int64),
                            "sentence_lengths": np.zeros(0, dtype=np.int64)}))
    assert len(chunks) == 1 and vocoder(chunks[0])["audio"].size == 0


@needs.speech
def test_the_card_declares_the_voices_sample_rate():
    import planner
    from models.piper import voice

    assert planner.solve("piper-joe").plan.sample_rate == voice.load().sample_rate == 22_050


@needs.speech
def test_cut_parts_are_cached_atomically_and_reused(tmp_path, monkeypatch):
    from models.piper import voice

    monkeypatch.setenv("STAGE_PLANNER_CACHE", str(tmp_path))
    v = voice.load()
    data = voice.cut(v, "decoder")
    path = voice.part_path(v, "decoder")
    assert path.read_bytes() == data and v.sha256[:16] in str(path)
    assert [p.name for p in path.parent.iterdir()] == ["decoder.onnx"]  # no temporary left

    def no_cut(*args):
        raise AssertionError("cut again although cached")

    monkeypatch.setattr(voice, "_extract", no_cut)
    assert voice.cut(v, "decoder") == data


@needs.speech
def test_a_voice_without_the_expected_tensor_fails_naming_it(tmp_path, monkeypatch):
    from models.piper import voice

    monkeypatch.setenv("STAGE_PLANNER_CACHE", str(tmp_path))
    monkeypatch.setitem(voice.PARTS, "decoder", (("/Mul_99_output_0",), ("output",)))
    with pytest.raises(voice.VoiceError, match="/Mul_99_output_0"):
        voice.cut(voice.load(), "decoder")


def test_missing_espeak_ng_fails_the_preflight_with_how_to_install(monkeypatch):
    from models.piper import preflight
    from models.piper.espeak import EspeakMissing

    monkeypatch.setenv("ESPEAK_NG", "no-such-espeak-ng")
    monkeypatch.setattr("models.piper._importable", lambda module: True)
    with pytest.raises(EspeakMissing, match="apt-get install -y espeak-ng"):
        preflight("frontend", {})
    preflight("vocoder", {})  # only the frontend runs espeak-ng


@pytest.mark.skip(reason="needs a CUDA device and onnxruntime-gpu; none is lent to this run")
def test_a_cuda_stage_is_capped_by_its_memory_fraction():
    import torch

    from models import piper

    vocoder = piper.vocoder(device="cuda:0", total_gpu_memory_fraction=0.05)
    opts = vocoder.decoder.get_provider_options()[sessions.CUDA_EP]
    total = torch.cuda.get_device_properties(0).total_memory
    assert int(opts["gpu_mem_limit"]) == int(0.05 * total)


@needs.espeak
def test_an_espeak_ng_child_that_dies_is_replaced_on_the_next_clause():
    from models.piper.espeak import Espeak

    espeak = Espeak()
    try:
        first = espeak.phonemes("hello world")
        assert first == espeak.phonemes("hello world") and "wˈɜːld" in first
        espeak._proc.kill()
        espeak._proc.wait()
        assert espeak.phonemes("hello world") == first
        assert espeak.restarts == 1
    finally:
        espeak.close()
    assert espeak._proc.poll() is not None  # closed means the child is gone


@needs.espeak
def test_a_requests_clauses_are_phonemized_in_one_exchange_each_as_said_alone():
    from models.piper import frontend
    from models.piper import text as T

    stage = frontend()
    exchanges = []
    ask = stage.espeak._ask
    stage.espeak._ask = lambda lines: exchanges.append(len(lines)) or ask(lines)
    try:
        text = "Well, the tide is out; the boats rest on the sand. Nobody minds!"
        clauses = [c.text for c in T.clauses(text)]
        got = stage.espeak.phonemes_each(clauses + [" \n "])
        assert exchanges == [len(clauses)] and got[-1] == ""
        assert got[:-1] == [stage.espeak.phonemes(c) for c in clauses]  # one at a time
        exchanges.clear()
        stage.sentences(text)
        assert exchanges == [len(clauses)]
    finally:
        stage.espeak.close()


def test_launch_refuses_before_starting_anything_when_espeak_ng_is_missing(monkeypatch):
    import planner
    from launcher import LaunchError, launch

    monkeypatch.setenv("ESPEAK_NG", "no-such-espeak-ng")
    monkeypatch.setattr("models.piper._importable", lambda module: True)
    with pytest.raises(LaunchError, match="stage 'frontend'.*apt-get install -y espeak-ng"):
        launch(planner.solve("piper-joe").plan, device="cpu")


@needs.speech
@needs.espeak
def test_a_piper_worker_never_loads_torch():
    """The worker's own modules, the three stages built as a worker builds them, one request
    through them and through the data plane: torch stays out of the process (its pages would
    cost each copy of the process ~100 MiB for nothing)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import launcher.worker.main as main, launcher.backends.local\n"
        "from launcher.wire import ipc\n"
        "from launcher.wire.specs import StageSpec\n"
        "def build(name):\n"
        "    spec = StageSpec(name=name, factory=f'models.piper:{name}', kwargs=(),\n"
        "                     defaults=(), predecessors=(), successors=(), device='cpu',\n"
        "                     remote_inputs=False, threads=1)\n"
        "    return main.build_stage(spec, {'threads': 1, 'device': 'cpu'})\n"
        "frontend, acoustic, vocoder = (build(n) for n in ('frontend', 'acoustic', 'vocoder'))\n"
        "main.torch_threads(1)\n"
        "pool = ipc.SegmentPool('stageplanner-test-', 'piper')\n"
        "receiver = ipc.Receiver(pool.release)\n"
        "ids = receiver.unpack(pool.pack(frontend({'text': 'Hello there.'}), 'd'))\n"
        "audio = [vocoder(c)['audio'] for c in acoustic(ids)]\n"
        "assert sum(a.size for a in audio) > 1000, 'no audio'\n"
        "receiver.close(); pool.close()\n"
        "assert 'torch' not in sys.modules, 'a piper worker imported torch'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert done.returncode == 0, done.stderr[-2000:]


def _timed(acoustic, vocoder, payload):
    """The audio of a request and its words, timed from its start (as the launcher times them)."""
    from launcher.words import Timeline

    timeline = Timeline(22_050)
    audio, words = [], []
    for piece in acoustic(payload):
        audio.append(vocoder(piece)["audio"])
        words += timeline.add(audio[-1].size, piece.get("words", ()))
    return np.concatenate(audio), [*words, *timeline.rest()]


@needs.speech
@needs.espeak
def test_word_timings_are_the_input_words_in_order_within_their_audio(stages, frontend):
    acoustic, vocoder = stages
    text = "Hello, world. I think that in the end, most of the people met at 10:30 on Dr. Smith's!"
    plain = frontend({"text": text})
    asked = frontend({"text": text, "timestamps": True})
    assert asked["ids"].tolist() == plain["ids"].tolist()  # asking changes nothing said
    got = {}
    for stream in (False, True):
        audio, words = _timed(acoustic, vocoder, {**asked, "stream": stream})
        untimed = np.concatenate([vocoder(c)["audio"] for c in acoustic({**plain,
                                                                         "stream": stream})])
        assert np.array_equal(audio, untimed)  # and the audio is the same bits
        assert [w.word for w in words] == [
            "Hello", "world", "I", "think", "that", "in", "the", "end", "most", "of", "the",
            "people", "met", "at", "10:30", "on", "Dr", "Smith's"]
        starts = [w.start for w in words]
        assert starts == sorted(starts) and all(w.end > w.start for w in words)
        assert words[-1].end <= audio.size / 22_050
        got[stream] = words
    assert got[False] == got[True]  # the same times whole or streamed
    assert "words" not in next(acoustic(plain))  # not asked: none
