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
    inits += [
        weight,
        onh.from_array(np.array(0.5, np.float32), "half"),
        onh.from_array(np.array(0.1, np.float32), "tenth"),
    ]
    prev, residual = "x", "x"
    blocks = max(1, num_ops // OPS_PER_BLOCK)
    for b in range(blocks):
        nodes += [
            oh.make_node("Transpose", [prev], [f"t{b}"], perm=[0, 2, 3, 1]),
            oh.make_node("Relu", [f"t{b}"], [f"r{b}"]),
            oh.make_node("Transpose", [f"r{b}"], [f"u{b}"], perm=[0, 3, 1, 2]),
            oh.make_node("Mul", [f"u{b}", "half"], [f"m{b}"]),
            oh.make_node("Add", [f"m{b}", "tenth"], [f"a{b}"]),
            oh.make_node("Conv", [f"a{b}", "w"], [f"c{b}"], pads=[1, 1, 1, 1]),
        ]
        prev = f"c{b}"
        if b % 4 == 3:
            nodes.append(oh.make_node("Add", [prev, residual], [f"res{b}"]))
            prev = residual = f"res{b}"
    nodes.append(oh.make_node("Identity", [prev], ["y"]))
    shape = [1, channels, size, size]
    graph = oh.make_graph(
        nodes,
        "synthetic",
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
        [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, shape)],
        initializer=inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=10)


