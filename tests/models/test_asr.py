"""The intelligibility check itself: its error rate is right, and it rejects noise and silence."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models import needs
from tests.models.asr import transcribe, wer
from tests.models.piper.sentences import SENTENCES, WER_LIMIT


def test_word_error_rate_counts_substitutions_deletions_and_insertions():
    assert wer(["the cat sat"], ["the cat sat"]) == 0.0
    assert wer(["the cat sat"], ["the bat sat"]) == pytest.approx(1 / 3)
    assert wer(["the cat sat"], ["the sat"]) == pytest.approx(1 / 3)
    assert wer(["the cat sat"], ["the cat sat down now"]) == pytest.approx(2 / 3)
    assert wer(["a b", "c d e f"], ["a b", ""]) == pytest.approx(4 / 6)
    assert wer(["Hello, World!"], ["hello world"]) == 0.0


@pytest.mark.slow
@needs.asr
@pytest.mark.parametrize("kind", ["white noise", "silence"])
def test_the_speech_check_fails_on_noise_and_silence(kind):
    # One clip stands for every sentence (the recogniser is slow on noise: its beam fills up).
    rate = 22_050
    clip = np.zeros(2 * rate, dtype=np.float32)
    if kind == "white noise":
        clip = (0.1 * np.random.default_rng(7).standard_normal(2 * rate)).astype(np.float32)
    heard = transcribe(clip, rate)
    assert wer(SENTENCES, [heard] * len(SENTENCES)) > WER_LIMIT, heard
