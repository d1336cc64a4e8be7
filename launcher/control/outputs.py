"""What a terminal stage's output gives the client, read one way by every front door."""

from __future__ import annotations

from typing import Any

from launcher.audio import owned_samples
from launcher.errors import StageFailed
from launcher.words import WORDS, WordTiming, words_of


def terminal_output(data: dict[str, Any], stage: str,
                    shared: bool) -> tuple[Any, tuple[WordTiming, ...]]:
    """What a terminal stage's output gives the client: its `audio` as 1-D float32 samples it
    may keep (`launcher.audio.owned_samples`; `shared`: the payload came in a shared block) and
    its word timings. Takes both out of `data`; an output without audio, or with malformed
    timings, is the stage's failure (`StageFailed`). One reading for every front door."""
    audio = owned_samples(data.pop("audio", None), shared)
    if audio is None:
        raise StageFailed(f"terminal stage '{stage}' returned no 'audio' tensor (keys: "
                          f"{sorted(data)})")
    try:
        words = words_of(data.pop(WORDS, None), stage)
    except ValueError as exc:
        raise StageFailed(str(exc)) from None
    return audio, words
