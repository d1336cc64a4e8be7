"""The voice's parts with their convolutions as 2-D ones give the same bits at any thread count (a
plan's threads change how fast a stage runs, never its audio)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models import needs

# Lengths where the 1-D graphs gave other bits at two or more threads than at one (decoder 17
# and 33 frames, flow 100-333, encoder 200-300 ids), and a few around SGEMM's 64-column edge.
FRAMES = (5, 17, 33, 64, 65, 100, 129, 333)
THREADS = (2, 3)  # the encoder differed from 3, the others from 2


def _session(model: bytes, threads: int):
    from models.onnx_tools.sessions import session

    return session(model, "cpu", None, threads)


def _inputs(part: str, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    from models.piper import voice as V

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=np.float32)

    scales = np.array([0.667, 1.0, 0.8], dtype=np.float32)
    if part == "encoder":
        return {"input": rng.integers(1, 100, (1, n)).astype(np.int64),
                "input_lengths": np.array([n], dtype=np.int64), "scales": scales,
                V.DP_NOISE: normal(1, 2, n)}
    if part == "flow":
        return {V.M_P: normal(1, 192, n), V.LOGS_P: normal(1, 192, n) * 0.3 - 1.0,
                V.Y_MASK: np.ones((1, 1, n), dtype=np.float32), V.PRIOR_NOISE: normal(1, 192, n),
                "scales": scales}
    return {V.Z: normal(1, 192, n)}


@needs.speech
@pytest.mark.parametrize("part", ["encoder", "flow", "decoder"])
def test_each_part_of_the_voice_gives_the_same_bits_at_every_thread_count(part):
    from models.piper import voice as V

    model = V.cut(V.load(), part)
    rng = np.random.default_rng(7)
    inputs = [_inputs(part, n, rng) for n in FRAMES]
    one = _session(model, 1)
    want = [one.run(None, x) for x in inputs]
    for threads in THREADS:
        many = _session(model, threads)
        for n, x, expected in zip(FRAMES, inputs, want):
            got = many.run(None, x)
            assert all(np.array_equal(a, b) for a, b in zip(got, expected)), (
                f"{part}: {n} frames at {threads} threads differ from one thread")
