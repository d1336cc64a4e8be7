"""hibari's text side with each word's place in it: the library's own sentence split, G2P and cut
of a long sentence at clause punctuation (`Hibari.phonemize`, hibari 0.2.1), done here step by
step so that each token's phonemes are located in the string the model is given.

The phoneme strings are the library's, character for character (tests compare them with
`Hibari.phonemize`): the audio does not change whether word timings are asked for or not. A word
is a run of tokens with no space between them (`Smith` + `'s`), shown as the G2P read it after
its normalisation (`10:30` is read `ten thirty`: two words; `Dr.` is `Dr`), without the
punctuation around it; its span is its tokens' phonemes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from models.sentence_ids import shown

Word = tuple[str, int, int]  # (as shown, start, end) in its sentence's phoneme string


def sentences(text_side: Any, text: str) -> list[tuple[str, list[Word]]]:
    """(phoneme string, its words) per piece the model is given, as `Hibari.phonemize` cuts
    them."""
    from hibari import tts
    from hibari.g2p.normalize import normalize

    g2p = text_side.g2p
    out: list[tuple[str, list[Word]]] = []
    for sent in text_side.split_sentences(text):
        phonemes, words = _joined(g2p.phonemize_tokens(g2p.tokenize(normalize(sent))), g2p.unk)
        if not phonemes:
            continue
        if len(phonemes) <= tts.MAX_PHONEMES:
            out.append((phonemes, words))
        else:
            out += _cut(phonemes, words, tts.MAX_PHONEMES, tts._CLAUSE)
    return out


def _joined(tokens: Sequence[Any], unk: str) -> tuple[str, list[Word]]:
    """The G2P's string for a line (a token's phonemes, a space where the text had one, the
    ends stripped) and its words."""
    text, spans, groups, group = "", [], [], []
    for i, tk in enumerate(tokens):
        phonemes = unk if tk.phonemes is None else tk.phonemes
        spans.append((len(text), len(text) + len(phonemes)))
        text += phonemes + (" " if tk.whitespace else "")
        group.append(i)
        if tk.whitespace:
            groups.append(group)
            group = []
    if group:
        groups.append(group)
    lead = len(text) - len(text.lstrip())
    phonemes = text.strip()
    words = []
    for group in groups:
        spoken = [i for i in group if any(c.isalnum() for c in tokens[i].text)]
        if not spoken:
            continue
        label = shown("".join(tokens[i].text for i in group))
        start = min(max(0, spans[i][0] - lead) for i in spoken)
        end = max(min(len(phonemes), spans[i][1] - lead) for i in spoken)
        words.append((label, start, max(start, end)))
    return phonemes, words


def _cut(phonemes: str, words: list[Word], limit: int, clause: Any
         ) -> list[tuple[str, list[Word]]]:
    """The library's cut of a long sentence's phonemes at clause punctuation (parts joined by
    one space up to `limit` characters), with each word moved into its piece."""
    parts, start = [], 0
    for m in clause.finditer(phonemes):
        parts.append((start, m.start()))
        start = m.end()
    parts.append((start, len(phonemes)))
    pieces: list[tuple[str, list[tuple[int, int, int]]]] = []  # text, (part start, end, at)
    current, placed = "", []
    for a, b in parts:
        part = phonemes[a:b]
        if current and len(current) + len(part) + 1 > limit:
            pieces.append((current, placed))
            current, placed = part, [(a, b, 0)]
        elif current:
            placed.append((a, b, len(current) + 1))
            current = f"{current} {part}"
        else:
            current, placed = part, [(a, b, 0)]
    if current:
        pieces.append((current, placed))
    out = []
    for text, placed in pieces:
        mine = []
        for label, s, e in words:
            for a, b, at in placed:
                if a <= s < b or (s == e == a):
                    mine.append((label, at + s - a, at + min(e, b) - a))
                    break
        out.append((text, mine))
    return out


def id_positions(phonemes: str, vocab: Mapping[str, int]) -> list[int]:
    """For each position in `phonemes` (and its end), the index of the id its symbol becomes in
    `Hibari.ids` (a pad, then one id per symbol in the vocabulary, then a pad)."""
    out, n = [1], 1
    for c in phonemes:
        n += c in vocab
        out.append(n)
    return out
