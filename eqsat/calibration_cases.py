"""The graphs `eqsat calibrate` times: each op the roofline prices over a grid of shapes and dtypes, chains
that separate a kernel's launch from a call's fixed cost, and each fused kernel a target claims (its producer
alone, its consumer alone, the two together).

Each fit case carries its kernels as the roofline counts them (eqsat.extract.calibrate.Kernel: FLOPs from
eqsat.extract.op_traits, bytes read and written), so measured and priced are the same graph. Cases come in
priority order: a small budget times the first ones only (launch, bandwidth and the fp32 peak first).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterator, Sequence

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

from eqsat.extract.calibrate import Kernel
from eqsat.extract.op_traits import DTYPE_BYTES, ELEMENTWISE_FLOPS, REDUCE_FLOPS

RNG = np.random.default_rng(0)
NP = {"FLOAT": np.float32, "FLOAT16": np.float16, "DOUBLE": np.float64, "INT64": np.int64, "INT32": np.int32}
NP.update(UINT8=np.uint8, INT8=np.int8)
OPSET = 17


@dataclasses.dataclass(frozen=True)
class Case:
    """A graph to time. `kernels`: what the roofline prices (a fit case); `pair`: (pattern, consumer, part)
    for the three graphs of a fused-kernel check (part: "producer", "consumer" or "both"), whose consumer case
    holds the consumer as an epilogue of the producer would be priced: its FLOPs and the bytes of its other
    inputs only."""

    name: str
    model: onnx.ModelProto
    feeds: dict[str, np.ndarray]
    kernels: tuple[Kernel, ...] = ()
    pair: tuple[str, str, str] | None = None


def _elem(dtype: str) -> int:
    return int(getattr(onnx.TensorProto, dtype))


def _array(shape: Sequence[int], dtype: str, positive: bool = False) -> np.ndarray:
    if dtype in ("INT64", "INT32", "UINT8", "INT8"):
        low, high = (0, 100) if dtype == "UINT8" else (-50, 50)
        return RNG.integers(low, high, shape).astype(NP[dtype])
    value = RNG.standard_normal(shape)
    return (np.abs(value) + 0.5 if positive else value).astype(NP[dtype])


def _graph(
    nodes: Sequence[onnx.NodeProto],
    inputs: dict[str, np.ndarray],
    inits: dict[str, np.ndarray] | None = None,
    opset: int = OPSET,
    out: int | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model reading `inputs` (their arrays are the feeds) and writing the last node's first output, of
    element type `out` (default: the first input's)."""
    first = onh.helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype)
    graph = oh.make_graph(
        list(nodes),
        "calibrate",
        [
            oh.make_tensor_value_info(k, onh.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()
        ],
        [oh.make_tensor_value_info(nodes[-1].output[0], first if out is None else out, None)],
        [onh.from_array(v, k) for k, v in (inits or {}).items()],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)]), inputs


def _nbytes(dtype: str, *numels: float) -> float:
    return float(DTYPE_BYTES[dtype]) * sum(numels)


# ---- fit cases ----


def chains() -> Iterator[Case]:
    """k Relus in a row on [64] (launch against a call's fixed cost), and k Relu + Reshape pairs (views)."""
    x = {"x": _array((64,), "FLOAT")}
    relu = Kernel("Relu", "FLOAT", 64.0, _nbytes("FLOAT", 128))
    for k in (1, 2, 4, 8):
        nodes = [oh.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(k)]
        nodes[0].input[0] = "x"
        yield Case(f"Relu x{k} [64]", *_graph(nodes, x), kernels=(relu,) * k)
    shapes = {"s0": np.array([8, 8], np.int64), "s1": np.array([64], np.int64)}
    for k in (2, 4):
        nodes = []
        for i in range(k):
            nodes += [
                oh.make_node("Relu", ["x" if i == 0 else f"r{i}"], [f"a{i}"]),
                oh.make_node("Reshape", [f"a{i}", f"s{i % 2}"], [f"r{i + 1}"]),
            ]
        view = Kernel("Reshape", "FLOAT", 0.0, 0.0)
        yield Case(f"(Relu, Reshape) x{k} [64]", *_graph(nodes, x, shapes), kernels=(relu, view) * k)


