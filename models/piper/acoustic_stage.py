"""The acoustic stage: ids -> z [192, frames], sentence by sentence, handed on in pieces.

Each sentence runs the `encoder` cut (text encoder, durations), then the `flow` cut (prior
sample through the flow). Both noises are drawn from `numpy.random.default_rng(crc32(ids) ^
seed)`, the sentence's own ids: the same text gives the same z in every process and placement.

Only the work asked for: a whole response (the payload's `stream` is false or absent) gets each
sentence's z as one piece with no context, so the vocoder decodes it once. A streamed one gets
z in chunks, each with up to `context_frames` frames of z on either side that the vocoder
decodes and trims (one frame of z reaches 10 frames back and 12 ahead in the decoder's output).
Chunk sizes follow the card's schedule (`chunk_frames: [24, 64, 128]`: the request's first chunk
24 frames, its second 64, every later one 128; a sentence's end cuts a chunk short and the next
sentence goes on with the next size). Both are fixed by the card and the request, never by
timing, so the audio is the same bits wherever the stages run.

Word timings (a request with `timestamps`): the encoder cut also gives how many frames each id
lasts, so a sentence's words (from the frontend) are timed in frames of `HOP` samples, and ride
on the sentence's first piece as its `words`, in seconds from that piece's audio start.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from launcher.words import WORDS
from models import sentence_ids as request
from models.piper import voice as V
from models.onnx_tools.sessions import session

def chunk_schedule(chunk_frames: int | Sequence[int],
                   first_chunk_frames: int | None = None) -> tuple[int, ...]:
    """The chunk sizes of a stream, the last one repeated, from the card's arguments: a list
    (`chunk_frames: [24, 64, 128]`), or the older scalars (`first_chunk_frames: 24,
    chunk_frames: 64`, the same as `[24, 64]`)."""
    if isinstance(chunk_frames, int) and not isinstance(chunk_frames, bool):
        sizes = (chunk_frames,) if first_chunk_frames is None else (first_chunk_frames,
                                                                     chunk_frames)
    elif isinstance(chunk_frames, Sequence) and not isinstance(chunk_frames, str):
        if first_chunk_frames is not None:
            raise ValueError("give the acoustic stage either `chunk_frames: [first, second, ...]`"
                             " or the scalars `first_chunk_frames` and `chunk_frames`, not a "
                             "list with `first_chunk_frames`")
        sizes = tuple(chunk_frames)
    else:
        raise ValueError(f"chunk_frames must be a whole number or a list of them (e.g. "
                         f"[24, 64, 128]), not {chunk_frames!r}")
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"every chunk size must be a whole number of frames, at least 1: "
                         f"chunk_frames {list(sizes)!r} (first_chunk_frames "
                         f"{first_chunk_frames!r}); e.g. chunk_frames: [24, 64, 128]")
    return sizes


def chunk_bounds(frames: int, schedule: Sequence[int], index: int) -> list[tuple[int, int]]:
    """[start, end) of each chunk of a sentence's frames, when `index` chunks of its request
    came before it."""
    bounds, start = [], 0
    while start < frames:
        end = min(frames, start + schedule[min(index, len(schedule) - 1)])
        bounds.append((start, end))
        start, index = end, index + 1
    return bounds


def noise_rng(ids: np.ndarray, seed: int) -> np.random.Generator:
    return np.random.default_rng(request.noise_seed(ids, seed))


class Acoustic:
    def __init__(self, voice: V.Voice, *, seed: int, noise_scale: float, length_scale: float,
                 noise_w: float, chunk_frames: int | Sequence[int],
                 first_chunk_frames: int | None, context_frames: int, device: str,
                 fraction: float | None, threads: int) -> None:
        self.schedule = chunk_schedule(chunk_frames, first_chunk_frames)
        if context_frames < 0:
            raise ValueError(f"context_frames must be at least 0, not {context_frames}")
        self.encoder = session(V.cut(voice, "encoder"), device, fraction, threads)
        # Both parts take the stage's threads: the cut's 2-D convolutions give the same bits at
        # any thread count (models/onnx_tools/conv_layout.py), as a plan's threads must.
        self.flow = session(V.cut(voice, "flow"), device, fraction, threads)
        self.seed = seed
        self.seconds_per_frame = V.HOP / voice.sample_rate
        # between words: the space, and the blank piper puts after every symbol
        self.separators = frozenset(i for s in (V.PAD, V.SPACE) for i in voice.phoneme_ids[s])
        self.noise_scale, self.length_scale, self.noise_w = noise_scale, length_scale, noise_w
        self.context_frames = context_frames

    def z(self, ids: np.ndarray, speed: float = 1.0) -> np.ndarray:
        """z [192, frames] of one sentence."""
        return self.z_and_durations(ids, speed)[0]

    def z_and_durations(self, ids: np.ndarray, speed: float = 1.0
                        ) -> tuple[np.ndarray, np.ndarray]:
        """z [192, frames] of one sentence, and the frames each of its ids lasts [ids]."""
        rng = noise_rng(ids, self.seed)
        scales = np.array([self.noise_scale, self.length_scale / speed, self.noise_w],
                          dtype=np.float32)
        m_p, logs_p, y_mask, durations = self.encoder.run(None, {
            "input": ids.reshape(1, -1).astype(np.int64),
            "input_lengths": np.array([ids.size], dtype=np.int64),
            "scales": scales,
            V.DP_NOISE: rng.standard_normal((1, 2, ids.size), dtype=np.float32),
        })
        (z,) = self.flow.run(None, {
            V.M_P: m_p, V.LOGS_P: logs_p, V.Y_MASK: y_mask, "scales": scales,
            V.PRIOR_NOISE: rng.standard_normal(m_p.shape, dtype=np.float32),
        })
        return z[0], durations.reshape(-1)

    def __call__(self, payload: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        speed = request.speed(payload)
        stream = bool(payload.get("stream"))
        drop = request.CONSUMED
        index = 0
        for ids, spoken in request.with_words(payload):
            z, durations = self.z_and_durations(ids, speed)
            frames = z.shape[1]
            bounds = chunk_bounds(frames, self.schedule, index) if stream else [(0, frames)]
            for start, end in bounds:
                left = min(self.context_frames, start)
                right = min(self.context_frames, frames - end)
                part = np.ascontiguousarray(z[:, start - left:end + right])
                piece = {"z": part, "z_left": left, "z_right": right, **drop}
                if spoken is not None and start == 0:  # the sentence's words, on its first piece
                    piece[WORDS] = request.timed(spoken, ids, durations,
                                                 self.seconds_per_frame, self.separators)
                yield piece
                index += 1
        if index == 0:  # nothing to say (only punctuation): one empty chunk ends the request
            yield {"z": np.zeros((V.CHANNELS, 0), np.float32), "z_left": 0, "z_right": 0, **drop}
