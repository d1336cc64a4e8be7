"""Where each word of a clause lies in the clause's espeak-ng phonemes.

espeak-ng writes a space between the words it says, but its words are not always the text's: it
joins some (`in the` -> `ɪnðɪ`, `of the` -> `ʌvðə`), says one written word as several (`10:30`
-> `tˈɛn θˈɜːɾi`) and expands abbreviations (`Dr.` -> `dˈɑːktɚ`). So the frontend also asks
espeak-ng for each word said alone, and this lines those up with the clause's phonemes: the
matching blocks of the two character sequences (difflib, stress marks and spaces aside, which
differ between a word alone and in context) give each phoneme of the clause the word whose own
phonemes it matched. What matched nothing goes to the word before it, up to a space, and to the
word after it past one. A word none of whose phonemes is found gets an empty span where it
would be.

The phonemes the voice speaks are the clause's, untouched: this only reads them.
"""

from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

IGNORED = "ˈˌ"  # stress marks: a word alone is stressed where in context it may not be


def spans(alone: Sequence[str], phonemes: str) -> list[tuple[int, int]]:
    """[start, end) in `phonemes` of each word, given each word's phonemes said alone; in order
    and never overlapping."""
    source, label = [], []
    for i, said in enumerate(alone):
        for c in said:
            if c not in IGNORED and not c.isspace():
                source.append(c)
                label.append(i)
    target, where = [], []
    for j, c in enumerate(phonemes):
        if c not in IGNORED and not c.isspace():
            target.append(c)
            where.append(j)
    owner: list[int | None] = [None] * len(target)
    for a, b, size in SequenceMatcher(None, source, target, autojunk=False).get_matching_blocks():
        for k in range(size):
            owner[b + k] = label[a + k]
    _fill(owner, where, phonemes, len(alone))
    return _word_spans(len(alone), owner, where, phonemes)


def _fill(owner: list[int | None], where: list[int], phonemes: str, count: int) -> None:
    """Give each unmatched phoneme a word. In a run of them between two words' phonemes, what
    comes before the run's first space is the earlier word's; each spoken word after a space
    goes to the next word that has no phonemes yet (said otherwise in context than alone, as
    `a` -> `ɐ`), and once none is left, to the later word."""
    k = 0
    while k < len(owner):
        if owner[k] is not None:
            k += 1
            continue
        end = k
        while end < len(owner) and owner[end] is None:
            end += 1
        left = owner[k - 1] if k > 0 else None
        right = owner[end] if end < len(owner) else None
        word = -1 if left is None else left  # the word the run's phonemes go to, so far
        last = count - 1 if right is None else right
        for j in range(k, end):
            if j == 0 or " " in phonemes[where[j - 1]:where[j]]:
                word = min(word + 1, last)
            owner[j] = word
        k = end


def _word_spans(count: int, owner: list[int | None], where: list[int],
                phonemes: str) -> list[tuple[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, o in enumerate(owner):
        if o is not None:
            first.setdefault(o, k)
            last[o] = k
    out, at = [], 0
    for i in range(count):
        if i not in first:
            out.append((at, at))  # said as nothing espeak-ng wrote here: an empty span
            continue
        start = where[first[i]]
        while start > at and phonemes[start - 1] in IGNORED:
            start -= 1  # its stress mark, written before the vowel, is the word's
        end = where[last[i]] + 1
        out.append((max(start, at), end))
        at = end
    return out
