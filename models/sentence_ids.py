"""The handoff from a real voice's frontend to its acoustic stage: each sentence's phoneme ids,
flattened (`ids` int64) with their lengths (`sentence_lengths` int64), and the request's `speed`.
Both real cards speak it, so a frontend and an acoustic stage agree on it in one place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from launcher.audio import MAX_SPEED, MIN_SPEED  # OpenAI's `speed` range, checked once

# What an acoustic stage drops from what travels on (the vocoder needs none of it).
CONSUMED = {"ids": None, "sentence_lengths": None, "speed": None}


def packed(sentences: Sequence[Sequence[int]]) -> dict[str, Any]:
    """A frontend's output: the sentences' ids, and `text` and `voice` dropped."""
    return {"ids": np.array([i for s in sentences for i in s], dtype=np.int64),
            "sentence_lengths": np.array([len(s) for s in sentences], dtype=np.int64),
            "text": None, "voice": None}


def sentences(payload: Mapping[str, Any]) -> list[np.ndarray]:
    """Each sentence's ids, from a frontend's output."""
    ids = np.asarray(payload["ids"])
    bounds = np.cumsum([0, *np.asarray(payload["sentence_lengths"]).tolist()])
    return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def speed(payload: Mapping[str, Any]) -> float:
    """The request's speed (1.0 when it gave none), checked for a caller other than the front
    door."""
    value = float(payload.get("speed") or 1.0)
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise ValueError(f"speed {value} is outside {MIN_SPEED}-{MAX_SPEED}")
    return value
