"""A forced alignment of speech with its words: where a recogniser hears each word begin.

pocketsphinx (BSD; its US English model and dictionary ship in the wheel, the dev extra) in its
alignment mode (`Decoder.set_align_text`): the search is a grammar of exactly the given words in
order, with optional silence between them, so the only question it answers is where each word
lies; its word segments are 10 ms frames. The audio is resampled to its 16 kHz model first.
What `word_timestamps` measures the models' own word timings against.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence

import numpy as np

RATE = 16_000  # pocketsphinx's acoustic model
FRAME_S = 0.01  # its frame step


def spelled(word: str) -> str:
    """A word as the recogniser's dictionary spells it: lower case, letters and apostrophes."""
    return re.sub(r"[^a-z']", "", word.lower())


@functools.lru_cache(maxsize=1)
def _decoder():
    from pocketsphinx import Decoder

    return Decoder(samprate=RATE, loglevel="FATAL")


def unknown(words: Sequence[str]) -> list[str]:
    """The words the recogniser's dictionary lacks (it cannot align those)."""
    return [w for w in words if not spelled(w) or _decoder().lookup_word(spelled(w)) is None]


def word_starts(samples: np.ndarray, rate: int, words: Sequence[str]) -> list[float] | None:
    """The second at which each of `words` begins in `samples` (mono float at `rate` Hz), or
    None when the recogniser found no alignment of them."""
    from scipy.signal import resample_poly

    common = math.gcd(RATE, rate)
    audio = resample_poly(np.asarray(samples, dtype=np.float64), RATE // common, rate // common)
    pcm = (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    decoder = _decoder()
    decoder.set_align_text(" ".join(spelled(w) for w in words))
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    segments = decoder.seg()
    if segments is None:
        return None
    # "<s>", "</s>", "<sil>" and noise fillers ("[NOISE]") are not words; "the(2)" is the
    # dictionary's second pronunciation of "the"
    starts = [s.start_frame * FRAME_S for s in segments
              if not s.word.startswith(("<", "[")) and s.word != "(NULL)"]
    return starts if len(starts) == len(words) else None
