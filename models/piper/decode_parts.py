"""A long stretch of z decoded in parts side by side, one per thread of the stage, with the same
bits as decoding it in one run.

Why: onnxruntime splits the decoder's late, narrow convolutions poorly across intra-op threads
(a second thread buys x1.1-1.3 of speed on this voice), while the decoder is local in time: a
frame of z reaches 10 frames back and 12 ahead in the audio (`CONTEXT_FRAMES` covers both). So
a sentence cut in two, each half decoded with that much z on either side by its own one-thread
run, gives the audio of the whole run in about x0.75 of the two-thread run's time (measured on
150-400 frames; docs/performance.md).

Same bits, not only the same function: each output of the convolutions is summed in one fixed
order wherever it sits in the run (`conv_layout`), except in the `ConvTranspose` upsamplers,
which onnxruntime computes as a GEMM whose columns are the run's input frames; its GEMM sums
the channels in blocks of 128 when it has more than 64 columns and in larger blocks below, which
rounds otherwise. A run of 64 frames or fewer therefore gives other last bits than a longer one,
so a stretch is cut only where every part's run, context included, has at least
`MIN_RUN_FRAMES`; shorter stretches are decoded in one run, as before. Tests sweep the lengths
around that edge against the whole run (tests/models/piper/test_decode_parts.py).
"""

from __future__ import annotations

from dataclasses import dataclass

CONTEXT_FRAMES = 12  # of z, on either side of a part: what one output frame depends on
MIN_RUN_FRAMES = 65  # the narrowest run whose upsampler GEMMs round as a long run's do


@dataclass(frozen=True)
class Part:
    """Frames [start, end) of the stretch's audio, decoded from z frames [lo, hi)."""

    start: int
    end: int
    lo: int
    hi: int


def parts(frames: int, left: int, right: int, ways: int) -> tuple[Part, ...]:
    """How to decode the audio of z frames [left, frames - right) of a run of `frames`: in as
    many parts as `ways` allows with every part's run at least `MIN_RUN_FRAMES` long, or in one
    run of all `frames` (the whole input, as an unsplit decode reads it)."""
    start, end = left, frames - right
    for k in range(min(ways, max(end - start, 1)), 1, -1):
        cuts = [start + (end - start) * i // k for i in range(k + 1)]
        split = tuple(Part(a, b, max(0, a - CONTEXT_FRAMES), min(frames, b + CONTEXT_FRAMES))
                      for a, b in zip(cuts, cuts[1:]))
        if all(p.hi - p.lo >= MIN_RUN_FRAMES for p in split):
            return split
    return (Part(start, end, 0, frames),)
