"""A vocoder with several threads decodes a long stretch in parts side by side: the audio is the
same, bit for bit, as one run gives (a plan's threads change how fast it runs, never what it
says), and stretches too short to cut stay whole."""

from __future__ import annotations

import numpy as np
import pytest

from models.piper.decode_parts import CONTEXT_FRAMES, MIN_RUN_FRAMES, Part, parts

from tests.models import needs


@pytest.mark.parametrize("frames,left,right,ways", [
    (400, 0, 0, 2), (400, 0, 0, 3), (216, 12, 12, 2), (131, 0, 0, 2), (1000, 5, 7, 4)])
def test_parts_cover_the_audio_once_each_with_its_context_and_a_long_enough_run(
        frames, left, right, ways):
    split = parts(frames, left, right, ways)
    assert len(split) == ways
    assert split[0].start == left and split[-1].end == frames - right
    assert all(a.end == b.start for a, b in zip(split, split[1:]))  # no gap, no overlap
    for p in split:
        assert p.lo == max(0, p.start - CONTEXT_FRAMES) and p.hi == min(frames, p.end + CONTEXT_FRAMES)
        assert p.hi - p.lo >= MIN_RUN_FRAMES


def test_a_stretch_too_short_to_cut_is_decoded_in_one_run_of_all_its_frames():
    assert parts(100, 0, 0, 2) == (Part(0, 100, 0, 100),)  # halves of 50 + 12 < 65
    assert parts(60, 12, 12, 4) == (Part(12, 48, 0, 60),)
    assert parts(400, 0, 0, 1) == (Part(0, 400, 0, 400),)
    # as many parts as fit, not all or nothing: 3 ways of 150 frames would run 62-74 frames
    assert len(parts(150, 0, 0, 3)) == 2


@pytest.fixture(scope="module")
def vocoders():
    from models import piper

    return {threads: piper.vocoder(threads=threads) for threads in (1, 2, 3)}


# Around the narrowest cut (two runs of 65: 106 frames; three: 167) and the GEMM's edge of 64
# columns, and streamed chunks with context (a wider sweep, 20-260 frames at 2-4 threads, is in
# docs/performance.md; this one is kept short for the fast lane).
STRETCHES = [(64, 0, 0), (105, 0, 0), (106, 0, 0), (166, 0, 0), (167, 0, 0), (216, 12, 12),
             (130, 12, 0)]


@needs.speech
def test_parts_give_the_bits_of_one_run_at_every_thread_count(vocoders):
    rng = np.random.default_rng(3)
    for frames, left, right in STRETCHES:
        z = rng.standard_normal((192, frames), dtype=np.float32)
        want = vocoders[1].decode(z, left, right)
        assert want.size == (frames - left - right) * 256
        for threads in (2, 3):
            got = vocoders[threads].decode(z, left, right)
            assert np.array_equal(got, want), (
                f"{frames} frames (context {left}/{right}) at {threads} threads, in "
                f"{len(parts(frames, left, right, threads))} parts, differ from one run")
