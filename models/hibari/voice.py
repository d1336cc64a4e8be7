"""hibari's voice "heart": its files in the hibari-tts wheel, and its acoustic graph as the stages
run it.

Only "heart" ships inside the wheel; hibari's other voices are downloaded from the internet the
first time they are asked for, so nothing here asks for any other, and the wheel's file is found
with `download_missing=False`: a missing file is an error, never a download.

The acoustic graph as exported maps phoneme ids [1, L] and a speed [1] to five spectral parts
(`lh`, `theta`, `ln`, `lr`, `phi`, each [1, 601, F]) and `f0` [1, F], one frame every 12.5 ms.
The stages run it with two changes, made once and cached (models.onnx_tools.graph_cache):

- its 1-D convolutions as 2-D ones (models.onnx_tools.conv_layout): as exported, its frames
  differed in the last bits between one and two or more intra-op threads (a plan's threads must
  change how fast a stage runs, never its audio);
- one more output, `durations` (int64 [L]): how long each phoneme id lasts, the rounded and
  clipped durations its length regulator expands (`/Cast_32_output_0` of this export), in steps
  of two frames (25 ms; the frames are twice as many: F = 2 x their sum). hibari's API returns
  only the audio; word timings need these.
"""

from __future__ import annotations

from pathlib import Path

from models.onnx_tools.graph_cache import cache_dir, cached, file_sha256

NAME = "heart"  # the one voice this card serves: the one inside the wheel
SAMPLE_RATE = 24_000  # hibari.SAMPLE_RATE, without importing hibari where only this is needed
FRAME_PARTS = ("lh", "theta", "ln", "lr", "phi")  # the spectral outputs, in dsp.synth's order
DURATIONS = "durations"
DURATIONS_TENSOR = "/Cast_32_output_0"  # steps per phoneme id, int64 [L], in this export
FRAMES_PER_STEP = 2  # the length regulator's step is two 12.5 ms frames
GRAPH_VERSION = 2  # bump when the rewrite changes: an older cached graph is not reused
INSTALL = "pip install -c constraints.txt -e '.[speech]'"


class VoiceError(RuntimeError):
    """The voice cannot be used: the package is not installed, or its graph is not the one this
    code knows."""


def model_path() -> Path:
    """The ONNX file of "heart", inside the installed wheel (never downloaded)."""
    try:
        from hibari.voices import voice_path
    except ImportError:
        raise VoiceError(f"the hibari-heart stages need the hibari-tts package; install the "
                         f"speech extra: {INSTALL}") from None
    try:
        return Path(voice_path(NAME, download_missing=False))
    except (FileNotFoundError, ValueError) as exc:
        raise VoiceError(f"the installed hibari-tts has no voice '{NAME}' inside its wheel "
                         f"({exc}); reinstall it: {INSTALL}") from None


def vocab() -> dict[str, int]:
    """The model's vocabulary: phoneme -> id (hibari's `vocab.json`)."""
    import json
    import os

    from hibari import tts

    with open(os.path.join(tts.ASSETS, "vocab.json"), encoding="utf-8") as f:
        return json.load(f)


def space_id() -> int:
    """The id of the space between words in the model's vocabulary."""
    return int(vocab()[" "])


def acoustic_graph() -> bytes:
    """The serialized acoustic graph the stage runs, from the cache or rewritten now (and
    cached)."""
    source = model_path()
    path = (cache_dir() / "hibari" / f"{file_sha256(source)[:16]}-v{GRAPH_VERSION}"
            / "acoustic.onnx")
    return cached(path, lambda: _rewrite(source))


def _rewrite(source: Path) -> bytes:
    import onnx
    from onnx import TensorProto, helper

    from models.onnx_tools.conv_layout import convs_as_2d

    model = onnx.load(str(source))
    outputs = [o.name for o in model.graph.output]
    made = {o for n in model.graph.node for o in n.output}
    if outputs != [*FRAME_PARTS, "f0"] or DURATIONS_TENSOR not in made:
        raise VoiceError(
            f"hibari's acoustic graph {source.name} is not the export this code knows: outputs "
            f"{outputs}, and the durations tensor {DURATIONS_TENSOR!r} "
            f"{'present' if DURATIONS_TENSOR in made else 'missing'}; install the pinned "
            f"hibari-tts (constraints.txt) or check the tensor names (models/hibari/voice.py)")
    convs_as_2d(model)
    model.graph.node.append(helper.make_node("Identity", [DURATIONS_TENSOR], [DURATIONS]))
    model.graph.output.append(helper.make_tensor_value_info(DURATIONS, TensorProto.INT64, ["L"]))
    return model.SerializeToString()
