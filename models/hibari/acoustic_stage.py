"""The acoustic stage: ids + speed -> frame parameters every 12.5 ms, one sentence at a time.

Each sentence is one run of the acoustic graph (not autoregressive: the sentence's frames come at
once) and is handed on as one piece, whole response or streamed alike: hibari's vocoder draws
its pulses' phase and its noise over a whole sentence, so a sentence is the smallest piece whose
audio does not depend on how it was cut. Whole and streamed responses are the same bits.

The vocoder's noise is seeded per sentence from its ids (`crc32(ids) ^ seed`, as piper-joe's
noises are): the seed travels in the payload, so the same request gives the same bits in every
process, placement, thread count and copy.

Word timings (a request with `timestamps`): the graph's durations (frames per id) time each of a
sentence's words (from the frontend), which ride on the sentence's piece as its `words`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from launcher.words import WORDS
from models import sentence_ids as request
from models.hibari.voice import DURATIONS, FRAME_PARTS, FRAMES_PER_STEP

BINS = 601  # frequency bins of each spectral part (n_fft 1200)
SECONDS_PER_FRAME = 0.0125  # a frame every 12.5 ms: 300 samples of the vocoder's 24 kHz audio


class Acoustic:
    def __init__(self, graph: bytes, *, seed: int, device: str, fraction: float | None,
                 threads: int, separators: frozenset[int] = frozenset()) -> None:
        from models.onnx_tools.sessions import session

        self.session = session(graph, device, fraction, threads)
        self.outputs = [o.name for o in self.session.get_outputs()]
        self.seed = seed
        self.separators = separators  # the ids between words (the space): a word's onset

    def frames(self, ids: np.ndarray, speed: float = 1.0) -> dict[str, np.ndarray]:
        """One sentence's five spectral parts (`FRAME_PARTS`: lh, theta, ln, lr, phi), each
        float32 [601, F], `f0` [F] and `durations` int64 [ids]: the frames each id lasts (they
        sum to F). The parts go on as the graph made them: stacking them into one array cost a
        copy of some megabytes per sentence, in every placement."""
        out = dict(zip(self.outputs, self.session.run(None, {
            "ids": ids.reshape(1, -1).astype(np.int64),
            "speed": np.array([speed], dtype=np.float32)})))
        return {**{p: out[p][0] for p in FRAME_PARTS},
                "f0": out["f0"][0], "durations": out[DURATIONS] * FRAMES_PER_STEP}

    def __call__(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        speed = request.speed(payload)
        said = request.with_words(payload)
        for ids, spoken in said:
            piece = {**self.frames(ids, speed), "noise_seed": request.noise_seed(ids, self.seed),
                     **request.CONSUMED}
            if spoken is not None:
                piece[WORDS] = request.timed(spoken, ids, piece["durations"], SECONDS_PER_FRAME,
                                             self.separators)
            yield piece
        if not said:  # nothing to say (only punctuation): one empty piece ends the request
            yield {**{p: np.zeros((BINS, 0), np.float32) for p in FRAME_PARTS},
                   "f0": np.zeros(0, np.float32), "durations": np.zeros(0, np.int64),
                   "noise_seed": 0, **request.CONSUMED}
