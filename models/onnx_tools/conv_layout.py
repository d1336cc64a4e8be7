"""The voice's 1-D convolutions rewritten as 2-D ones of height 1, so that its audio has the same
bits at every thread count and costs less CPU.

Why: onnxruntime (x86, its default graph optimizations) runs a 1-D `Conv`/`ConvTranspose` as
im2col + SGEMM, and that SGEMM blocks its inner (channel x tap) dimension by how many output
columns each thread computes. Summing in other blocks rounds differently, so the same sentence
gave other last bits at two threads than at one (the flow at 141 frames, the decoder at 17; the
encoder at 3+ threads). A 2-D convolution instead goes to onnxruntime's channel-blocked direct
kernels (its NCHWc layout), which split the work by output channels and rows and sum each output
in one fixed order. Measured on the twelve benchmark sentences, one thread, one process: the
flow's z the same at 1, 2, 3, 4 and 8 threads for 5-2000 frames (it differed at 1 vs 2 before),
the decoder likewise for 5-700 frames; CPU time -5% (flow) and -23% (decoder); outputs within
float rounding of the 1-D graph (docs/performance.md, "piper-joe against piper-tts's own server").

`onnx` is imported by the caller (the cut, which runs once per voice and is cached).
"""

from __future__ import annotations

from typing import Any

AXIS = "conv_layout/height_axis"  # the inserted height axis (2), one initializer for every node


def convs_as_2d(model: Any) -> int:
    """Rewrite, in place, each 1-D Conv and ConvTranspose of `model` (an onnx ModelProto) as
    Unsqueeze(height) -> the 2-D op with a 1 x k kernel -> Squeeze(height). Returns how many were
    rewritten. Weights get their own 2-D initializers; any other node is left as it is."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    weights = {i.name: i for i in graph.initializer}
    nodes, added, rewritten = [], {}, 0
    for node in graph.node:
        weight = weights.get(node.input[1]) if len(node.input) > 1 else None
        if node.op_type not in ("Conv", "ConvTranspose") or weight is None or len(weight.dims) != 3:
            nodes.append(node)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise ValueError(f"{node.name}: auto_pad {attrs['auto_pad']!r} is not rewritten")
        w2d = f"{node.input[1]}/2d"
        if w2d not in added:
            added[w2d] = numpy_helper.from_array(numpy_helper.to_array(weight)[:, :, None, :], w2d)
        pads = attrs.get("pads", [0, 0])
        two_d = {"kernel_shape": [1, int(weight.dims[2])], "pads": [0, pads[0], 0, pads[1]],
                 "strides": [1, attrs.get("strides", [1])[0]],
                 "dilations": [1, attrs.get("dilations", [1])[0]], "group": attrs.get("group", 1)}
        if "output_padding" in attrs:
            two_d["output_padding"] = [0, attrs["output_padding"][0]]
        tall_in, tall_out = f"{node.output[0]}/in_2d", f"{node.output[0]}/out_2d"
        nodes += [
            helper.make_node("Unsqueeze", [node.input[0], AXIS], [tall_in]),
            helper.make_node(node.op_type, [tall_in, w2d, *node.input[2:]], [tall_out],
                             name=node.name, **two_d),
            helper.make_node("Squeeze", [tall_out, AXIS], [node.output[0]]),
        ]
        rewritten += 1
    if rewritten:
        del graph.node[:]
        graph.node.extend(nodes)
        graph.initializer.extend([numpy_helper.from_array(np.array([2], np.int64), AXIS),
                                  *added.values()])
        # the 1-D weights are now unused: drop them rather than load them twice
        used = {i for n in graph.node for i in n.input}
        kept = [i for i in graph.initializer if i.name in used]
        del graph.initializer[:]
        graph.initializer.extend(kept)
    return rewritten
