"""Listening to served audio: pocketsphinx (BSD, its US English model ships in the wheel), and
the word error rate of what it heard."""

from __future__ import annotations

import functools
import io
import re

import numpy as np

ASR_RATE = 16_000  # pocketsphinx's acoustic model


def resample(samples: np.ndarray, rate: int, to: int = ASR_RATE) -> np.ndarray:
    """Band-limited resampling of a whole clip (FFT: cut or pad the spectrum)."""
    if rate == to or samples.size == 0:
        return samples.astype(np.float32)
    n = round(samples.size * to / rate)
    spectrum = np.fft.rfft(samples.astype(np.float64))
    kept = np.zeros(n // 2 + 1, dtype=complex)
    m = min(kept.size, spectrum.size)
    kept[:m] = spectrum[:m]
    return (np.fft.irfft(kept, n) * (n / samples.size)).astype(np.float32)


@functools.lru_cache(maxsize=1)
def _decoder():
    from pocketsphinx import Decoder

    return Decoder(samprate=ASR_RATE, loglevel="FATAL")


def transcribe(samples: np.ndarray, rate: int) -> str:
    pcm = (np.clip(resample(samples, rate), -1.0, 1.0) * 32767).astype("<i2").tobytes()
    decoder = _decoder()
    decoder.start_utt()
    decoder.process_raw(pcm, full_utt=True)
    decoder.end_utt()
    hyp = decoder.hyp()
    return hyp.hypstr if hyp is not None else ""


def transcribe_wav(body: bytes) -> str:
    import soundfile

    samples, rate = soundfile.read(io.BytesIO(body), dtype="float32")
    return transcribe(samples, rate)


def words(text: str) -> list[str]:
    return re.sub(r"[^a-z' ]+", " ", text.lower()).split()


def wer(references: list[str], hypotheses: list[str]) -> float:
    """Word error rate over all pairs: (substitutions + deletions + insertions) / reference
    words."""
    errors = total = 0
    for ref, hyp in zip(references, hypotheses, strict=True):
        r, h = words(ref), words(hyp)
        row = list(range(len(h) + 1))
        for i, rw in enumerate(r, 1):
            prev, row[0] = row[0], i
            for j, hw in enumerate(h, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (rw != hw))
        errors += row[len(h)]
        total += len(r)
    return errors / max(1, total)
