"""The frontend stage: text -> clauses -> espeak-ng phonemes -> the voice's ids, per sentence;
with word timings asked for, each sentence's words and the ids that say them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models.piper import text as T
from models.piper.espeak import Espeak
from models.piper.word_spans import spans
from models.sentence_ids import SpokenWord, packed, wants_words


class Frontend:
    def __init__(self, id_map: Mapping[str, list[int]], espeak_voice: str = "en-us") -> None:
        self.id_map = id_map
        self.espeak = Espeak(espeak_voice)

    def sentences(self, text: str) -> list[list[int]]:
        """The ids of each sentence with something to say."""
        return self.said(text)[0]

    def said(self, text: str, words: bool = False
             ) -> tuple[list[list[int]], list[list[SpokenWord]] | None]:
        """The ids of each sentence with something to say, and with `words`, its words."""
        clauses = T.clauses(text)
        pairs = list(zip(clauses, self.espeak.phonemes_each([c.text for c in clauses])))
        kept = [s for s in T.sentence_layout(pairs) if T.has_speech(s.phonemes)]
        ids = [T.to_ids(s.phonemes, self.id_map) for s in kept]
        return ids, (self._words(kept, pairs) if words else None)

    def _words(self, kept: list[T.Sentence], pairs: list[tuple[T.Clause, str]]
               ) -> list[list[SpokenWord]]:
        """Each sentence's words, located in its phonemes (`word_spans`: every word said alone
        too, all in one exchange with espeak-ng) and so in its ids."""
        clause_words = {i: T.words(pairs[i][0].text) for s in kept for i, _ in s.clauses}
        asked = [raw for i in sorted(clause_words) for raw, _ in clause_words[i]]
        alone = iter(self.espeak.phonemes_each(asked))
        out = []
        for sentence in kept:
            before = T.symbols_before(sentence.phonemes, self.id_map)
            size = len(sentence.phonemes)
            found = []
            for i, at in sentence.clauses:
                written = clause_words[i]
                located = spans([next(alone) for _ in written], T.clean(pairs[i][1]))
                for (_, shown), (a, b) in zip(written, located):
                    a, b = min(at + a, size), min(at + b, size)
                    found.append(SpokenWord(shown, 2 + 2 * before[a], 2 + 2 * before[b]))
            out.append(found)
        return out

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        return packed(*self.said(payload["text"], wants_words(payload)))
