"""Paced stand-in stages for bench tests: they sleep known times and make audio of known length,
so time to first audio, latency, real-time factor and stream continuity have known values.

`paced_engine` waits `first_s`, then streams `chunks` chunk markers at once; `paced_vocoder`
turns each into silence after `chunk_s`: `first_audio_s` of it for the first chunk and `audio_s`
for every later one. One request alone in the deployment therefore gets its first audio at
first_s + chunk_s and its last at first_s + chunks * chunk_s, and a player stalls once if
first_audio_s < chunk_s <= audio_s. (The vocoder is a plain function, so a generator's one-chunk
lookahead cannot shift these times.)
"""

from __future__ import annotations

import time

import torch

SAMPLE_RATE = 24_000


def paced_engine(*, first_s: float, chunks: int):
    def run(payload):
        time.sleep(first_s)
        for k in range(chunks):
            yield {"paced_chunk": k}

    return run


def paced_vocoder(*, chunk_s: float, first_audio_s: float, audio_s: float):
    def run(payload):
        time.sleep(chunk_s)
        seconds = first_audio_s if payload["paced_chunk"] == 0 else audio_s
        return {"audio": torch.zeros(round(seconds * SAMPLE_RATE)), "paced_chunk": None}

    return run


def failing_engine(*, message: str = "weights file not found"):
    def run(payload):
        raise RuntimeError(message)

    return run


def paced_config(first_s: float, chunks: int, chunk_s: float, first_audio_s: float,
                 audio_s: float, *, failing: bool = False) -> dict:
    """A complete one-process pipeline of the paced stages, as a bench --config file holds it."""
    engine = ({"factory": "tests.planner.app.bench.factories:failing_engine"} if failing else
              {"factory": "tests.planner.app.bench.factories:paced_engine",
               "args": {"first_s": first_s, "chunks": chunks}})
    return {
        "name": "paced-tts",
        "stages": [
            {"name": "engine", "process": "pipeline", "next": "vocoder",
             "stream_to": ["vocoder"], **engine},
            {"name": "vocoder", "process": "pipeline", "terminal": True,
             "factory": "tests.planner.app.bench.factories:paced_vocoder",
             "args": {"chunk_s": chunk_s, "first_audio_s": first_audio_s, "audio_s": audio_s}},
        ],
    }
