"""The hibari-heart stages on the real voice, in this process: hibari's own phonemes and model,
durations, the same bits at any thread count, seeded noise, refusals and setup errors."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models import needs

TEXT = "The quick brown fox jumped over the lazy dog. Dr. Smith paid $9.99 on the 3rd of March!"
ONE = "The quick brown fox jumped over the lazy dog."

pytestmark = needs.hibari


@pytest.fixture(scope="module")
def stages():
    from models import hibari

    return hibari.frontend(), hibari.acoustic(), hibari.vocoder()


def _audio(stages, payload) -> np.ndarray:
    _, acoustic, vocoder = stages
    return np.concatenate([vocoder(piece)["audio"] for piece in acoustic(payload)])


def test_the_frontend_gives_hibaris_own_ids_per_sentence(stages):
    from hibari import Hibari

    frontend = stages[0]
    library = Hibari()
    assert frontend.sentences(TEXT) == [library.ids(p) for p in library.phonemize(TEXT)]
    out = frontend({"text": TEXT, "voice": "heart"})
    assert out["sentence_lengths"].tolist() == [len(s) for s in frontend.sentences(TEXT)] != []
    assert out["ids"].dtype == np.int64 and int(out["sentence_lengths"].sum()) == out["ids"].size
    assert out["text"] is None and out["voice"] is None  # nothing further down needs them


def test_each_sentence_is_one_piece_with_its_frames_and_per_phoneme_durations(stages):
    frontend, acoustic, _ = stages
    payload = frontend({"text": TEXT})
    pieces = list(acoustic(payload))
    assert len(pieces) == payload["sentence_lengths"].size == 2
    for piece, n in zip(pieces, payload["sentence_lengths"].tolist()):
        frames = piece["f0"].size
        for part in ("lh", "theta", "ln", "lr", "phi"):  # the five spectral parts, as dsp wants them
            assert piece[part].shape == (601, frames) and piece[part].dtype == np.float32
        # one duration per phoneme id, in 12.5 ms frames, adding up to the sentence's frames
        assert piece["durations"].shape == (n,) and int(piece["durations"].sum()) == frames
        assert piece["ids"] is None and piece["sentence_lengths"] is None
    faster = next(acoustic({**payload, "speed": 2.0}))
    assert faster["f0"].size < pieces[0]["f0"].size
    with pytest.raises(ValueError, match="speed 5.0 is outside"):
        next(acoustic({**payload, "speed": 5.0}))


def test_the_stages_run_hibaris_model_and_vocoder(stages):
    """Against the library's own synthesis of the same ids with the same noise: the same length
    and close audio. Not the same bits: the stages run the graph with 2-D convolutions (the
    same bits at any thread count), whose rounding the model's quantized layers carry on."""
    from hibari import Hibari

    frontend, acoustic, vocoder = stages
    piece = next(acoustic(frontend({"text": ONE})))
    ours = vocoder(piece)["audio"]
    ids = frontend.sentences(ONE)[0]
    theirs = Hibari().from_ids(ids, 1.0, np.random.default_rng(piece["noise_seed"]))
    assert ours.shape == theirs.shape and ours.size == 300 * piece["f0"].size
    snr = 10 * np.log10(np.sum(theirs ** 2) / np.sum((theirs - ours) ** 2))
    assert snr > 20, snr


def test_the_same_request_gives_the_same_bits_and_the_seed_is_the_cards(stages):
    from models import hibari

    payload = stages[0]({"text": TEXT})
    first = _audio(stages, payload)
    assert np.array_equal(first, _audio(stages, payload))  # nothing drawn from a shared generator
    reseeded = (stages[0], hibari.acoustic(seed=1), stages[2])
    other = _audio(reseeded, payload)
    assert other.shape == first.shape and not np.array_equal(other, first)
    # each sentence's noise comes from its own ids, wherever it sits in a request
    alone = _audio(stages, stages[0]({"text": ONE}))
    assert np.array_equal(first[:alone.size], alone)


def test_two_and_three_threads_give_the_same_bits_as_one(stages):
    """A plan's threads change how fast a stage runs, never its audio: the G2P's net, the
    acoustic graph and the vocoder's FFTs each take the planned threads."""
    from models import hibari

    payload = stages[0]({"text": TEXT})
    want = _audio(stages, payload)
    for threads in (2, 3):
        more = (hibari.frontend(threads=threads), hibari.acoustic(threads=threads),
                hibari.vocoder(threads=threads))
        assert more[1].session.get_session_options().intra_op_num_threads == threads
        assert more[0]({"text": TEXT})["ids"].tolist() == payload["ids"].tolist()
        assert np.array_equal(_audio(more, payload), want), threads