def dynamic_conv_net(blocks_per_stage: tuple[int, ...] = (9, 9, 10, 11), seed: int = 0) -> onnx.ModelProto:
    """A text-detector-like conv net as paddle2onnx writes one (opset 11, input x [?,3,?,?], unfolded
    BatchNormalizations, hard-swish as HardSigmoid * x): a MobileNetV3-style backbone of inverted residual
    blocks with squeeze-excite (strides to 1/32), an FPN neck (nearest Resize x2 added to the finer map, so it
    runs only on heights and widths divisible by 32) and a head of two ConvTransposes back to full size.
    The default has 689 nodes and 5.4 MB of weights."""
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []
    count = iter(range(1 << 30))

    def const(array: np.ndarray) -> str:
        name = f"c{next(count)}"
        inits.append(onh.from_array(np.asarray(array), name))
        return name

    def op(op_type: str, inputs: list[str], **attrs: object) -> str:
        out = f"v{next(count)}"
        nodes.append(oh.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(x: str, cin: int, cout: int, k: int = 1, stride: int = 1, group: int = 1, act: str = "") -> str:
        w = const(
            (rng.standard_normal((cout, cin // group, k, k)) * (2 / (cin // group * k * k)) ** 0.5).astype(np.float32)
        )
        y = op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
        y = op(
            "BatchNormalization",
            [
                y,
                const(1 + 0.1 * rng.standard_normal(cout).astype(np.float32)),
                const(0.1 * rng.standard_normal(cout).astype(np.float32)),
                const(0.1 * rng.standard_normal(cout).astype(np.float32)),
                const(1 + rng.random(cout).astype(np.float32)),
            ],
            epsilon=1e-5,
        )
        if act == "relu":
            return op("Relu", [y])
        if act == "hswish":
            return op("Mul", [y, op("HardSigmoid", [y], alpha=1 / 6, beta=0.5)])
        return y

    def block(x: str, cin: int, cout: int, stride: int) -> str:
        mid = cin * 3
        h = conv_bn(x, cin, mid, act="hswish")
        h = conv_bn(h, mid, mid, k=3, stride=stride, group=mid, act="hswish")
        squeeze = op("GlobalAveragePool", [h])
        s = op(
            "Conv",
            [
                squeeze,
                const((rng.standard_normal((mid // 4, mid, 1, 1)) * 0.1).astype(np.float32)),
                const(np.zeros(mid // 4, np.float32)),
            ],
        )
        s = op("Relu", [s])
        s = op(
            "Conv",
            [
                s,
                const((rng.standard_normal((mid, mid // 4, 1, 1)) * 0.1).astype(np.float32)),
                const(np.zeros(mid, np.float32)),
            ],
        )
        h = op("Mul", [h, op("HardSigmoid", [s], alpha=0.2, beta=0.5)])
        h = conv_bn(h, mid, cout)
        return op("Add", [x, h]) if stride == 1 and cin == cout else h

    def upsample(x: str, factor: int) -> str:
        return op(
            "Resize",
            [x, const(np.zeros(0, np.float32)), const(np.array([1, 1, factor, factor], np.float32))],
            mode="nearest",
        )

    x = conv_bn("x", 3, 16, k=3, stride=2, act="hswish")
    widths, cin, stages = (16, 24, 40, 96), 16, []
    for width, blocks in zip(widths, blocks_per_stage):
        for b in range(blocks):
            x = block(x, cin, width, 2 if b == 0 else 1)
            cin = width
        stages.append((x, width))
    neck = 32
    lateral = [
        op("Conv", [s, const((rng.standard_normal((neck, c, 1, 1)) * 0.1).astype(np.float32))]) for s, c in stages
    ]
    for level in range(len(lateral) - 2, -1, -1):  # coarse to fine
        lateral[level] = op("Add", [lateral[level], upsample(lateral[level + 1], 2)])
    smooth = [
        op(
            "Conv",
            [f, const((rng.standard_normal((neck // 4, neck, 3, 3)) * 0.05).astype(np.float32))],
            pads=[1, 1, 1, 1],
        )
        for f in lateral
    ]
    fused = op("Concat", [smooth[0], *(upsample(f, 2**k) for k, f in enumerate(smooth[1:], 1))], axis=1)
    h = conv_bn(fused, neck, neck // 4, k=3, act="relu")
    for last in (False, True):
        h = op(
            "ConvTranspose",
            [h, const((rng.standard_normal((neck // 4, neck // 4 if not last else 1, 2, 2)) * 0.2).astype(np.float32))],
            strides=[2, 2],
        )
        if not last:
            h = op(
                "Relu",
                [
                    op(
                        "BatchNormalization",
                        [
                            h,
                            const(np.ones(neck // 4, np.float32)),
                            const(np.zeros(neck // 4, np.float32)),
                            const(np.zeros(neck // 4, np.float32)),
                            const(np.ones(neck // 4, np.float32)),
                        ],
                    )
                ],
            )
    nodes.append(oh.make_node("Sigmoid", [h], ["maps"], name="maps"))
    float32 = onnx.TensorProto.FLOAT
    graph = oh.make_graph(
        nodes,
        "dynamic_conv_net",
        [oh.make_tensor_value_info("x", float32, ["?", 3, "?", "?"])],
        [oh.make_tensor_value_info("maps", float32, ["?", 1, "?", "?"])],
        initializer=inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 11)], ir_version=6)


class _Builder:
    """Nodes and initializers of a graph under construction, with fresh names."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self._count = iter(range(1 << 30))

    def const(self, array: np.ndarray) -> str:
        name = f"c{next(self._count)}"
        self.inits.append(onh.from_array(np.asarray(array), name))
        return name

    def constant_node(self, array: np.ndarray) -> str:
        """A Constant node, as torch's exporter writes small scalars and index lists."""
        name = f"k{next(self._count)}"
        self.nodes.append(oh.make_node("Constant", [], [name], name=name, value=onh.from_array(np.asarray(array))))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs: object) -> str:
        out = f"v{next(self._count)}"
        self.nodes.append(oh.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def weight(self, *shape: int, scale: float = 0.05) -> str:
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))


def transformer_encoder(
    layers: int, hidden: int = 256, heads: int = 4, ffn: int = 1024, seed: int = 0
) -> onnx.ModelProto:
    """A torch-style transformer encoder as the legacy exporter writes one (opset 14, x [batch, seq, hidden] with
    symbolic batch and seq): LayerNorm and erf-GELU written out, per-head Reshape/Transpose chains whose targets are
    computed at run time from Shape -> Gather -> Unsqueeze -> Concat, scalars as Constant nodes. About 108 nodes and
    3 MB of weights per layer at the defaults (96 layers: ~10.4k nodes)."""
    g = _Builder(seed)
    head_dim = hidden // heads

    def layer_norm(x: str) -> str:
        mean = g.op("ReduceMean", [x], axes=[-1])
        d = g.op("Sub", [x, mean])
        var = g.op("ReduceMean", [g.op("Pow", [d, g.constant_node(np.array(2.0, np.float32))])], axes=[-1])
        std = g.op("Sqrt", [g.op("Add", [var, g.constant_node(np.array(1e-5, np.float32))])])
        y = g.op("Div", [d, std])
        gamma = g.const((1 + 0.1 * g.rng.standard_normal(hidden)).astype(np.float32))
        return g.op("Add", [g.op("Mul", [y, gamma]), g.weight(hidden)])

    def linear(x: str, cin: int, cout: int) -> str:
        return g.op("Add", [g.weight(cout), g.op("MatMul", [x, g.weight(cin, cout)])])

    def dim(x: str, index: int) -> str:
        picked = g.op("Gather", [g.op("Shape", [x]), g.constant_node(np.array(index, np.int64))], axis=0)
        return g.op("Unsqueeze", [picked, g.constant_node(np.array([0], np.int64))])

    def split_heads(x: str, perm: list[int]) -> str:
        target = g.op(
            "Concat",
            [
                dim(x, 0),
                dim(x, 1),
                g.constant_node(np.array([heads], np.int64)),
                g.constant_node(np.array([head_dim], np.int64)),
            ],
            axis=0,
        )
        return g.op("Transpose", [g.op("Reshape", [x, target])], perm=perm)

    x = "x"
    for _ in range(layers):
        h = layer_norm(x)
        q = split_heads(linear(h, hidden, hidden), [0, 2, 1, 3])
        k = split_heads(linear(h, hidden, hidden), [0, 2, 3, 1])
        v = split_heads(linear(h, hidden, hidden), [0, 2, 1, 3])
        scores = g.op("Div", [g.op("MatMul", [q, k]), g.constant_node(np.array(head_dim**0.5, np.float32))])
        context = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
        target = g.op(
            "Concat",
            [dim(context, 0), dim(context, 1), g.constant_node(np.array([hidden], np.int64))],
            axis=0,
        )
        x = g.op("Add", [x, linear(g.op("Reshape", [context, target]), hidden, hidden)])
        h = linear(layer_norm(x), hidden, ffn)
        erf = g.op("Erf", [g.op("Div", [h, g.constant_node(np.array(2**0.5, np.float32))])])
        gelu = g.op(
            "Mul",
            [
                g.op("Mul", [h, g.op("Add", [erf, g.constant_node(np.array(1.0, np.float32))])]),
                g.constant_node(np.array(0.5, np.float32)),
            ],
        )
        x = g.op("Add", [x, linear(gelu, ffn, hidden)])
    g.nodes.append(oh.make_node("Identity", [x], ["y"], name="y"))
    float32 = onnx.TensorProto.FLOAT
    graph = oh.make_graph(
        g.nodes,
        "transformer_encoder",
        [oh.make_tensor_value_info("x", float32, ["batch", "seq", hidden])],
        [oh.make_tensor_value_info("y", float32, ["batch", "seq", hidden])],
        initializer=g.inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 14)], ir_version=7)


def resnet_stack(blocks: int, channels: int = 16, size: int = 32, seed: int = 0) -> onnx.ModelProto:
    """A ResNet-like stack of basic blocks (Conv -> BatchNormalization -> Relu -> Conv -> BatchNormalization ->
    Add(residual) -> Relu: 7 nodes a block) on x [batch, channels, size, size] with a symbolic batch."""
    g = _Builder(seed)

    def conv_bn(x: str) -> str:
        scale = (2 / (channels * 9)) ** 0.5
        y = g.op("Conv", [x, g.weight(channels, channels, 3, 3, scale=scale)], kernel_shape=[3, 3], pads=[1] * 4)
        stats = [
            (1 + 0.1 * g.rng.standard_normal(channels)).astype(np.float32),
            (0.1 * g.rng.standard_normal(channels)).astype(np.float32),
            (0.1 * g.rng.standard_normal(channels)).astype(np.float32),
            (1 + g.rng.random(channels)).astype(np.float32),
        ]
        return g.op("BatchNormalization", [y, *map(g.const, stats)], epsilon=1e-5)

    x = "x"
    for _ in range(blocks):
        h = conv_bn(g.op("Relu", [conv_bn(x)]))
        x = g.op("Relu", [g.op("Add", [h, x])])
    g.nodes.append(oh.make_node("Identity", [x], ["y"], name="y"))
    float32 = onnx.TensorProto.FLOAT
    shape = ["batch", channels, size, size]
    graph = oh.make_graph(
        g.nodes,
        "resnet_stack",
        [oh.make_tensor_value_info("x", float32, shape)],
        [oh.make_tensor_value_info("y", float32, shape)],
        initializer=g.inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 14)], ir_version=7)
