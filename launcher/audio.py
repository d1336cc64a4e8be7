"""Audio values and their wire encodings (16-bit PCM, WAV).

Samples are what the terminal stage handed over: a numpy array from stages that speak numpy
(piper), a torch tensor from torch stages (the stand-ins). Everything here takes either and
computes with numpy, so that a server whose stages do not use torch never loads it.
"""

from __future__ import annotations

import math
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner import DEFAULT_SAMPLE_RATE

# A plan's rate where its card declares none (the stand-ins' rate); a plan says its own
# (`Plan.sample_rate`), and a deployment's audio carries it.
SAMPLE_RATE = DEFAULT_SAMPLE_RATE


@dataclass(frozen=True)
class Audio:
    """Mono float32 samples in [-1, 1] (a numpy array or a torch tensor)."""

    samples: Any
    sample_rate: int = SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return math.prod(self.samples.shape) / self.sample_rate

    def pcm16(self) -> bytes:
        return pcm16(self.samples)

    def wav(self) -> bytes:
        data = self.pcm16()
        return wav_header(self.sample_rate, len(data)) + data


def as_float32(samples: Any) -> np.ndarray:
    """The samples as a numpy float32 array (a view where they are one already)."""
    if isinstance(samples, np.ndarray):
        return samples.astype(np.float32, copy=False)
    import torch  # a tensor: its process has torch already

    return samples.detach().to("cpu", torch.float32).numpy()


def concatenate(parts: Sequence[Any]) -> Any:
    """The chunks of one request as one array, of the kind they came as."""
    if not parts:
        return np.zeros(0, dtype=np.float32)
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts)
    import torch

    return torch.cat(parts)


def pcm16(samples: Any) -> bytes:
    """Little-endian signed 16-bit PCM, the `pcm` response format of OpenAI-style speech APIs."""
    # float32 throughout, rounding half to even: the bits torch's clamp, scale and round give.
    ints = np.rint(np.clip(as_float32(samples), -1.0, 1.0) * np.float32(32767.0))
    return ints.astype("<i2").tobytes()


def wav_header(sample_rate: int, data_bytes: int | None) -> bytes:
    """RIFF/WAVE header for mono 16-bit PCM.

    `data_bytes=None` is for streaming, where the length is unknown when the header leaves:
    the sizes are set to 0xFFFFFFFF, which common decoders (ffmpeg, browsers) read as "until EOF".
    """
    size = 0xFFFFFFFF if data_bytes is None else data_bytes
    riff = 0xFFFFFFFF if data_bytes is None else 36 + data_bytes
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", riff, b"WAVE", b"fmt ", 16, 1, 1, sample_rate, sample_rate * 2, 2, 16,
        b"data", size,
    )


def owned_samples(audio: Any, shared: bool) -> Any:
    """The terminal stage's audio as 1-D float32 samples the client may keep, of the kind it came
    as (a numpy array, or a torch tensor); None when it is neither.

    A view of a shared block would pin the worker's block for as long as the client keeps it:
    copied. A payload that came inside its message already is this process's own copy (at most
    `inline_bytes` of it stays pinned): float32 audio of it is used as it is. Every torch call
    here also lets the client threads take the GIL, so the fewer the better.
    """
    if isinstance(audio, np.ndarray):
        if audio.ndim != 1:
            audio = audio.reshape(-1)
        if shared or audio.dtype != np.float32:
            audio = audio.astype(np.float32, copy=True)
        return audio
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(audio, torch.Tensor):
        return None
    if audio.dim() != 1:
        audio = audio.reshape(-1)
    if shared or audio.dtype != torch.float32:
        audio = audio.to(torch.float32, copy=True)
    return audio


# The playback speeds a request may ask for (OpenAI's `speed` range): the front door answers 400
# to any other, and a stage that honours `speed` refuses it too (a request through the Python API
# meets no front door).
MIN_SPEED, MAX_SPEED = 0.25, 4.0
