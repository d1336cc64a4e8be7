"""The vocoder stage: a chunk of z (with context frames) -> its audio (HiFi-GAN decoder).

With more than one thread on CPU, a long chunk is decoded in parts side by side, one per thread
(`decode_parts`: the same bits as one run, in less time than onnxruntime's intra-op threads
give); a chunk too short to cut runs whole on the stage's intra-op threads."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from models.piper import voice as V
from models.piper.decode_parts import Part, parts
from models.onnx_tools.sessions import session


class Vocoder:
    def __init__(self, voice: V.Voice, *, device: str, fraction: float | None,
                 threads: int) -> None:
        model = V.cut(voice, "decoder")
        self.decoder = session(model, device, fraction, threads)
        # A device runs one part at a time anyway; on CPU the parts take the stage's threads:
        # the calling thread runs one, a pool the rest, each on a one-thread session (runs
        # release the interpreter's lock).
        self.ways = 1 if device.startswith("cuda") else threads
        self._one_thread = self._pool = None
        if self.ways > 1:
            self._one_thread = session(model, device, fraction, 1)
            self._pool = ThreadPoolExecutor(self.ways - 1, thread_name_prefix="vocoder-part")

    def decode(self, z: np.ndarray, left: int = 0, right: int = 0) -> np.ndarray:
        """Audio of z's frames, less `left` and `right` context frames at its ends."""
        frames = z.shape[-1]
        if frames - left - right <= 0:
            return np.zeros(0, dtype=np.float32)
        z = z.reshape(1, V.CHANNELS, frames)
        split = parts(frames, left, right, self.ways)
        if len(split) == 1:
            (audio,) = self.decoder.run(None, {V.Z: z})
            audio = audio.reshape(-1)
            return audio[left * V.HOP:audio.size - right * V.HOP]
        later = [self._pool.submit(self._part, z, p) for p in split[1:]]
        return np.concatenate([self._part(z, split[0]), *(f.result() for f in later)])

    def _part(self, z: np.ndarray, part: Part) -> np.ndarray:
        (audio,) = self._one_thread.run(None, {V.Z: np.ascontiguousarray(z[:, :, part.lo:part.hi])})
        audio = audio.reshape(-1)
        return audio[(part.start - part.lo) * V.HOP:(part.end - part.lo) * V.HOP]

    def __call__(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        z = np.asarray(payload["z"])
        audio = self.decode(np.ascontiguousarray(z, dtype=np.float32),
                            int(payload.get("z_left", 0)), int(payload.get("z_right", 0)))
        return {"audio": np.array(audio, dtype=np.float32),
                "z": None, "z_left": None, "z_right": None}
