"""The frontend stage: text -> clauses -> espeak-ng phonemes -> the voice's ids, per sentence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.piper import text as T
from models.piper.espeak import Espeak
from models.sentence_ids import packed


class Frontend:
    def __init__(self, id_map: Mapping[str, list[int]], espeak_voice: str = "en-us") -> None:
        self.id_map = id_map
        self.espeak = Espeak(espeak_voice)

    def sentences(self, text: str) -> list[list[int]]:
        """The ids of each sentence with something to say."""
        pairs = [(c, self.espeak.phonemes(c.text)) for c in T.clauses(text)]
        return [T.to_ids(p, self.id_map) for p in T.sentence_phonemes(pairs) if T.has_speech(p)]

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        return packed(self.sentences(payload["text"]))
