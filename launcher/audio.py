"""Audio values and their wire encodings (16-bit PCM, WAV)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import torch

SAMPLE_RATE = 24_000


@dataclass(frozen=True)
class Audio:
    """Mono float32 samples in [-1, 1]."""

    samples: torch.Tensor
    sample_rate: int = SAMPLE_RATE

    @property
    def duration_s(self) -> float:
        return self.samples.numel() / self.sample_rate

    def pcm16(self) -> bytes:
        return pcm16(self.samples)

    def wav(self) -> bytes:
        data = self.pcm16()
        return wav_header(self.sample_rate, len(data)) + data


def pcm16(samples: torch.Tensor) -> bytes:
    """Little-endian signed 16-bit PCM, the `pcm` response format of OpenAI-style speech APIs."""
    ints = (samples.detach().to("cpu", torch.float32).clamp(-1.0, 1.0) * 32767.0).round()
    return ints.to(torch.int16).numpy().astype("<i2").tobytes()


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
