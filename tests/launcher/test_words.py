"""Word timings as the launcher carries them (`launcher.words`): each word timed from the start of
the response, sent with the first piece of audio that reaches it; a stage's `words` checked."""

from __future__ import annotations

import pickle

import pytest

from launcher.words import Timeline, WordTiming, words_of


def test_each_word_goes_out_with_the_first_piece_whose_audio_reaches_its_start():
    timeline = Timeline(sample_rate=100)
    # a sentence's words ride on its first piece, timed from that piece's start
    sentence = (WordTiming("one", 0.1, 0.4), WordTiming("two", 0.5, 0.9),
                WordTiming("three", 1.2, 1.5))
    assert timeline.add(50, sentence) == (WordTiming("one", 0.1, 0.4),)
    assert timeline.add(50) == (WordTiming("two", 0.5, 0.9),)  # audio up to 1.0 s
    assert timeline.add(10) == ()  # 1.1 s: "three" not reached yet
    later = (WordTiming("four", 0.0, 0.2),)  # the next sentence starts at 1.1 s
    assert timeline.add(100, later) == (WordTiming("three", 1.2, 1.5),
                                        WordTiming("four", 1.1, 1.3))
    assert timeline.rest() == ()


def test_a_word_past_the_last_sample_is_left_for_the_end():
    timeline = Timeline(sample_rate=10)
    assert timeline.add(10, (WordTiming("late", 1.0, 1.0),)) == ()  # starts where audio ends
    assert timeline.rest() == (WordTiming("late", 1.0, 1.0),)


def test_a_stages_words_must_be_word_timings():
    words = (WordTiming("a", 0.0, 0.1),)
    assert words_of(None, "acoustic") == () and words_of(list(words), "acoustic") == words
    for bad in ("a b", [("a", 0.0, 0.1)], 3):
        with pytest.raises(ValueError, match="stage 'acoustic'.*WordTiming"):
            words_of(bad, "acoustic")


def test_a_word_timing_is_a_checked_value_that_crosses_processes():
    w = WordTiming("hello", 0.25, 0.5)
    assert pickle.loads(pickle.dumps(w)) == w and w.shifted(1.0) == WordTiming("hello", 1.25, 1.5)
    for start, end in ((0.5, 0.25), (-0.1, 0.2), (float("nan"), 1.0)):
        with pytest.raises(ValueError, match="0 <= start <= end"):
            WordTiming("x", start, end)
