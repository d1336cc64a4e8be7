"""The vocoder stage: a chunk of z (with context frames) -> its audio (HiFi-GAN decoder)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from launcher.piper import voice as V
from launcher.piper.runtime import session


class Vocoder:
    def __init__(self, voice: V.Voice, *, device: str, fraction: float | None,
                 threads: int) -> None:
        self.decoder = session(V.cut(voice, "decoder"), device, fraction, threads)

    def decode(self, z: np.ndarray, left: int = 0, right: int = 0) -> np.ndarray:
        """Audio of z's frames, less `left` and `right` context frames at its ends."""
        frames = z.shape[-1]
        if frames - left - right <= 0:
            return np.zeros(0, dtype=np.float32)
        (audio,) = self.decoder.run(None, {V.Z: z.reshape(1, V.CHANNELS, frames)})
        audio = audio.reshape(-1)
        return audio[left * V.HOP:audio.size - right * V.HOP]

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        z = np.asarray(payload["z"])
        audio = self.decode(np.ascontiguousarray(z, dtype=np.float32),
                            int(payload.get("z_left", 0)), int(payload.get("z_right", 0)))
        return {"audio": np.array(audio, dtype=np.float32),
                "z": None, "z_left": None, "z_right": None}
