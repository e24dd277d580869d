"""The onnxruntime measurements behind the re-priced ops of the targets (extract/targets/*.toml comments).

    python -m benchmarks.measure_ops [--rounds 300] [--calls 20] [--case NAME ...]

Each case is a group of small models computing the same function in the forms the cost model has to
choose between, at shapes taken from the shared models (MobileNetV2's head [1, 1280, 7, 7] after its last
Conv + Clip; BERT's attention scores [1, 2, 128, 128]; MobileNetV2's classifier 1280 -> 1000; ResNet's
quantized activations [1, 64, 56, 56]). onnxruntime's CPU EP, 1 intra-op and 1 inter-op thread,
ORT_ENABLE_ALL. After a warm-up of 50 calls per variant, each round times `--calls` calls of every variant in
turn (interleaved: load from other processes slows every variant alike); a variant's figure is the median
over the rounds of its per-call time. The machine, the CPU and the onnxruntime version are printed first:
paste them with the figures into the target's TOML comments.
"""

from __future__ import annotations

import argparse
import platform
from typing import Callable, Sequence

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

Variant = tuple[str, onnx.ModelProto]
RNG = np.random.default_rng(0)


def _model(
    nodes: Sequence[onnx.NodeProto], x: tuple[str, int, Sequence[int]], inits: dict[str, np.ndarray], opset: int = 17
) -> onnx.ModelProto:
    name, elem, shape = x
    graph = oh.make_graph(
        list(nodes),
        "measure",
        [oh.make_tensor_value_info(name, elem, list(shape))],
        [oh.make_tensor_value_info("y", elem, None)],  # every case keeps the input's type,
        [onh.from_array(v, k) for k, v in inits.items()],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)])


def _conv_clip(cin: int, cout: int) -> tuple[list[onnx.NodeProto], dict[str, np.ndarray]]:
    """MobileNetV2's last 1x1 Conv + Clip(0, 6): ONNX Runtime runs it as a FusedConv in NCHWc."""
    inits = {
        "w": (RNG.standard_normal((cout, cin, 1, 1)) * 0.05).astype(np.float32),
        "b": RNG.standard_normal(cout).astype(np.float32),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(6.0, np.float32),
    }
    return [oh.make_node("Conv", ["x", "w", "b"], ["c"]), oh.make_node("Clip", ["c", "lo", "hi"], ["a"])], inits


def gap_head() -> list[Variant]:
    """GlobalAveragePool + Flatten against ReduceMean(axes [2, 3], keepdims 0), after MobileNetV2's last Conv."""
    conv, inits = _conv_clip(112, 1280)
    x = ("x", onnx.TensorProto.FLOAT, (1, 112, 7, 7))
    gap = [oh.make_node("GlobalAveragePool", ["a"], ["g"]), oh.make_node("Flatten", ["g"], ["y"])]
    mean = [oh.make_node("ReduceMean", ["a"], ["y"], axes=[2, 3], keepdims=0)]
    return [
        ("Conv+Clip+GAP+Flatten", _model(conv + gap, x, inits)),
        ("Conv+Clip+ReduceMean(kd=0)", _model(conv + mean, x, inits)),
        ("Conv+Clip", _model([*conv, oh.make_node("Identity", ["a"], ["y"])], x, inits)),
    ]