def test_a_request_with_nothing_to_say_gives_empty_audio(stages):
    _, acoustic, vocoder = stages
    pieces = list(acoustic({"ids": np.zeros(0, np.int64),
                            "sentence_lengths": np.zeros(0, np.int64)}))
    assert len(pieces) == 1 and vocoder(pieces[0])["audio"].size == 0


def test_the_rewritten_graph_is_cached_and_an_unknown_export_is_named(tmp_path, monkeypatch):
    from models.hibari import voice

    monkeypatch.setenv("STAGE_PLANNER_CACHE", str(tmp_path))
    graph = voice.acoustic_graph()
    assert list(tmp_path.rglob("*.onnx")) == [
        tmp_path / "hibari" / f"{voice.file_sha256(voice.model_path())[:16]}-v"
                              f"{voice.GRAPH_VERSION}" / "acoustic.onnx"]

    def no_rewrite(source):
        raise AssertionError("rewritten again although cached")

    monkeypatch.setattr(voice, "_rewrite", no_rewrite)
    assert voice.acoustic_graph() == graph
    monkeypatch.undo()
    monkeypatch.setattr(voice, "DURATIONS_TENSOR", "/Cast_99_output_0")
    with pytest.raises(voice.VoiceError, match="'/Cast_99_output_0' missing"):
        voice._rewrite(voice.model_path())


def test_only_the_voice_inside_the_wheel_is_ever_asked_for(monkeypatch, tmp_path):
    from hibari import voices

    from models.hibari import voice

    monkeypatch.setenv("HIBARI_HOME", str(tmp_path))  # no cached download to fall back on
    asked = []
    monkeypatch.setattr(voices, "download", lambda *a: asked.append(a))
    assert voice.model_path().parent.name == "assets" and asked == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("missing", ["hibari", "scipy"])
def test_a_missing_package_fails_the_preflight_with_how_to_install(monkeypatch, missing):
    import models.hibari as hibari

    monkeypatch.setattr(hibari, "_importable", lambda module: module != missing)
    with pytest.raises(RuntimeError, match=rf"\({missing} missing\).*pip install -c "
                                           r"constraints.txt -e '.\[speech\]'.*nothing was"):
        hibari.preflight("vocoder", {})


def test_launch_refuses_before_starting_anything_without_hibari(monkeypatch):
    import planner
    from launcher import LaunchError, launch

    monkeypatch.setattr("models.hibari._importable", lambda module: module != "hibari")
    with pytest.raises(LaunchError, match="stage 'frontend'.*hibari missing"):
        launch(planner.solve("hibari-heart").plan, device="cpu")


LONG = ("Dr. Smith met me at 10:30 on the 3rd of March, e.g. a lot -- didn't he? " + "This "
        "sentence goes on and on, with clause after clause; it keeps going: more words, and "
        "more, " * 6 + "to the end.")


def test_the_frontends_phonemes_are_the_librarys_with_each_word_located(stages):
    """Word timings rebuild the library's text side step by step: its ids are the library's,
    also for a sentence long enough to be cut at its clauses."""
    from hibari import Hibari

    frontend = stages[0]
    library = Hibari()
    for text in (TEXT, LONG):
        want = [library.ids(p) for p in library.phonemize(text)]
        ids, words = frontend.said(text, words=True)
        assert ids == want and frontend.said(text)[1] is None
        assert len(ids) == len(words) and len(ids) >= 2
        for said, located in zip(ids, words):
            assert all(1 <= w.first <= w.end <= len(said) - 1 for w in located)
    second = [w.text for w in frontend.said(TEXT, words=True)[1][1]]
    assert second == ["Dr", "Smith", "paid", "$9.99", "on", "the", "3rd", "of", "March"]
    # the normaliser reads a time as words: two words, as spoken
    assert [w.text for w in frontend.said("We met at 10:30.", words=True)[1][0]] == [
        "We", "met", "at", "ten", "thirty"]


def test_word_timings_are_the_input_words_in_order_within_their_audio(stages):
    from launcher.words import Timeline

    frontend, acoustic, vocoder = stages
    text = "A gentle breeze, then rain. I think that in the end most of the people agree!"
    timeline, audio, words = Timeline(24_000), [], []
    for piece in acoustic(frontend({"text": text, "timestamps": True})):
        audio.append(vocoder(piece)["audio"])
        words += timeline.add(audio[-1].size, piece["words"])
    assert [w.word for w in words] == ["A", "gentle", "breeze", "then", "rain", "I", "think",
                                       "that", "in", "the", "end", "most", "of", "the",
                                       "people", "agree"]
    starts = [w.start for w in words]
    assert starts == sorted(starts) and all(w.end > w.start for w in words)
    assert words[-1].end <= sum(a.size for a in audio) / 24_000
    assert np.array_equal(np.concatenate(audio), _audio(stages, frontend({"text": text})))
