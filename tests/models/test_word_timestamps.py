"""The real voices' word timestamps agree with a forced alignment of their own audio: on sentences
no other test speaks, each word's start within 80 ms of where pocketsphinx's alignment hears it
at the median, and within 200 ms at the 90th percentile (benchmarks/word_timestamps.py measures
more sentences). Audio computations, not timings: a busy machine does not change them.

Slow: each voice's stages are built and speak four sentences."""

from __future__ import annotations

import re

import pytest

from benchmarks.word_timestamps import MEDIAN_BAR_S, P90_BAR_S, compare, spoken

from tests.models import needs

pytestmark = [pytest.mark.slow, needs.asr]
HELD_OUT = [
    "The gardener trimmed the hedges and raked the fallen leaves.",
    "Several birds gathered on the wire outside my bedroom window.",
    "Mother baked a chocolate cake for the party on Friday evening.",
    "The tired hikers finally reached the cabin just before midnight.",
]
VOICES = [pytest.param("piper-joe", marks=[needs.speech, needs.espeak]),
          pytest.param("hibari-heart", marks=needs.hibari)]


@pytest.mark.parametrize("card", VOICES)
def test_word_starts_agree_with_a_forced_alignment(card):
    result = compare(card, HELD_OUT)
    assert result.skipped == ()
    s = result.summary()
    assert s["words"] == sum(len(t.split()) for t in HELD_OUT)
    assert s["median"] <= MEDIAN_BAR_S and s["p90"] <= P90_BAR_S, s


@pytest.mark.parametrize("card", VOICES)
def test_the_words_are_the_inputs_words_in_order(card):
    _, _, words = spoken(card)(" ".join(HELD_OUT))
    assert [w.word for w in words] == re.sub(r"[.,]", "", " ".join(HELD_OUT)).split()
