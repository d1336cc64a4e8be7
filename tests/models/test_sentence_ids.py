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
