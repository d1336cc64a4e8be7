"""The voice's 1-D convolutions as 2-D ones: the same function, and the same bits at any thread
count (a plan's threads change how fast a stage runs, never its audio)."""

from __future__ import annotations

import numpy as np
import pytest

from tests.models.piper import needs

# Lengths where the 1-D graphs gave other bits at two or more threads than at one (decoder 17
# and 33 frames, flow 100-333, encoder 200-300 ids), and a few around SGEMM's 64-column edge.
FRAMES = (5, 17, 33, 64, 65, 100, 129, 333)
THREADS = (2, 3)  # the encoder differed from 3, the others from 2


def _session(model: bytes, threads: int):
    from models.piper.runtime import session

    return session(model, "cpu", None, threads)


def _tiny_model():
    """A Conv1d (dilated, grouped, padded, biased) into a strided ConvTranspose1d."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    conv_w = rng.standard_normal((8, 3, 5)).astype(np.float32)
    conv_b = rng.standard_normal(8).astype(np.float32)
    up_w = rng.standard_normal((8, 4, 8)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "cw", "cb"], ["h"], pads=[4, 4], dilations=[2],
                          group=2, kernel_shape=[5]),
         helper.make_node("ConvTranspose", ["h", "uw"], ["y"], strides=[4], pads=[2, 2],
                          kernel_shape=[8])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, None])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(conv_w, "cw"), numpy_helper.from_array(conv_b, "cb"),
         numpy_helper.from_array(up_w, "uw")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs.speech
def test_the_2d_rewrite_computes_what_the_1d_graph_did():
    from models.piper.conv_layout import convs_as_2d

    model = _tiny_model()
    before = model.SerializeToString()
    assert convs_as_2d(model) == 2
    assert {n.op_type for n in model.graph.node} == {"Unsqueeze", "Conv", "ConvTranspose",
                                                     "Squeeze"}
    assert {i.name for i in model.graph.initializer} >= {"cw/2d", "uw/2d"}
    assert not {"cw", "uw"} & {i.name for i in model.graph.initializer}  # no weight kept twice
    x = {"x": np.random.default_rng(1).standard_normal((1, 6, 37)).astype(np.float32)}
    want = _session(before, 1).run(None, x)[0]
    got = _session(model.SerializeToString(), 1).run(None, x)[0]
    assert got.shape == want.shape == (1, 4, 4 * 37)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


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
