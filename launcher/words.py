"""Word timings: when each word of a response is spoken, as the stages know it.

The stage contract's way to say it (docs/stages.md, "Word timings"):

- a request that wants word timings has `timestamps: true` in its payload (`TIMESTAMPS`); a stage
  that would spend work on them only does it then;
- a stage yields them beside its audio, under the key `words` (`WORDS`) of an output: a tuple of
  `WordTiming`, in the order spoken, each time in seconds **from the start of the audio of the
  terminal output that carries it** (a stage upstream of the terminal one may yield them: they
  travel on in the payload, as every key does, to the terminal output made from that payload).
  A word may run past the end of that output's audio (a sentence's words, known at once, ride
  on its first chunk);
- the launcher carries them worker to worker and to the front door, in every placement, and
  there adds the audio before that output (`Timeline`): times from the start of the response.

Times are the model's own (its durations of each phoneme, in frames of its audio), not an
estimate: the same request gives the same words and times wherever its stages run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

WORDS = "words"  # an output's word timings: tuple[WordTiming, ...]
TIMESTAMPS = "timestamps"  # the payload's flag: the client asked for word timings


@dataclass(frozen=True)
class WordTiming:
    """One spoken word: its text, and when it starts and ends, in seconds."""

    word: str
    start: float
    end: float

    def __post_init__(self) -> None:
        if not isinstance(self.word, str):
            raise TypeError(f"a word is a string, not {type(self.word).__name__}")
        if not (math.isfinite(self.start) and math.isfinite(self.end)) \
                or not 0.0 <= self.start <= self.end:
            raise ValueError(f"word {self.word!r}: start {self.start} and end {self.end} must be "
                             "finite seconds with 0 <= start <= end")

    def shifted(self, seconds: float) -> WordTiming:
        return WordTiming(self.word, self.start + seconds, self.end + seconds)


def words_of(value: Any, stage: str) -> tuple[WordTiming, ...]:
    """The `words` of a terminal output, checked: a sequence of `WordTiming` (absent: none).
    Raises ValueError naming the stage for anything else."""
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"stage '{stage}' returned `words` as {type(value).__name__}; it must "
                         "be a sequence of launcher.words.WordTiming")
    words = tuple(value)
    wrong = next((w for w in words if not isinstance(w, WordTiming)), None)
    if wrong is not None:
        raise ValueError(f"stage '{stage}' returned a word as {type(wrong).__name__} "
                         f"({wrong!r:.60}); each must be a launcher.words.WordTiming")
    return words


class Timeline:
    """A response's words in times from its start, chunk by chunk.

    `add(samples, words)` takes one output of the terminal stage (how many samples of audio, and
    its words timed from that audio's start) and returns the words to send with that audio: each
    word goes out with the first chunk whose audio reaches its start (a word the audio has not
    reached yet waits for its chunk), so a client hears what it is told, never ahead. `rest()`
    gives what is left at the end (a word starting after the last sample: none, unless a stage
    timed one so)."""

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.samples = 0
        self._waiting: list[WordTiming] = []

    def add(self, samples: int, words: Iterable[WordTiming] = ()) -> tuple[WordTiming, ...]:
        offset = self.samples / self.sample_rate
        self._waiting += [w.shifted(offset) for w in words]
        self.samples += samples
        reached = self.samples / self.sample_rate
        due = [w for w in self._waiting if w.start < reached]
        self._waiting = [w for w in self._waiting if w.start >= reached]
        return tuple(due)

    def rest(self) -> tuple[WordTiming, ...]:
        rest, self._waiting = tuple(self._waiting), []
        return rest
