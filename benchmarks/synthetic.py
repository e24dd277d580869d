"""Synthetic graphs for scaling benchmarks: blocks of Transpose(NHWC) -> Relu -> Transpose(NCHW) ->
Mul(scalar) -> Add(scalar) -> Conv(3x3), with a residual Add every 4 blocks (egglog-notes §6)."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

OPS_PER_BLOCK = 6


def block_chain(num_ops: int, channels: int = 8, size: int = 8, seed: int = 0) -> onnx.ModelProto:
    """A model of about `num_ops` ops (6 per block plus residual adds); weights are seeded."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    weight = onh.from_array((rng.standard_normal((channels, channels, 3, 3)) * 0.1).astype(np.float32), "w")
    inits += [weight, onh.from_array(np.array(0.5, np.float32), "half"), onh.from_array(np.array(0.1, np.float32), "tenth")]
    prev, residual = "x", "x"
    blocks = max(1, num_ops // OPS_PER_BLOCK)
    for b in range(blocks):
        nodes += [oh.make_node("Transpose", [prev], [f"t{b}"], perm=[0, 2, 3, 1]),
                  oh.make_node("Relu", [f"t{b}"], [f"r{b}"]),
                  oh.make_node("Transpose", [f"r{b}"], [f"u{b}"], perm=[0, 3, 1, 2]),
                  oh.make_node("Mul", [f"u{b}", "half"], [f"m{b}"]),
                  oh.make_node("Add", [f"m{b}", "tenth"], [f"a{b}"]),
                  oh.make_node("Conv", [f"a{b}", "w"], [f"c{b}"], pads=[1, 1, 1, 1])]
        prev = f"c{b}"
        if b % 4 == 3:
            nodes.append(oh.make_node("Add", [prev, residual], [f"res{b}"]))
            prev = residual = f"res{b}"
    nodes.append(oh.make_node("Identity", [prev], ["y"]))
    shape = [1, channels, size, size]
    graph = oh.make_graph(nodes, "synthetic", [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                          [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)], initializer=inits)
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=10)
