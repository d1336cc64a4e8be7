"""The acoustic stage: ids -> z [192, frames], sentence by sentence, handed on in chunks.

Each sentence runs the `encoder` cut (text encoder, durations), then the `flow` cut (prior
sample through the flow). Both noises are drawn from `numpy.random.default_rng(crc32(ids) ^
seed)`, the sentence's own ids: the same text gives the same z in every process and placement.

z is handed on in chunks, each with up to `context_frames` frames of z on either side that the
vocoder decodes and trims (one frame of z reaches 10 frames back and 12 ahead in the decoder's
output). The first chunk of a request is small (`first_chunk_frames`, for a short time to first
audio), later ones `chunk_frames`. Chunking is fixed by these arguments, never by timing, so the
audio is the same bits wherever the stages run.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from launcher.piper import voice as V
from launcher.piper.runtime import session

MIN_SPEED, MAX_SPEED = 0.25, 4.0  # OpenAI's `speed` range


def chunk_bounds(frames: int, first: int, size: int, request_start: bool) -> list[tuple[int, int]]:
    """[start, end) of each chunk of a sentence's frames."""
    bounds, start = [], 0
    step = first if request_start else size
    while start < frames:
        end = min(frames, start + step)
        bounds.append((start, end))
        start, step = end, size
    return bounds


def noise_rng(ids: np.ndarray, seed: int) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(ids.astype(np.int64).tobytes()) ^ seed)


class Acoustic:
    def __init__(self, voice: V.Voice, *, seed: int, noise_scale: float, length_scale: float,
                 noise_w: float, chunk_frames: int, first_chunk_frames: int,
                 context_frames: int, device: str, fraction: float | None, threads: int) -> None:
        for name, value in (("chunk_frames", chunk_frames), ("first_chunk_frames",
                                                            first_chunk_frames)):
            if value < 1:
                raise ValueError(f"{name} must be at least 1, not {value}")
        if context_frames < 0:
            raise ValueError(f"context_frames must be at least 0, not {context_frames}")
        self.encoder = session(V.cut(voice, "encoder"), device, fraction, threads)
        self.flow = session(V.cut(voice, "flow"), device, fraction, threads)
        self.seed = seed
        self.noise_scale, self.length_scale, self.noise_w = noise_scale, length_scale, noise_w
        self.chunk_frames, self.first_chunk_frames = chunk_frames, first_chunk_frames
        self.context_frames = context_frames

    def z(self, ids: np.ndarray, speed: float = 1.0) -> np.ndarray:
        """z [192, frames] of one sentence."""
        rng = noise_rng(ids, self.seed)
        scales = np.array([self.noise_scale, self.length_scale / speed, self.noise_w],
                          dtype=np.float32)
        m_p, logs_p, y_mask = self.encoder.run(None, {
            "input": ids.reshape(1, -1).astype(np.int64),
            "input_lengths": np.array([ids.size], dtype=np.int64),
            "scales": scales,
            V.DP_NOISE: rng.standard_normal((1, 2, ids.size), dtype=np.float32),
        })
        (z,) = self.flow.run(None, {
            V.M_P: m_p, V.LOGS_P: logs_p, V.Y_MASK: y_mask, "scales": scales,
            V.PRIOR_NOISE: rng.standard_normal(m_p.shape, dtype=np.float32),
        })
        return z[0]

    def __call__(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        ids = np.asarray(payload["ids"])
        lengths = np.asarray(payload["sentence_lengths"]).tolist()
        speed = float(payload.get("speed") or 1.0)
        if not MIN_SPEED <= speed <= MAX_SPEED:
            raise ValueError(f"speed {speed} is outside {MIN_SPEED}-{MAX_SPEED}")
        drop = {"ids": None, "sentence_lengths": None, "speed": None}
        offset, first = 0, True
        for n in lengths:
            z = self.z(ids[offset:offset + n], speed)
            offset += n
            frames = z.shape[1]
            for start, end in chunk_bounds(frames, self.first_chunk_frames, self.chunk_frames,
                                           first):
                left = min(self.context_frames, start)
                right = min(self.context_frames, frames - end)
                part = np.ascontiguousarray(z[:, start - left:end + right])
                yield {"z": part, "z_left": left, "z_right": right, **drop}
                first = False
        if first:  # nothing to say (only punctuation): one empty chunk ends the request
            yield {"z": np.zeros((V.CHANNELS, 0), np.float32), "z_left": 0, "z_right": 0, **drop}
