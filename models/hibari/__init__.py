"""hibari-tts's voice "heart" as three real stages: frontend -> acoustic -> vocoder.

Factories for `models/hibari-heart.yaml` (`factory: models.hibari:frontend` ...); the stages live
in `*_stage` modules. Imports are lazy: the supervisor imports this package for `preflight`
without loading hibari or onnxruntime.

The stages call the hibari-tts package (a dependency, Apache-2.0: its G2P, its voice file, its
signal processing); they run its acoustic graph on their own onnxruntime session, whose threads
the plan sets. Needs the `[speech]` extra (hibari-tts, scipy, onnxruntime, onnx); no program,
no download: only the voice inside the wheel is ever loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from models import importable as _importable  # preflight's look, one definition

REQUIRED = ("hibari", "scipy", "onnxruntime", "onnx")  # import names of the speech extra's parts


def frontend(*, threads: int = 1):
    from models.hibari.frontend_stage import Frontend

    return Frontend(threads)


def acoustic(*, seed: int = 0, threads: int = 1, device: str = "cpu",
             total_gpu_memory_fraction: float | None = None):
    from models.hibari import voice
    from models.hibari.acoustic_stage import Acoustic

    return Acoustic(voice.acoustic_graph(), seed=seed, device=device,
                    fraction=total_gpu_memory_fraction, threads=threads,
                    separators=frozenset({voice.space_id()}))


def vocoder(*, threads: int = 1):
    from models.hibari.vocoder_stage import Vocoder

    return Vocoder(threads)


def preflight(factory: str, args: Mapping[str, Any]) -> None:
    """Raise (with how to fix it) what would stop `factory` from building, before any process
    starts: the speech extra's packages, and the voice inside hibari's wheel."""
    from models.hibari.voice import INSTALL, VoiceError, model_path

    missing = [m for m in REQUIRED if not _importable(m)]
    if missing:
        raise VoiceError(
            f"the hibari-heart stages need the speech extra ({', '.join(missing)} missing); "
            f"install it with `{INSTALL}`; nothing was started.")
    if factory == "acoustic":
        model_path()
