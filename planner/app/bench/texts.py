"""Request texts: seeded, so every placement (and every rerun with the same seed) gets the same."""

from __future__ import annotations

import random

# Plain words with digits and punctuation mixed in, so text normalisation has work to do.
_WORDS = (
    "the a of and to in is it that for on with as was at by this from be are or an have not "
    "but had they which one you were all we there can been has their more if will would who "
    "about when so up out what into only time could some them other than then now look very "
    "after also many where most voice sound speech model signal stage process river window "
    "morning station garden letter number market summer orange yellow quiet gentle careful"
).split()
_NUMBERS = ("3", "12", "42", "2024", "7.5", "100")


def request_text(seed: int, index: int, chars: int) -> str:
    """The `index`-th request text for `seed`, about `chars` characters, ending in a full stop."""
    rng = random.Random(f"stage-planner-bench:{seed}:{index}")
    words: list[str] = []
    length = -1  # no space before the first word
    while True:
        word = rng.choice(_NUMBERS) if rng.random() < 0.06 else rng.choice(_WORDS)
        comma = bool(words) and rng.random() < 0.08
        if words and length + comma + 1 + len(word) + 1 > chars:  # +1 for the full stop
            break
        if comma:
            words[-1] += ","
            length += 1
        words.append(word)
        length += 1 + len(word)
    text = " ".join(words).rstrip(",")
    return text[:1].upper() + text[1:] + "."


def request_texts(seed: int, count: int, chars: int) -> tuple[str, ...]:
    return tuple(request_text(seed, i, chars) for i in range(count))


def warmup_texts(seed: int, count: int, chars: int) -> tuple[str, ...]:
    """Texts the measured requests never use, so warm-up cannot pre-fill any cache for them."""
    return tuple(request_text(seed, -1 - i, chars) for i in range(count))
