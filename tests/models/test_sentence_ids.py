"""The frontend -> acoustic handoff both real voices speak: sentences round-trip, speed checked."""

from __future__ import annotations

import numpy as np
import pytest

from models import sentence_ids


def test_sentences_come_back_as_the_frontend_packed_them():
    out = sentence_ids.packed([[0, 5, 6, 0], [0, 7, 0]])
    assert out["ids"].dtype == out["sentence_lengths"].dtype == np.int64
    assert out["text"] is None and out["voice"] is None  # dropped from what travels on
    assert [s.tolist() for s in sentence_ids.sentences(out)] == [[0, 5, 6, 0], [0, 7, 0]]
    assert sentence_ids.sentences(sentence_ids.packed([])) == []


def test_speed_defaults_to_one_and_is_checked_against_openais_range():
    assert sentence_ids.speed({}) == sentence_ids.speed({"speed": None}) == 1.0
    assert sentence_ids.speed({"speed": 4}) == 4.0
    for bad in (0.2, 4.5):
        with pytest.raises(ValueError, match=f"speed {bad} is outside 0.25-4.0"):
            sentence_ids.speed({"speed": bad})


def test_words_travel_with_their_sentences_and_are_timed_by_the_frames_of_their_ids():
    W = sentence_ids.SpokenWord
    words = [[W("hi", 1, 3), W("you", 4, 6)], [W("go", 1, 2)]]
    out = sentence_ids.packed([[0, 5, 6, 9, 7, 8, 0], [0, 7, 0]], words)
    assert sentence_ids.sentence_words(out) == words
    assert sentence_ids.sentence_words(sentence_ids.packed([[0, 7, 0]])) is None  # not asked
    assert set(sentence_ids.CONSUMED) >= {"word_texts", "word_spans", "word_counts"}
    ids = np.array([0, 5, 6, 9, 7, 8, 0])  # 9: the space between the two words
    frames = np.array([4, 2, 3, 5, 1, 1, 6])
    timed = sentence_ids.timed(words[0], ids, frames, 0.5, separators={9})
    # "hi" starts with its first id (after the start token), "you" with the space before it
    assert [(w.word, w.start, w.end) for w in timed] == [("hi", 2.0, 4.5), ("you", 4.5, 8.0)]
    no_gap = sentence_ids.timed(words[0], ids, frames, 0.5)
    assert no_gap[1].start == 7.0


def test_a_word_is_shown_without_the_punctuation_around_it():
    assert [sentence_ids.shown(w) for w in ('"Dr.', "end,", "10:30", "Smith's", "(U.S.A.)")] \
        == ["Dr", "end", "10:30", "Smith's", "U.S.A"]
