"""The real models' shared onnxruntime parts: a 1-D convolution rewritten as 2-D computes the same,
a session on CUDA is capped by the stage's memory fraction, a rewritten graph is cached once."""

from __future__ import annotations

import numpy as np
import pytest

from models.onnx_tools import graph_cache, sessions
from tests.models import needs


def _session(model: bytes, threads: int):
    return sessions.session(model, "cpu", None, threads)


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


@needs.onnx
def test_the_2d_rewrite_computes_what_the_1d_graph_did():
    from models.onnx_tools.conv_layout import convs_as_2d

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


def test_cuda_provider_gets_the_stage_memory_fraction_as_its_limit():
    opts = sessions.cuda_provider_options(1, 0.25, 80 * 2**30)
    assert opts["device_id"] == 1 and opts["gpu_mem_limit"] == 20 * 2**30
    assert opts["arena_extend_strategy"] == "kSameAsRequested"
    assert "gpu_mem_limit" not in sessions.cuda_provider_options(0, None, 80 * 2**30)
    with pytest.raises(ValueError):
        sessions.cuda_provider_options(0, 1.5, 80 * 2**30)


def test_a_rewritten_graph_is_built_once_and_written_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("STAGE_PLANNER_CACHE", str(tmp_path))
    path = graph_cache.cache_dir() / "voice" / "abc-v1" / "part.onnx"
    built = []
    assert graph_cache.cached(path, lambda: built.append(1) or b"graph") == b"graph"
    assert graph_cache.cached(path, lambda: built.append(1) or b"other") == b"graph"
    assert built == [1] and [p.name for p in path.parent.iterdir()] == ["part.onnx"]
    # a cache that cannot be written costs the next build another rewrite, not the stage
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert graph_cache.cached(blocked / "x.onnx", lambda: b"again") == b"again"
