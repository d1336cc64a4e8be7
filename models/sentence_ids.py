"""The handoff from a real voice's frontend to its acoustic stage: each sentence's phoneme ids,
flattened (`ids` int64) with their lengths (`sentence_lengths` int64), and the request's `speed`.
Both real cards speak it, so a frontend and an acoustic stage agree on it in one place.

When the request asks for word timings (its payload's `timestamps`), the frontend adds each
sentence's words and the ids each spans (`SpokenWord`): `word_texts` (a list of str),
`word_spans` (int64 [words, 2]: the first id's index in its sentence, one past the last) and
`word_counts` (int64, words per sentence). The acoustic stage, which learns how many frames each
id lasts, turns them into the `words` of its output (`timed`)."""

from __future__ import annotations

import unicodedata
import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from launcher.audio import MAX_SPEED, MIN_SPEED  # OpenAI's `speed` range, checked once
from launcher.words import TIMESTAMPS, WordTiming

# What an acoustic stage drops from what travels on (the vocoder needs none of it).
CONSUMED = {"ids": None, "sentence_lengths": None, "speed": None, "word_texts": None,
            "word_spans": None, "word_counts": None}


@dataclass(frozen=True)
class SpokenWord:
    """A word of a sentence, as shown, and the ids that say it: [first, end) of its sentence's."""

    text: str
    first: int
    end: int


def shown(piece: str) -> str:
    """A written word as a caption shows it: without the punctuation around it (`Dr.` -> `Dr`,
    `"end,"` -> `end`; `10:30` and `Smith's` as they are)."""
    def punct(c: str) -> bool:
        return unicodedata.category(c).startswith("P")

    start, end = 0, len(piece)
    while start < end and punct(piece[start]):
        start += 1
    while end > start and punct(piece[end - 1]):
        end -= 1
    return piece[start:end]


def wants_words(payload: Mapping[str, Any]) -> bool:
    """Whether the request asked for word timings (absent: no)."""
    return bool(payload.get(TIMESTAMPS))


def packed(sentences: Sequence[Sequence[int]],
           words: Sequence[Sequence[SpokenWord]] | None = None) -> dict[str, Any]:
    """A frontend's output: the sentences' ids (and, given, their words), and `text` and
    `voice` dropped."""
    out = {"ids": np.array([i for s in sentences for i in s], dtype=np.int64),
           "sentence_lengths": np.array([len(s) for s in sentences], dtype=np.int64),
           "text": None, "voice": None}
    if words is not None:
        flat = [w for said in words for w in said]
        out |= {"word_texts": [w.text for w in flat],
                "word_spans": np.array([(w.first, w.end) for w in flat],
                                       dtype=np.int64).reshape(-1, 2),
                "word_counts": np.array([len(said) for said in words], dtype=np.int64)}
    return out


def sentences(payload: Mapping[str, Any]) -> list[np.ndarray]:
    """Each sentence's ids, from a frontend's output."""
    ids = np.asarray(payload["ids"])
    bounds = np.cumsum([0, *np.asarray(payload["sentence_lengths"]).tolist()])
    return [ids[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def with_words(payload: Mapping[str, Any]) -> list[tuple[np.ndarray, list[SpokenWord] | None]]:
    """Each sentence's ids beside its words (None for each when the request asked for none)."""
    said = sentences(payload)
    return list(zip(said, sentence_words(payload) or [None] * len(said)))


def noise_seed(ids: np.ndarray, seed: int) -> int:
    """A sentence's noise seed: from its ids and the card's seed, so that the same request gets
    the same noise in every process, placement, thread count and copy."""
    return zlib.crc32(ids.astype(np.int64).tobytes()) ^ seed


def sentence_words(payload: Mapping[str, Any]) -> list[list[SpokenWord]] | None:
    """Each sentence's words, from a frontend's output; None when it gave none (not asked)."""
    if payload.get("word_texts") is None:
        return None
    texts = list(payload["word_texts"])
    spans = np.asarray(payload["word_spans"]).reshape(-1, 2).tolist()
    out, at = [], 0
    for n in np.asarray(payload["word_counts"]).tolist():
        out.append([SpokenWord(texts[k], *spans[k]) for k in range(at, at + n)])
        at += n
    return out


def timed(words: Sequence[SpokenWord], ids: np.ndarray, frames_per_id: np.ndarray,
          seconds_per_frame: float, separators: Collection[int] = ()) -> tuple[WordTiming, ...]:
    """The words of one sentence in seconds from the start of its audio, from how many frames
    each of its ids lasts (the model's own durations).

    A word starts where the word boundary before it starts: the ids just before its first
    phoneme that are `separators` (the model's space between words, and its blank tokens where
    it has them) are its onset, back to the previous word's end; punctuation (a pause) and the
    sentence's start token are not. It ends with its last phoneme's frames (and a blank after
    it). Measured against a forced alignment, starts placed so are the ones that agree with
    where the word is heard (benchmarks/word_timestamps.py)."""
    edges = np.concatenate([[0], np.cumsum(np.rint(frames_per_id).astype(np.int64))])
    last = edges.size - 1
    out, before = [], 0
    for w in words:
        first, end = min(w.first, last), min(w.end, last)
        while first > before and int(ids[first - 1]) in separators:
            first -= 1
        out.append(WordTiming(w.text, float(edges[first]) * seconds_per_frame,
                              float(edges[max(first, end)]) * seconds_per_frame))
        before = max(before, end)
    return tuple(out)


def speed(payload: Mapping[str, Any]) -> float:
    """The request's speed (1.0 when it gave none), checked for a caller other than the front
    door."""
    value = float(payload.get("speed") or 1.0)
    if not MIN_SPEED <= value <= MAX_SPEED:
        raise ValueError(f"speed {value} is outside {MIN_SPEED}-{MAX_SPEED}")
    return value
