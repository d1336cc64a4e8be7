"""The vocoder stage: a sentence's frame parameters -> its 24 kHz audio, by hibari's own
signal processing (`hibari.dsp.synth`: a pulse train from f0 shaped by the harmonic parts, plus
noise, plus a free-phase part, then one inverse STFT).

Its noise comes from a generator seeded by the payload's `noise_seed`, never from a process-wide
one: `default_rng(noise_seed)`'s draw, computed a whole array at a time (`noise.py`: the same
bits). Its FFTs run on scipy's pocketfft with as many workers as the plan gives the stage
(`scipy.fft.set_workers`; each transform is computed whole by one worker, so the bits do not
depend on how many there are). Without scipy, hibari falls back to numpy's FFT, whose bits
differ: scipy is required.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from models.hibari import noise
from models.hibari.noise import SeededNormal
from models.hibari.voice import FRAME_PARTS


class Vocoder:
    def __init__(self, threads: int = 1) -> None:
        import scipy.fft
        from hibari import dsp

        if dsp.FFT_BACKEND != "scipy":
            raise RuntimeError(f"hibari's signal processing runs on {dsp.FFT_BACKEND}'s FFT, not "
                               "scipy's: install scipy (the speech extra)")
        self._fft, self._dsp = scipy.fft, dsp
        self.threads = threads
        noise.exact()  # the draw's check against numpy's, at start-up rather than in a request

    def synth(self, parts: Sequence[np.ndarray], f0: np.ndarray, noise_seed: int) -> np.ndarray:
        """Audio from the five spectral parts (lh, theta, ln, lr, phi, each [601, F]) and f0."""
        if f0.size == 0:
            return np.zeros(0, dtype=np.float32)
        with self._fft.set_workers(self.threads):
            return self._dsp.synth(*parts, f0, SeededNormal(noise_seed))

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        audio = self.synth([np.asarray(payload[p]) for p in FRAME_PARTS],
                           np.asarray(payload["f0"]), int(payload["noise_seed"]))
        return {"audio": np.ascontiguousarray(audio, dtype=np.float32),
                **dict.fromkeys(FRAME_PARTS), "f0": None, "durations": None, "noise_seed": None}