def elementwise(op: str, dtype: str, numel: int, arity: int) -> Case:
    shape = (max(numel // 256, 1), min(numel, 256))
    n = float(math.prod(shape))
    names = ["x", "y"][:arity]
    inputs = {k: _array(shape, dtype, positive=op in ("Sqrt", "Div", "Log")) for k in names}
    kernel = Kernel(
        op, dtype, ELEMENTWISE_FLOPS.get(op, 1.0) * n, _nbytes(dtype, n * (arity + 1)), casts=(n,) * (arity + 1)
    )
    return Case(f"{op} {dtype} {list(shape)}", *_graph([oh.make_node(op, names, ["z"])], inputs), kernels=(kernel,))


def matmul(m: int, k: int, n: int, dtype: str) -> Case:
    """[m, k] x [k, n] with the right operand a weight (as models have it)."""
    if dtype in ("UINT8", "INT8"):
        node = oh.make_node("MatMulInteger", ["x", "w"], ["z"])
        op = "MatMulInteger"
    else:
        node, op = oh.make_node("MatMul", ["x", "w"], ["z"]), "MatMul"
    kernel = Kernel(
        op,
        dtype,
        2.0 * m * n * k,
        _nbytes(dtype, m * k, k * n) + 4.0 * m * n if op != "MatMul" else _nbytes(dtype, m * k, k * n, m * n),
        casts=(float(m * k), float(m * n)),  # x and the product: the weight is converted at load
    )
    out = onnx.TensorProto.INT32 if op == "MatMulInteger" else None
    model, feeds = _graph([node], {"x": _array((m, k), dtype)}, {"w": _array((k, n), dtype)}, out=out)
    return Case(f"{op} {dtype} [{m}, {k}] x [{k}, {n}]", model, feeds, kernels=(kernel,))


def gemm(m: int, k: int, n: int) -> Case:
    inits = {"w": _array((k, n), "FLOAT"), "b": _array((n,), "FLOAT")}
    kernel = Kernel("Gemm", "FLOAT", 2.0 * m * n * k, _nbytes("FLOAT", m * k, k * n, n, m * n))
    model, feeds = _graph([oh.make_node("Gemm", ["x", "w", "b"], ["z"])], {"x": _array((m, k), "FLOAT")}, inits)
    return Case(f"Gemm FLOAT [{m}, {k}] x [{k}, {n}] + [{n}]", model, feeds, kernels=(kernel,))


def conv(c: int, size: int, kernel_size: int, group: int = 1) -> Case:
    x = {"x": _array((1, c, size, size), "FLOAT")}
    inits = {"w": _array((c, c // group, kernel_size, kernel_size), "FLOAT") * 0.1, "b": _array((c,), "FLOAT")}
    pad = kernel_size // 2
    node = oh.make_node("Conv", ["x", "w", "b"], ["z"], pads=[pad] * 4, group=group)
    out = float(c * size * size)
    flops = 2.0 * out * (c // group) * kernel_size**2
    kernel = Kernel("Conv", "FLOAT", flops, _nbytes("FLOAT", out, inits["w"].size, c, out))
    label = f"Conv {kernel_size}x{kernel_size}{' depthwise' if group > 1 else ''} [1, {c}, {size}, {size}]"
    return Case(label, *_graph([node], x, inits), kernels=(kernel,))


def reduction(op: str, shape: tuple[int, ...]) -> Case:
    """A reduction, pool or normalization over the last axes of a float tensor of `shape`."""
    x = {"x": _array(shape, "FLOAT")}
    inits: dict[str, np.ndarray] = {}
    n_in = float(math.prod(shape))
    if op in ("ReduceMean", "ReduceMax"):
        node, n_out = oh.make_node(op, ["x"], ["z"], axes=[-1], keepdims=1), n_in / shape[-1]
    elif op == "ReduceSum":
        inits["a"] = np.array([-1], np.int64)
        node, n_out = oh.make_node(op, ["x", "a"], ["z"], keepdims=1), n_in / shape[-1]
    elif op in ("Softmax", "LogSoftmax"):
        node, n_out = oh.make_node(op, ["x"], ["z"], axis=-1), n_in
    elif op == "LayerNormalization":
        inits.update(s=_array(shape[-1:], "FLOAT"), b=_array(shape[-1:], "FLOAT"))
        node, n_out = oh.make_node(op, ["x", "s", "b"], ["z"], axis=-1, epsilon=1e-5), n_in
    elif op in ("GlobalAveragePool", "GlobalMaxPool"):
        node, n_out = oh.make_node(op, ["x"], ["z"]), float(shape[0] * shape[1])
    elif op in ("MaxPool", "AveragePool"):
        node, n_out = oh.make_node(op, ["x"], ["z"], kernel_shape=[3, 3], pads=[1] * 4), n_in
    else:
        raise ValueError(f"no calibration graph for {op}")
    extra = sum(v.size for k, v in inits.items() if v.dtype == np.float32)
    flops = REDUCE_FLOPS[op] * max(n_in, n_out)
    kernel = Kernel(op, "FLOAT", flops, _nbytes("FLOAT", n_in, n_out, extra) + 8.0 * ("a" in inits))
    return Case(f"{op} FLOAT {list(shape)}", *_graph([node], x, inits), kernels=(kernel,))


def movement(op: str, rows: int, cols: int = 256) -> Case:
    """Data movement over a [rows, cols] float tensor: bytes only."""
    x = {"x": _array((rows, cols), "FLOAT")}
    n = float(rows * cols)
    inits: dict[str, np.ndarray] = {}
    if op == "Transpose":
        node, moved = oh.make_node(op, ["x"], ["z"], perm=[1, 0]), _nbytes("FLOAT", n, n)
    elif op == "Concat":
        x["y"] = _array((rows, cols), "FLOAT")
        node, moved = oh.make_node(op, ["x", "y"], ["z"], axis=0), _nbytes("FLOAT", 2 * n, 2 * n)
    elif op == "Cast":
        node, moved = oh.make_node(op, ["x"], ["z"], to=onnx.TensorProto.FLOAT16), _nbytes("FLOAT", n) + 2 * n
    elif op == "Gather":  # every other row: reads what it writes, plus the indices
        inits["i"] = np.arange(0, rows, 2, dtype=np.int64)
        out = n / 2
        node, moved = oh.make_node(op, ["x", "i"], ["z"], axis=0), _nbytes("FLOAT", out, out) + 8.0 * inits["i"].size
    elif op == "Slice":
        inits.update(s=np.array([0], np.int64), e=np.array([rows // 2], np.int64))
        out = n / 2
        node, moved = oh.make_node(op, ["x", "s", "e"], ["z"]), _nbytes("FLOAT", n, out) + 16.0
    else:
        raise ValueError(f"no calibration graph for {op}")
    out_type = onnx.TensorProto.FLOAT16 if op == "Cast" else None
    model, feeds = _graph([node], x, inits, out=out_type)
    return Case(f"{op} FLOAT [{rows}, {cols}]", model, feeds, kernels=(Kernel(op, "FLOAT", 0.0, moved),))


def qdq_unit(op: str, size: int) -> Case:
    """DequantizeLinear -> Conv 3x3 (or MatMul) -> QuantizeLinear on uint8 activations and int8 weights: ONNX
    Runtime runs it as one integer kernel (QLinearConv / QLinearMatMul), as a target's [qdq] units are priced
    (on the quantized bytes, the UINT8 peak, no op_scale)."""
    scale: dict[str, np.ndarray] = {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8)}
    scale["ws"] = np.array(0.01, np.float32)
    x_shape: tuple[int, ...]
    w_shape: tuple[int, ...]
    if op == "Conv":
        x_shape, w_shape, out = (1, 32, size, size), (32, 32, 3, 3), 32 * size * size
        node = oh.make_node("Conv", ["xd", "wd"], ["y"], pads=[1] * 4)
        flops = 2.0 * out * 32 * 9
    else:
        x_shape, w_shape, out = (size, 256), (256, 256), size * 256
        node = oh.make_node("MatMul", ["xd", "wd"], ["y"])
        flops = 2.0 * out * 256
    inits: dict[str, np.ndarray] = {**scale, "w": RNG.integers(-100, 100, w_shape).astype(np.int8)}
    nodes = [
        oh.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"]),
        oh.make_node("DequantizeLinear", ["w", "ws"], ["wd"]),
        node,
        oh.make_node("QuantizeLinear", ["y", "s", "z"], ["q"]),
    ]
    x = {"x": RNG.integers(0, 255, x_shape).astype(np.uint8)}
    kernel = Kernel(op, "UINT8", flops, float(math.prod(x_shape) + math.prod(w_shape) + out), scaled=False)
    return Case(f"DQ -> {op} -> Q UINT8 {list(x_shape)}", *_graph(nodes, x, inits), kernels=(kernel,))


def fit_cases() -> list[Case]:
    """The fit's graphs, most informative first (see the module docstring)."""
    cases: list[Case] = list(chains())
    sizes = (1024, 16384, 262144, 1048576)
    cases += [elementwise("Add", "FLOAT", n, 2) for n in sizes]
    cases += [matmul(s, s, s, "FLOAT") for s in (64, 128, 256)] + [matmul(1, 512, 512, "FLOAT")]
    cases += [elementwise(op, "FLOAT", n, 2) for op in ("Mul", "Div", "Sub") for n in sizes[1:]]
    cases += [
        elementwise(op, "FLOAT", n, 1) for op in ("Relu", "Sigmoid", "Tanh", "Erf", "Sqrt", "Exp") for n in sizes[1:3]
    ]
    cases += [conv(32, 28, 3), conv(64, 14, 1), conv(64, 28, 3, group=64), conv(128, 14, 1)]
    cases += [gemm(1, 512, 512), gemm(128, 256, 256)]
    cases += [reduction(op, (512, 256)) for op in ("ReduceMean", "ReduceSum", "Softmax", "LayerNormalization")]
    cases += [reduction(op, (1, 64, 28, 28)) for op in ("GlobalAveragePool", "MaxPool")]
    cases += [movement(op, 512) for op in ("Transpose", "Concat", "Cast", "Gather", "Slice")]
    cases += [elementwise("Add", d, 262144, 2) for d in ("DOUBLE", "FLOAT16", "INT64", "INT32")]
    cases += [qdq_unit("Conv", 28), qdq_unit("Conv", 56), qdq_unit("MatMul", 128), qdq_unit("MatMul", 512)]
    cases += [matmul(128, 128, 128, "DOUBLE"), matmul(128, 128, 128, "FLOAT16"), matmul(256, 256, 256, "UINT8")]
    return cases


# ---- fused kernels ----

#: Producers the fused checks can build: a graph input -> the producer -> its output (name "p").
#: Producers the fused checks can build: a graph input -> the producer -> its output (name "p"). Cheap
#: producers with large outputs, so that a consumer's own time stands out of the producer's noise.
PRODUCERS: dict[str, Callable[[], tuple[list[onnx.NodeProto], dict, dict, tuple[int, ...]]]] = {
    "Conv": lambda: (
        [oh.make_node("Conv", ["x", "w", "b"], ["p"])],
        {"x": _array((1, 16, 56, 56), "FLOAT")},
        {"w": _array((64, 16, 1, 1), "FLOAT") * 0.1, "b": _array((64,), "FLOAT")},
        (1, 64, 56, 56),
    ),
    "MatMul": lambda: (
        [oh.make_node("MatMul", ["x", "w"], ["p"])],
        {"x": _array((512, 64), "FLOAT")},
        {"w": _array((64, 256), "FLOAT") * 0.1},
        (512, 256),
    ),
}


def _consumer(op: str, shape: tuple[int, ...], other: str) -> tuple[list[onnx.NodeProto], dict, dict, int] | None:
    """The consumer node reading "p" (and its constants, or a second graph input with other_inputs = "any"),
    with the opset it needs; None for an op this module cannot build."""
    channel = (shape[1], *[1] * (len(shape) - 2)) if len(shape) == 4 else shape[-1:]
    inits: dict[str, np.ndarray] = {}
    inputs: dict[str, np.ndarray] = {}
    opset = OPSET
    if op in ("Add", "Mul"):
        if other == "any":
            inputs["r"] = _array(shape, "FLOAT")
        else:
            inits["r"] = _array(channel, "FLOAT")
        node = oh.make_node(op, ["p", "r"], ["z"])
    elif op == "Clip":
        inits.update(lo=np.array(0.0, np.float32), hi=np.array(6.0, np.float32))
        node = oh.make_node(op, ["p", "lo", "hi"], ["z"])
    elif op in ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish"):
        node = oh.make_node(op, ["p"], ["z"])
    elif op == "Gelu":
        node, opset = oh.make_node(op, ["p"], ["z"]), 20
    else:
        return None
    return [node], inputs, inits, opset


def fused_cases(patterns: Sequence[tuple[str, Sequence[str], Sequence[str], str]]) -> list[Case]:
    """For each (pattern name, producers, consumers, other_inputs) the graphs that tell whether the runtime fuses
    each consumer into the first producer this module can build: the producer alone (pair (name, producer,
    "producer")), and per consumer it alone on a graph input of the producer's output shape and the two
    together (pairs (name, consumer, "consumer" / "both"))."""
    cases: list[Case] = []
    for name, producers, consumers, other in patterns:
        producer = next((p for p in producers if p in PRODUCERS), None)
        if producer is None:
            continue
        p_nodes, p_inputs, p_inits, shape = PRODUCERS[producer]()
        alone = _graph(p_nodes, p_inputs, p_inits)  # its output is the graph's: no copy after it
        cases.append(Case(producer, *alone, pair=(name, producer, "producer")))
        for op in consumers:
            built = _consumer(op, shape, other)
            if built is None:
                continue
            nodes, inputs, inits, opset = built
            c_inputs = {"p": _array(shape, "FLOAT"), **inputs}
            n = float(math.prod(shape))
            reads = _nbytes("FLOAT", *(v.size for v in [*inputs.values(), *inits.values()]))  # besides "p"
            fused = Kernel(op, "FLOAT", ELEMENTWISE_FLOPS.get(op, 1.0) * n, reads)  # as an epilogue prices it
            consumer = _graph(nodes, c_inputs, inits, opset)
            cases.append(Case(op, *consumer, kernels=(fused,), pair=(name, op, "consumer")))
            both = _graph([*p_nodes, *nodes], {**p_inputs, **inputs}, {**p_inits, **inits}, opset)
            cases.append(Case(f"{producer} + {op}", *both, pair=(name, op, "both")))
    return cases
