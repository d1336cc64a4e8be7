"""The frontend stage: text -> sentences -> phonemes -> the model's ids, with hibari's own G2P;
with word timings asked for, each sentence's words and the ids that say them.

hibari's text side (its sentence split, its phonemizer with the cut of a long sentence at
clause punctuation, its id layout) is reached through its `Hibari` class, whose constructor
also opens the acoustic model's session: this stage runs none of that model, so it builds the
class without its constructor (`_Text`), and hands its G2P an out-of-vocabulary net on a
session with the stage's planned threads (the library's own would take one thread whatever the
plan says).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from models.hibari import text as T
from models.hibari.voice import NAME, vocab
from models.sentence_ids import SpokenWord, packed, wants_words


def _text_side(g2p: Any) -> Any:
    """hibari's `Hibari` with only what `phonemize` and `ids` read (hibari 0.2.1: `voice`, the G2P
    and the vocabulary), and no acoustic session."""
    from hibari import tts

    class _Text(tts.Hibari):
        # not the parent's constructor: it would open the acoustic model's session
        def __init__(self) -> None:
            self.voice = NAME
            self._g2p = g2p
            self.vocab = vocab()

    return _Text()


def _g2p(threads: int) -> Any:
    from hibari.g2p import G2P
    from hibari.g2p import oov
    from hibari.voices import VOICES

    from models.onnx_tools.sessions import session

    british = VOICES[NAME]["british"]
    # the net G2P would load itself (G2P.oov), on a session with the planned threads
    path = os.path.join(oov.ASSETS, "oov_gb.onnx" if british else "oov.onnx")
    with open(path, "rb") as f:
        net = oov.OOV(path, session=session(f.read(), "cpu", None, threads))
    return G2P(oov=net, british=british)


class Frontend:
    def __init__(self, threads: int = 1) -> None:
        self.text = _text_side(_g2p(threads))

    def sentences(self, text: str) -> list[list[int]]:
        """The ids of each sentence with something to say (the library skips the others too)."""
        return self.said(text)[0]

    def said(self, text: str, words: bool = False
             ) -> tuple[list[list[int]], list[list[SpokenWord]] | None]:
        """The ids of each sentence with something to say, and with `words`, its words and the
        ids that say them (`models.hibari.text`: the library's phonemes, each word located)."""
        ids, spoken = [], []
        for phonemes, located in T.sentences(self.text, text):
            said = self.text.ids(phonemes)
            if len(said) <= 2:  # only the two pads
                continue
            ids.append(said)
            if words:
                at = T.id_positions(phonemes, self.text.vocab)
                spoken.append([SpokenWord(label, at[a], at[b]) for label, a, b in located])
        return ids, (spoken if words else None)

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        # `voice` is not read: the front door takes only the card's voices (one: "heart"), and
        # the stages are built with it; hibari's other voices are downloads never made here.
        return packed(*self.said(payload["text"], wants_words(payload)))
