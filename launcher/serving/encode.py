"""Compressed response formats of the speech endpoint: `flac` and `mp3`.

Encoded by `soundfile` (BSD-3), whose wheels bundle libsndfile (LGPL-2.1, loaded as a shared
library) with its FLAC and MPEG encoders: no system codec. soundfile comes with the speech extra;
without it these formats answer 400 naming `response_format`. `wav` and `pcm` need nothing
(`audio`). An encoder here writes its header last, so these formats do not stream.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from launcher.audio import Audio, as_float32

# response_format -> (libsndfile format, subtype, media type)
COMPRESSED = {
    "flac": ("FLAC", "PCM_16", "audio/flac"),
    "mp3": ("MP3", "MPEG_LAYER_III", "audio/mpeg"),
}
# OpenAI's opus and aac are not written here: opus needs 48 kHz-family rates, aac a system codec.


def available() -> str | None:
    """None when the compressed formats can be encoded, else why not."""
    try:
        import soundfile  # noqa: F401
    except (ImportError, OSError) as exc:  # OSError: soundfile without its libsndfile
        return (f"needs the soundfile package ({exc}); install the speech extra: "
                "pip install -c constraints.txt -e '.[speech]'")
    return None


def encode(samples: Any, sample_rate: int, fmt: str) -> bytes:
    """`samples`: a numpy array or a torch tensor."""
    import soundfile

    kind, subtype, _ = COMPRESSED[fmt]
    data = np.clip(as_float32(samples), -1.0, 1.0)
    out = io.BytesIO()
    soundfile.write(out, np.ascontiguousarray(data), sample_rate, format=kind, subtype=subtype)
    return out.getvalue()


async def whole(audio: Audio, fmt: str) -> bytes:
    """A whole response's body in `fmt`: wav and pcm at once, a compressed format on a worker
    thread (its encoder takes a while)."""
    if fmt in COMPRESSED:
        from starlette.concurrency import run_in_threadpool

        return await run_in_threadpool(encode, audio.samples, audio.sample_rate, fmt)
    return audio.wav() if fmt == "wav" else audio.pcm16()
