"""Text to clauses, and phonemes to the voice's ids: the pure half of the frontend.

espeak-ng's own clause rules, as its library applies them for piper (one call per clause), so
that the espeak-ng program, fed one clause per line, yields the phonemes piper would:

- a clause ends at `,` `;` `:` followed by a space (not a sentence end; the terminator is kept
  and one space follows it in the phonemes);
- a run of `.` `!` `?` followed by a space or the end ends the sentence; the run's first mark
  is its terminator (`?!` -> `?`, `!!!` -> `!`) ...
- ... except a `.` before a lower-case word, which ends nothing (`a.m. tomorrow`); before a
  capital it does, even after `Dr.` or `Mr.`, as espeak does;
- `...` or `…` ends a clause with no terminator and no space;
- a spaced em or en dash (` — `, ` – `) ends a clause with terminator `;`.

Punctuation inside a word or number (`3.14`, `10:30`, `1,000`) ends nothing.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from models.sentence_ids import shown

BOS, EOS, PAD = "^", "$", "_"


@dataclass(frozen=True)
class Clause:
    text: str  # what espeak-ng phonemizes (no terminator)
    terminator: str  # appended to the clause's phonemes: "." "!" "?" "," ";" ":" or ""
    sentence_end: bool


_BREAK = re.compile(
    r"(?P<ellipsis>\.\.\.+|…)(?=\s|$)"
    r"|(?P<end>[.!?]+)(?=\s|$)"
    r"|(?P<pause>[,;:])(?=\s|$)"
    r"|(?P<dash>\s[—–]\s)"
)
_WHITESPACE = re.compile(r"\s+")


def normalise(text: str) -> str:
    """NFC, control characters dropped, whitespace collapsed: one line for espeak-ng."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in text)
    return _WHITESPACE.sub(" ", text).strip()


def clauses(text: str) -> list[Clause]:
    text = normalise(text)
    out: list[Clause] = []
    start = 0
    for m in _BREAK.finditer(text):
        kind, mark = m.lastgroup, m.group()
        following = text[m.end():].lstrip()
        if kind == "end" and mark[0] == "." and following[:1].islower():
            continue  # `a.m. tomorrow`: espeak reads on
        body = text[start:m.start()].strip()
        start = m.end()
        if kind == "ellipsis":
            out.append(Clause(body, "", False))
        elif kind == "end":
            out.append(Clause(body, mark[0], True))
        elif kind == "pause":
            out.append(Clause(body, mark, False))
        else:
            out.append(Clause(body, ";", False))
    rest = text[start:].strip()
    if rest:
        out.append(Clause(rest, ".", True))  # espeak ends unterminated text as a sentence
    return [c for c in out if c.text or c.terminator]


@dataclass(frozen=True)
class Sentence:
    phonemes: str  # what its ids are made of
    clauses: tuple[tuple[int, int], ...]  # (clause index, where its phonemes begin in `phonemes`)


def sentence_layout(pairs: Sequence[tuple[Clause, str]]) -> list[Sentence]:
    """Each sentence's phoneme string, from each clause and its espeak-ng phonemes, and where
    each clause's phonemes (less espeak's `(lang)` switch marks: `clean`) begin in it."""
    sentences: list[Sentence] = []
    current, members = "", []
    for i, (clause, phonemes) in enumerate(pairs):
        members.append((i, len(current)))
        current += clean(phonemes) + clause.terminator
        if clause.terminator in (",", ";", ":"):
            current += " "
        if clause.sentence_end:
            sentences.append(_stripped(current, members))
            current, members = "", []
    if current.strip():
        sentences.append(_stripped(current, members))
    return sentences


def _stripped(phonemes: str, members: list[tuple[int, int]]) -> Sentence:
    lead = len(phonemes) - len(phonemes.lstrip())
    return Sentence(phonemes.strip(), tuple((i, max(0, at - lead)) for i, at in members))


def sentence_phonemes(pairs: Sequence[tuple[Clause, str]]) -> list[str]:
    """Phoneme strings, one per sentence, from each clause and its espeak-ng phonemes."""
    return [s.phonemes for s in sentence_layout(pairs)]


def clean(phonemes: str) -> str:
    """A clause's phonemes less espeak's (lang) switch marks."""
    return re.sub(r"\([^)]*\)", "", phonemes)


def words(clause: str) -> list[tuple[str, str]]:
    """The words of a clause's text, (as written, as shown): each whitespace-separated piece
    with a letter or digit (`sentence_ids.shown`: `Dr.` -> `Dr`)."""
    return [(piece, shown(piece)) for piece in clause.split() if any(c.isalnum() for c in piece)]


def symbols_before(phonemes: str, id_map: Mapping[str, Sequence[int]]) -> list[int]:
    """For each position in `phonemes` (and its end), how many symbols before it become ids in
    `to_ids`: the id of the symbol at position j is at index 2 + 2 x that count."""
    counts, n = [0], 0
    for c in phonemes:
        n += sum(1 for symbol in unicodedata.normalize("NFD", c) if symbol in id_map)
        counts.append(n)
    return counts


def to_ids(phonemes: str, id_map: Mapping[str, Sequence[int]]) -> list[int]:
    """`^ _ p1 _ p2 _ ... pn _ $`: piper's layout (BOS, a pad after every symbol, EOS); a
    phoneme the voice does not know is skipped, as piper does."""
    ids = [*id_map[BOS], *id_map[PAD]]
    for symbol in unicodedata.normalize("NFD", phonemes):
        if symbol in id_map:
            ids += [*id_map[symbol], *id_map[PAD]]
    return ids + [*id_map[EOS]]


def has_speech(phonemes: str) -> bool:
    """Whether a sentence has anything to say (not only punctuation and spaces)."""
    return any(unicodedata.category(c)[0] == "L" or c in "ˈˌː" for c in phonemes)