def gap_alone() -> list[Variant]:
    """The same heads on a graph input [1, 1280, 7, 7] (no NCHWc producer)."""
    x = ("x", onnx.TensorProto.FLOAT, (1, 1280, 7, 7))
    gap = [oh.make_node("GlobalAveragePool", ["x"], ["g"]), oh.make_node("Flatten", ["g"], ["y"])]
    mean = [oh.make_node("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=0)]
    return [("GAP+Flatten", _model(gap, x, {})), ("ReduceMean(kd=0)", _model(mean, x, {}))]


def div_const() -> list[Variant]:
    """Div by a scalar constant against Mul by its reciprocal, on BERT's attention scores."""
    x = ("x", onnx.TensorProto.FLOAT, (1, 2, 128, 128))
    c = {"c": np.array(8.0, np.float32)}
    r = {"c": np.array(0.125, np.float32)}
    return [
        ("Div(x, c)", _model([oh.make_node("Div", ["x", "c"], ["y"])], x, c)),
        ("Mul(x, 1/c)", _model([oh.make_node("Mul", ["x", "c"], ["y"])], x, r)),
    ]


def div_vector() -> list[Variant]:
    """Div by a per-column constant [128] against Mul by its reciprocal."""
    x = ("x", onnx.TensorProto.FLOAT, (1, 2, 128, 128))
    c = RNG.uniform(1, 2, 128).astype(np.float32)
    return [
        ("Div(x, c[128])", _model([oh.make_node("Div", ["x", "c"], ["y"])], x, {"c": c})),
        ("Mul(x, 1/c[128])", _model([oh.make_node("Mul", ["x", "c"], ["y"])], x, {"c": 1 / c})),
    ]


def matmul_add() -> list[Variant]:
    """MatMul + Add against Gemm, MobileNetV2's classifier [1, 1280] x [1280, 1000] + [1000]."""
    x = ("x", onnx.TensorProto.FLOAT, (1, 1280))
    inits = {
        "w": (RNG.standard_normal((1280, 1000)) * 0.03).astype(np.float32),
        "b": RNG.standard_normal(1000).astype(np.float32),
    }
    mm = [oh.make_node("MatMul", ["x", "w"], ["m"]), oh.make_node("Add", ["m", "b"], ["y"])]
    return [
        ("MatMul+Add", _model(mm, x, inits)),
        ("Gemm", _model([oh.make_node("Gemm", ["x", "w", "b"], ["y"])], x, inits)),
    ]


def zero_point() -> list[Variant]:
    """DequantizeLinear -> Relu -> QuantizeLinear with an explicit uint8 zero point 0 and without one."""
    x = ("x", onnx.TensorProto.UINT8, (1, 64, 56, 56))
    inits = {"s": np.array(0.05, np.float32), "z": np.array(0, np.uint8)}

    def chain(zp: list[str]) -> list[onnx.NodeProto]:
        return [
            oh.make_node("DequantizeLinear", ["x", "s", *zp], ["d"]),
            oh.make_node("Relu", ["d"], ["r"]),
            oh.make_node("QuantizeLinear", ["r", "s", *zp], ["y"]),
        ]

    return [
        ("DQ/Q zero point 0", _model(chain(["z"]), x, inits, 13)),
        ("DQ/Q no zero point", _model(chain([]), x, {"s": inits["s"]}, 13)),
    ]


CASES: dict[str, Callable[[], list[Variant]]] = {
    "gap-head": gap_head,
    "gap-alone": gap_alone,
    "div-const": div_const,
    "div-vector": div_vector,
    "matmul-add": matmul_add,
    "zero-point": zero_point,
}


def _feed(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    value = model.graph.input[0]
    shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
    if value.type.tensor_type.elem_type == onnx.TensorProto.UINT8:
        return {value.name: RNG.integers(0, 255, shape, dtype=np.uint8)}
    return {value.name: RNG.standard_normal(shape).astype(np.float32)}


def measure(variants: list[Variant], rounds: int, calls: int) -> dict[str, float]:
    """Median per-call seconds of each variant over interleaved rounds (after a warm-up; eqsat.check.timing)."""
    from eqsat.check import timing

    runs = [timing.Timed(label, timing.session(model), _feed(model), calls) for label, model in variants]
    for run in runs:
        run.warm_up(50)
    timing.time_interleaved(runs, rounds=rounds)
    return {run.label: run.median for run in runs}


def main(argv: Sequence[str] | None = None) -> None:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="default: every case")
    args = parser.parse_args(argv)
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    print(
        f"# {platform.node()}: {cpu}, onnxruntime {ort.__version__}, 1 thread, ORT_ENABLE_ALL, "
        f"median of {args.rounds} interleaved rounds x {args.calls} calls"
    )
    for name in args.case or CASES:
        for label, seconds in measure(CASES[name](), args.rounds, args.calls).items():
            print(f"{name:12} {label:30} {seconds * 1e6:9.2f} us")


if __name__ == "__main__":
    main()
