"""Symbolic dims: shape facts for values with dynamic dims, the loader's run-time shape chains made static,
zero recurrent states dropped, and dynamic dims kept in the output."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.frontend import normalize, shape_chains, symbols
from eqsat.frontend.symbols import symbolic_shapes
from eqsat.testing import op_counts, run
from tests.rule_graphs import model, node

RNG = np.random.default_rng(0)


def _facts(m: onnx.ModelProto) -> tuple[dict[str, tuple[int, ...]], dict[int, str]]:
    work, _ = normalize.normalize_proto(m)
    facts = symbolic_shapes(work.graph)
    return facts.shapes, facts.table.names


def _same_outputs(a: onnx.ModelProto, b: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    for x, y in zip(run(a, feeds), run(b, feeds)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)


def _dims(value: onnx.ValueInfoProto) -> list[int | str | None]:
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else None) for d in value.type.tensor_type.shape.dim]


# ---- shape facts ----


def test_dim_params_are_shared_symbols() -> None:
    m = model(
        [node("Relu", ["x"], "r"), node("Add", ["r", "z"], "y")],
        [("x", "FLOAT", ("batch", 4)), ("z", "FLOAT", ("batch", 4))],
    )
    shapes, names = _facts(m)
    assert shapes["x"] == shapes["z"] == shapes["r"] == shapes["y"]
    assert shapes["x"][1] == 4 and names[shapes["x"][0]] == "batch"


def test_unnamed_dims_are_fresh_symbols_recovered_through_ops() -> None:
    """An unnamed dim is its own symbol; Relu, BatchNormalization and the conv's batch dim keep it."""
    w = RNG.standard_normal((2, 3, 3, 3)).astype(np.float32)
    bn = [np.ones(2, np.float32), np.zeros(2, np.float32), np.zeros(2, np.float32), np.ones(2, np.float32)]
    m = model(
        [
            node("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1]),
            node("BatchNormalization", ["c", "s", "b", "mu", "var"], "n"),
            node("Relu", ["n"], "y"),
        ],
        [("x", "FLOAT", (None, 3, None, None))],
        initializers=dict(w=w, s=bn[0], b=bn[1], mu=bn[2], var=bn[3]),
    )
    shapes, _ = _facts(m)
    assert shapes["x"][0] == shapes["c"][0] < 0
    assert shapes["c"] == shapes["n"] == shapes["y"] and shapes["c"][1] == 2
    assert len({shapes["x"][0], shapes["x"][2], shapes["x"][3]}) == 3  # three different unknowns


def test_negative_dim_value_is_an_unknown_dim_not_a_size() -> None:
    """paddle2onnx writes dynamic dims as -1: Shape of such a value must not fold to a constant holding -1."""
    m = model([node("Shape", ["x"], "s"), node("Reshape", ["x", "s"], "y")], [("x", "FLOAT", (-1, 3))])
    out = eqsat.optimize(m).proto
    feeds = {"x": RNG.standard_normal((5, 3)).astype(np.float32)}
    _same_outputs(m, out, feeds)
    for init in out.graph.initializer:
        assert -1 not in onnx.numpy_helper.to_array(init).reshape(-1).tolist()


def test_an_output_declared_with_minus_one_is_not_refused() -> None:
    """paddle2onnx declares outputs with -1 too: the checker's shape inference would call the inferred 12 a
    conflict with -1 and refuse a model onnxruntime runs; the -1 is a dynamic dim, and the output is verified."""
    nodes = [node("Reshape", ["x", "target"], "t"), node("Relu", ["t"], "y")]
    m = model(
        nodes, [("x", "FLOAT", ("N", 4, 6))], [("y", "FLOAT", ("N", 2, -1))], {"target": np.array([0, 2, -1], np.int64)}
    )
    result = eqsat.optimize(m, input_shapes={"x": (3, 4, 6)})
    assert result.report.verification.ok
    dims = result.proto.graph.output[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "N" and all(d.dim_value >= 0 for d in dims)


def test_reshape_with_allowzero_and_an_empty_dim_is_not_refused() -> None:
    m = model(
        [node("Reshape", ["x", "target"], "t", allowzero=1), node("Relu", ["t"], "y")],
        [("x", "FLOAT", (2, 0, 3))],
        [("y", "FLOAT", (0, 6))],
        {"target": np.array([0, 6], np.int64)},
    )
    assert eqsat.optimize(m).report.verification.ok


# ---- run-time shape computations ----


def _heads_reshape(batch: str | None = "batch", seq: str | None = "seq") -> onnx.ModelProto:
    """x [batch, seq, 8] -> Reshape(x, Concat(Shape(x)[0], Shape(x)[1], 2, 4)) -> Transpose: attention heads."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Gather", ["s", "i0"], "b", axis=0),
        node("Gather", ["s", "i1"], "n", axis=0),
        node("Unsqueeze", ["b", "ax"], "bu"),
        node("Unsqueeze", ["n", "ax"], "nu"),
        node("Concat", ["bu", "nu", "heads"], "target", axis=0),
        node("Reshape", ["x", "target"], "r"),
        node("Transpose", ["r"], "y", perm=[0, 2, 1, 3]),
    ]
    inits = dict(
        i0=np.array(0, np.int64), i1=np.array(1, np.int64), ax=np.array([0], np.int64), heads=np.array([2, 4], np.int64)
    )
    return model(nodes, [("x", "FLOAT", (batch, seq, 8))], initializers=inits)


def test_reshape_minus_one_is_the_symbol_left_over() -> None:
    """Reshape([B, 3, 4] -> [-1, 12]): the -1 is B (x's one symbol; the sizes' products agree); with a
    second symbol in x it stays unknown."""
    shapes, names = _facts(
        model(
            [node("Reshape", ["x", "t"], "y")],
            [("x", "FLOAT", ("B", 3, 4))],
            initializers=dict(t=np.array([-1, 12], np.int64)),
        )
    )
    assert shapes["y"] == (shapes["x"][0], 12) and names[shapes["y"][0]] == "B"
    shapes, _ = _facts(
        model(
            [node("Reshape", ["x", "t"], "y")],
            [("x", "FLOAT", ("B", "S", 4))],
            initializers=dict(t=np.array([-1, 4], np.int64)),
        )
    )
    assert shapes["y"][0] not in (shapes["x"][0], shapes["x"][1])


def test_shape_chain_becomes_a_static_reshape() -> None:
    m = _heads_reshape()
    out = eqsat.optimize(m).proto
    assert op_counts(out) == {"Reshape": 1, "Transpose": 1}
    (target,) = [onnx.numpy_helper.to_array(i) for i in out.graph.initializer]
    assert target.tolist() == [0, 0, 2, 4]
    for shape in ((1, 5, 8), (3, 2, 8)):
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_shape_chain_with_one_unmatched_symbol_uses_minus_one() -> None:
    """The target's first entry is the batch, the second a product the chain computes from another input:
    only one symbol is left, so it is written -1."""
    nodes = [
        node("Shape", ["z"], "s"),
        node("Gather", ["s", "i0"], "n", axis=0),
        node("Unsqueeze", ["n", "ax"], "nu"),
        node("Concat", ["nu", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    inits = dict(i0=np.array(0, np.int64), ax=np.array([0], np.int64), tail=np.array([8], np.int64))
    m = model(nodes, [("x", "FLOAT", ("a", 4, 2)), ("z", "FLOAT", ("b", 2))], initializers=inits)
    out = eqsat.optimize(m, verify=False).proto
    (target,) = [onnx.numpy_helper.to_array(i) for i in out.graph.initializer]
    assert target.tolist() == [-1, 8]
    feeds = {
        "x": RNG.standard_normal((3, 4, 2)).astype(np.float32),
        "z": RNG.standard_normal((3, 2)).astype(np.float32),
    }
    _same_outputs(m, out, feeds)


def test_shape_chain_with_two_unknown_symbols_is_kept() -> None:
    """Two entries that are neither x's dims nor the only unknown: no static target says it."""
    nodes = [
        node("Shape", ["z"], "s"),
        node("Concat", ["s", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    m = model(
        nodes, [("x", "FLOAT", ("a", 8)), ("z", "FLOAT", ("b", "c"))], initializers=dict(tail=np.array([8], np.int64))
    )
    out = eqsat.optimize(m, verify=False).proto
    assert op_counts(out)["Shape"] == 1


def test_expand_target_from_the_input_shape_becomes_static() -> None:
    nodes = [
        node("Shape", ["x"], "s"),
        node("Gather", ["s", "i0"], "b", axis=0),
        node("Unsqueeze", ["b", "ax"], "bu"),
        node("Concat", ["bu", "tail"], "target", axis=0),
        node("Expand", ["x", "target"], "y"),
    ]
    inits = dict(i0=np.array(0, np.int64), ax=np.array([0], np.int64), tail=np.array([4], np.int64))
    m = model(nodes, [("x", "FLOAT", ("batch", 1))], initializers=inits)
    out = eqsat.optimize(m).proto
    assert op_counts(out) == {"Expand": 1}
    _same_outputs(m, out, {"x": RNG.standard_normal((3, 1)).astype(np.float32)})


def _layernorm_broadcast(taken_name: str | None = None) -> onnx.ModelProto:
    """tf2onnx's and jax2tf's LayerNorm broadcasting: one run-time target `t = Concat(Slice(Shape(x), 0, 1), [1],
    [8])` read by a Reshape and an Expand; with `taken_name`, a value of the model already has that name."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "zero", "one"], "b"),
        node("Concat", ["b", "one", "eight"], "t", axis=0),
        node("Reshape", ["x", "t"], "r"),
        node("Expand", ["r", "t"], "y"),
    ]
    inits = dict(zero=np.array([0], np.int64), one=np.array([1], np.int64), eight=np.array([8], np.int64))
    outputs: list = ["y"]
    if taken_name is not None:
        nodes.append(node("Relu", ["x"], taken_name))
        outputs.append(taken_name)
    return model(nodes, [("x", "FLOAT", ("batch", 8))], outputs, initializers=inits, opset=15)


@pytest.mark.parametrize("taken_name", [None, "t_static", "t_static__1"])
def test_one_target_read_by_reshape_and_expand_gets_one_constant_each(taken_name: str | None) -> None:
    """The Reshape's static target is [0, 1, 8] (or [-1, 1, 8]), the Expand's [1, 1, 8]: two constants that
    must not share a name (onnx_ir's initializer table keeps one value per name, and the Reshape then read
    the Expand's [1, 1, 8]: right at batch 1, which verification used, and wrong at any other batch), nor
    take the name of a value the model already has."""
    m = _layernorm_broadcast(taken_name)
    out = eqsat.optimize(m).proto
    onnx.checker.check_model(out, full_check=True)
    names = [t.name for t in out.graph.initializer] + [o for n in out.graph.node for o in n.output]
    assert len(names) == len(set(names))
    for batch in (1, 2, 4):
        _same_outputs(m, out, {"x": RNG.standard_normal((batch, 8)).astype(np.float32)})


def test_a_symbol_and_a_literal_minus_one_are_not_both_written_minus_one() -> None:
    """t = Concat(Shape(x)[:1], [-1]) reshapes x [batch, 1, 1, 1] (batch copied: [0, -1]) and x2 [N, 1, 1, 1]:
    for x2, batch is not its dim 0, and the target's own -1 is the one inferred dim, so batch cannot be written
    -1 too (the fuzzer found [-1, -1], which no runtime accepts)."""
    nodes = [
        node("Shape", ["x"], "s", start=0, end=1),
        node("Concat", ["s", "minus_one"], "t", axis=0),
        node("Reshape", ["x", "t"], "a"),
        node("Reshape", ["x2", "t"], "b"),
        node("Sub", ["a", "b"], "y"),
    ]
    m = model(
        nodes,
        [("x", "FLOAT", ("batch", 1, 1, 1)), ("x2", "FLOAT", ("N", 1, 1, 1))],
        initializers=dict(minus_one=np.array([-1], np.int64)),
    )
    assert shape_chains._reshape_target(("batch", -1), ("N", 1, 1, 1)) is None
    out = eqsat.optimize(m, input_shapes={"x": (2, 1, 1, 1), "x2": (2, 1, 1, 1)}).proto
    for batch in (2, 3):
        feeds = {k: RNG.standard_normal((batch, 1, 1, 1)).astype(np.float32) for k in ("x", "x2")}
        _same_outputs(m, out, feeds)


# ---- zero recurrent states ----


def _gru(fill: float) -> onnx.ModelProto:
    hidden = 4
    nodes = [
        node("Shape", ["x"], "s"),
        node("Gather", ["s", "i1"], "b", axis=0),
        node("Unsqueeze", ["b", "ax"], "bu"),
        node("Concat", ["one", "bu", "h"], "hs", axis=0),
        oh.make_node(
            "ConstantOfShape", ["hs"], ["h0"], value=onnx.numpy_helper.from_array(np.array([fill], np.float32))
        ),
        oh.make_node("GRU", ["x", "W", "R", "B", "", "h0"], ["y"], hidden_size=hidden),
    ]
    inits = dict(
        i1=np.array(1, np.int64),
        ax=np.array([0], np.int64),
        one=np.array([1], np.int64),
        h=np.array([hidden], np.int64),
        W=RNG.standard_normal((1, 3 * hidden, 3)).astype(np.float32),
        R=RNG.standard_normal((1, 3 * hidden, hidden)).astype(np.float32),
        B=RNG.standard_normal((1, 6 * hidden)).astype(np.float32),
    )
    return model(nodes, [("x", "FLOAT", ("seq", "batch", 3))], initializers=inits)


def test_zero_initial_state_is_dropped() -> None:
    m = _gru(0.0)
    out = eqsat.optimize(m).proto
    assert op_counts(out) == {"GRU": 1}
    _same_outputs(m, out, {"x": RNG.standard_normal((5, 2, 3)).astype(np.float32)})


def test_nonzero_initial_state_is_kept() -> None:
    out = eqsat.optimize(_gru(0.5)).proto
    assert op_counts(out)["ConstantOfShape"] == 1


# ---- dynamic dims survive ----


def test_dynamic_dims_survive_and_rules_fire_under_them() -> None:
    """Conv + BatchNormalization over [N, 3, H, W]: the fold needs only the channel dim; the output keeps N, H, W."""
    w = RNG.standard_normal((4, 3, 3, 3)).astype(np.float32)
    stats = dict(
        s=RNG.uniform(0.5, 2, 4).astype(np.float32),
        b=RNG.standard_normal(4).astype(np.float32),
        mu=RNG.standard_normal(4).astype(np.float32),
        var=RNG.uniform(0.5, 2, 4).astype(np.float32),
    )
    m = model(
        [
            node("Conv", ["x", "w"], "c", pads=[1, 1, 1, 1]),
            node("BatchNormalization", ["c", "s", "b", "mu", "var"], "y"),
        ],
        [("x", "FLOAT", ("N", 3, "H", "W"))],
        outputs=[("y", "FLOAT", ("N", 4, "H", "W"))],
        initializers=dict(w=w, **stats),
    )
    out = eqsat.optimize(m).proto
    assert op_counts(out) == {"Conv": 1}
    assert _dims(out.graph.input[0]) == ["N", 3, "H", "W"]
    assert _dims(out.graph.output[0]) == ["N", 4, "H", "W"]
    for shape in ((1, 3, 5, 7), (2, 3, 8, 4)):
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


@pytest.mark.parametrize("shape", [("N", 4), ("N", None)])
def test_reduce_mean_needs_the_reduced_axis_static(shape) -> None:
    """ReduceSum * 1/4 over a static axis becomes ReduceMean under a symbolic batch; over a symbolic axis
    it must not, whatever size that axis has at run time."""
    m = model(
        [node("ReduceSum", ["x", "axes"], "r", keepdims=0), node("Mul", ["r", "q"], "y")],
        [("x", "FLOAT", shape)],
        initializers=dict(axes=np.array([1], np.int64), q=np.array(0.25, np.float32)),
    )
    out = eqsat.optimize(m, verify=False).proto
    assert ("ReduceMean" in op_counts(out)) == (shape[1] == 4)
    _same_outputs(m, out, {"x": RNG.standard_normal((2, 4)).astype(np.float32)})


@pytest.mark.parametrize("unsqueeze", [False, True])
def test_concat_of_gathered_shape_into_reshape(unsqueeze: bool) -> None:
    """onnxoptimizer's fuse_concat_into_reshape, done at load by eqsat.frontend.shape_chains (no rule needed):
    Reshape(x, Concat(Gather(Shape(x), [0]), [-1])) -> Reshape(x, [0, 12]) for a symbolic batch (allowzero 0,
    no literal 0 among the constants; the -1 is 3 * 4, which the facts know, so it is written as it). A 1-D index
    gathers a 1-D piece; a scalar one needs the Unsqueeze."""
    gather = [node("Gather", ["s", "i"], "b", axis=0)]
    if unsqueeze:
        gather.append(node("Unsqueeze", ["b", "ax"], "bu"))
    nodes = [
        node("Shape", ["x"], "s"),
        *gather,
        node("Concat", [gather[-1].output[0], "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    inits = dict(
        i=np.array(0 if unsqueeze else [0], np.int64), ax=np.array([0], np.int64), tail=np.array([-1], np.int64)
    )
    m = model(nodes, [("x", "FLOAT", ("N", 3, 4))], initializers=inits)
    out = eqsat.optimize(m).proto
    assert op_counts(out) == {"Reshape": 1}
    (target,) = [onnx.numpy_helper.to_array(i) for i in out.graph.initializer]
    assert target.tolist() == [0, 12]
    for shape in ((1, 3, 4), (5, 3, 4)):  # (the original's [N, -1] fails for N = 0 under allowzero 0)
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_concat_of_gathered_shape_with_a_literal_zero_is_kept() -> None:
    """A literal 0 among the constants: the folder would mix "copy" zeros with it, so the chain stays."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Gather", ["s", "i"], "b", axis=0),
        node("Concat", ["b", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    m = model(
        nodes,
        [("x", "FLOAT", ("N", 3, 4))],
        initializers=dict(i=np.array([0], np.int64), tail=np.array([0, -1], np.int64)),
    )
    out = eqsat.optimize(m, verify=False).proto
    assert op_counts(out)["Shape"] == 1


@pytest.mark.parametrize("last", [32, None], ids=["last-dim-static", "last-dim-symbolic"])
def test_a_run_time_target_read_literally_stays_right_at_an_empty_batch(last: int | None) -> None:
    """Reshape(x[B, S, 384], Concat(Shape(x)[0:2], [-1, 32]), allowzero=1), as torch exports attention heads:
    onnxruntime infers the -1 even for an empty batch there. A static [0, 0, -1, 32] (allowzero 0) would fail at
    B = 0, so the -1 is written as the size the facts know (12), or, where they do not (x[B, S, H]), the target
    stays computed at run time."""
    width = 384 if last else "H"
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "i0", "i2"], "bs"),
        node("Concat", ["bs", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y", allowzero=1),
    ]
    inits = {"i0": np.array([0], np.int64), "i2": np.array([2], np.int64), "tail": np.array([-1, 32], np.int64)}
    m = model(nodes, [("x", "FLOAT", ("B", "S", width))], initializers=inits)
    out = eqsat.optimize(m, verify=False).proto
    if last:
        targets = [onnx.numpy_helper.to_array(t).tolist() for t in out.graph.initializer]
        assert [0, 0, 12, 32] in targets and op_counts(out)["Shape"] == 0
    for shape in ((0, 5, 384), (2, 5, 384), (1, 1, 384)):
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_a_copied_dim_beside_a_symbol_product_keeps_its_run_time_target() -> None:
    """Reshape(x[N, T, 4], [N, T * 4]): as [0, -1] it fails where N is 0 (the -1 cannot be inferred from an empty
    tensor) while the run-time target says both dims, so the chain stays and the output runs at every size."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "i0", "i1"], "n"),
        node("Slice", ["s", "i1", "i2"], "t"),
        node("Mul", ["t", "four"], "t4"),
        node("Concat", ["n", "t4"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    inits = {f"i{k}": np.array([k], np.int64) for k in range(3)} | {"four": np.array([4], np.int64)}
    m = model(nodes, [("x", "FLOAT", ("N", "T", 4))], initializers=inits)
    out = eqsat.optimize(m, verify=False).proto
    assert op_counts(out)["Shape"] == 1
    for shape in ((0, 3, 4), (2, 3, 4), (1, 1, 4)):
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


@pytest.mark.parametrize("spelled", ["product", "sum"])
def test_a_declared_dim_spelled_as_an_expression_is_a_name_of_its_own(spelled: str) -> None:
    """x declared ["N*T"] (or ["N+1"]) and Expand(x, Shape(Flatten-like Reshape(y[N, T]))) (or Expand(x,
    Shape(y[N]) + 1)): the computed dim is N * T (N + 1), which the declared name only spells. The Expand
    broadcasts x of any size 1 at run time, so it is no no-op: it stays, and the declared name is kept."""
    if spelled == "product":
        nodes = [node("Reshape", ["y", "flat"], "f"), node("Shape", ["f"], "s"), node("Expand", ["x", "s"], "z")]
        inputs, inits, y_shape = [("x", "FLOAT", ("N*T",)), ("y", "FLOAT", ("N", "T"))], {"flat": [-1]}, (2, 3)
    else:
        nodes = [node("Shape", ["y"], "s"), node("Add", ["s", "one"], "s1"), node("Expand", ["x", "s1"], "z")]
        inputs, inits, y_shape = [("x", "FLOAT", ("N+1",)), ("y", "FLOAT", ("N",))], {"one": [1]}, (5,)
    m = model(nodes, inputs, ["z"], initializers={k: np.array(v, np.int64) for k, v in inits.items()})
    out = eqsat.optimize(m, verify=False).proto
    assert "Expand" in op_counts(out)
    assert _dims(out.graph.input[0]) == _dims(m.graph.input[0])
    y = RNG.standard_normal(y_shape).astype(np.float32)
    for size in (1, int(np.prod(y_shape)) + (spelled == "sum")):  # broadcast, and the size the name spells
        _same_outputs(m, out, {"x": RNG.standard_normal(size).astype(np.float32), "y": y})


# ---- chains through Reshape, and sizes times symbols ----

#: A [batch] piece of a target: Gather(Shape(x), 0) made 1-D by an Unsqueeze, or by a Reshape to [1]; or
#: Shape(x)[0:1] made a scalar by a Reshape to [] and 1-D again by an Unsqueeze.
_BATCH_PIECES = {
    "unsqueeze": [node("Gather", ["s", "i0"], "b0", axis=0), node("Unsqueeze", ["b0", "ax"], "batch")],
    "reshape-to-1": [node("Gather", ["s", "i0"], "b0", axis=0), node("Reshape", ["b0", "one"], "batch")],
    "reshape-to-scalar": [
        node("Slice", ["s", "zero", "one"], "b0"),
        node("Reshape", ["b0", "scalar"], "b1"),
        node("Unsqueeze", ["b1", "ax"], "batch"),
    ],
}
#: A [4 * time] piece: Shape(x)[1:2] times 4, flattened by a Reshape to [-1]; or times 8, halved, to [1].
_TIME_PIECES = {
    "mul-flatten": [
        node("Slice", ["s", "one", "two"], "t0"),
        node("Mul", ["t0", "four"], "t1"),
        node("Reshape", ["t1", "flat"], "time4"),
    ],
    "mul-div": [
        node("Slice", ["s", "one", "two"], "t0"),
        node("Mul", ["eight", "t0"], "t1"),
        node("Div", ["t1", "two_scalar"], "t2"),
        node("Reshape", ["t2", "one"], "time4"),
    ],
}


def _speech_chain(batch_piece: str, time_piece: str, tail: tuple[int, ...] = (-1, 10)) -> onnx.ModelProto:
    """A speech model's frames: x [batch, time, 80] viewed as x2 [batch, 4 * time, 20], then reshaped to a target
    computed from x's shape, Concat([batch], [4 * time], tail): its elements are known only through the
    Reshapes (and the product) of the pieces."""
    nodes = [
        node("Reshape", ["x", "frames"], "x2"),
        node("Shape", ["x"], "s"),
        *_BATCH_PIECES[batch_piece],
        *_TIME_PIECES[time_piece],
        node("Concat", ["batch", "time4", "tail"], "target", axis=0),
        node("Reshape", ["x2", "target"], "r"),
        node("Relu", ["r"], "y"),
    ]
    ints = dict(
        frames=[0, -1, 20], i0=0, ax=[0], zero=[0], one=[1], two=[2], scalar=[], four=4, eight=[8], two_scalar=2
    )
    inits = {k: np.array(v, np.int64) for k, v in ints.items()}
    inits.update(flat=np.array([-1], np.int64), tail=np.array(tail, np.int64))
    return model(nodes, [("x", "FLOAT", ("batch", "time", 80))], initializers=inits)


def _targets(out: onnx.ModelProto) -> list[list[int]]:
    return [onnx.numpy_helper.to_array(i).tolist() for i in out.graph.initializer]


@pytest.mark.parametrize(
    "batch_piece, time_piece",
    [("unsqueeze", "mul-flatten"), ("reshape-to-1", "mul-div"), ("reshape-to-scalar", "mul-flatten")],
)
def test_shape_chain_through_reshapes_becomes_a_static_target(batch_piece: str, time_piece: str) -> None:
    """Shape -> Gather -> Unsqueeze and Shape -> Slice -> Mul -> Reshape([-1]) -> Concat -> Reshape: the
    target is [batch, 4 * time, -1, 10], written [0, 0, 2, 10] (x2's dims 0 and 1 copied, the -1 the 20 / 10 the
    facts know); the chain goes."""
    m = _speech_chain(batch_piece, time_piece)
    result = eqsat.optimize(m)
    assert result.report.verification.ok
    assert op_counts(result.proto) == {"Reshape": 2, "Relu": 1}
    assert [0, 0, 2, 10] in _targets(result.proto)
    for shape in ((1, 5, 80), (3, 5, 80), (3, 2, 80)):  # two sizes of each dynamic dim
        _same_outputs(m, result.proto, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_size_times_symbol_is_a_product_symbol_and_divides_back() -> None:
    """Shape(x)[1:2] * 4 is the dim a Reshape merging time with 4 gets ("4*time"); "4*time" * 2 / 8 is time;
    a size 0 times a symbol is 0; a sum, a negative size or a remainder is not evaluated."""
    m = _speech_chain("unsqueeze", "mul-div")
    work, _ = normalize.normalize_proto(m)
    facts = symbolic_shapes(work.graph)
    assert facts.named(facts.shapes["x2"])[1] == "4*time"
    assert symbols._symbolic("Mul", ("time", 4), (4, "batch")) == ("4*time", "4*batch")
    assert symbols._symbolic("Div", ("8*time",), (8,)) == ("time",)
    assert symbols._symbolic("Mul", (0,), ("time",)) == (0,)
    assert symbols._symbolic("Div", ("time",), (2,)) is None
    assert symbols._symbolic("Div", ("4*time",), (3,)) is None
    assert symbols._symbolic("Add", ("time",), (1,)) is None
    assert symbols._symbolic("Mul", ("time",), (-1,)) is None


def test_reshape_keeps_elements_only_as_a_list() -> None:
    """A Reshape keeps a shape computation's elements at rank <= 1 only: to [-1], [n] or, from one element,
    []; not to [2, 1] (rows), nor to another element count."""
    assert symbols._flattened(2, (-1,)) and symbols._flattened(2, (2,)) and symbols._flattened(1, ())
    assert not symbols._flattened(2, (2, 1)) and not symbols._flattened(2, (1, 2))
    assert not symbols._flattened(2, (3,)) and not symbols._flattened(2, ()) and not symbols._flattened(2, None)


def test_a_row_of_two_unsqueezed_dims_is_not_read_as_a_list() -> None:
    """Concat(Unsqueeze(b, [1]), Unsqueeze(t, [1]), axis=-1) is [[batch, time]] (rank 2): its row 0 is both
    dims, not batch alone (read as a list of elements, the target was [batch, 2, 4] and the Reshape failed at
    run time); a value of rank 2 is no shape computation, so the chain stays and the output is right."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "zero", "one"], "b"),
        node("Slice", ["s", "one", "two"], "t"),
        node("Unsqueeze", ["b", "ax1"], "bu"),
        node("Unsqueeze", ["t", "ax1"], "tu"),
        node("Concat", ["bu", "tu"], "row", axis=-1),
        node("Gather", ["row", "i0"], "bt", axis=0),
        node("Concat", ["bt", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    ints = dict(zero=[0], one=[1], two=[2], ax1=[1], i0=0, tail=[2, 4])
    m = model(
        nodes, [("x", "FLOAT", ("batch", "time", 8))], initializers={k: np.array(v, np.int64) for k, v in ints.items()}
    )
    result = eqsat.optimize(m)
    assert result.report.verification.ok
    assert op_counts(result.proto)["Shape"] == 1
    for shape in ((2, 3, 8), (3, 5, 8)):
        _same_outputs(m, result.proto, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_a_reshape_of_a_shape_to_two_dims_is_not_a_list() -> None:
    """Shape(x)[0:2] reshaped to [1, 2] and row 0 gathered is [[batch, time]]: the Reshape to [1, 2] is not
    read as keeping a list, so the chain stays."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "zero", "two"], "bt"),
        node("Reshape", ["bt", "row_shape"], "row"),
        node("Gather", ["row", "i0"], "g", axis=0),
        node("Concat", ["g", "tail"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    ints = dict(zero=[0], two=[2], row_shape=[1, 2], i0=0, tail=[2, 4])
    m = model(
        nodes, [("x", "FLOAT", ("batch", "time", 8))], initializers={k: np.array(v, np.int64) for k, v in ints.items()}
    )
    out = eqsat.optimize(m).proto
    assert op_counts(out)["Shape"] == 1
    for shape in ((2, 3, 8), (3, 5, 8)):
        _same_outputs(m, out, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_a_chain_scaled_by_data_stays() -> None:
    """The time piece times a count computed from x's values (Cast(ReduceMax(x) * 0 + 4)) is 4 * time at run
    time, but no shape fact says so: the target stays computed."""
    nodes = [
        node("Reshape", ["x", "frames"], "x2"),
        node("Shape", ["x"], "s"),
        node("Gather", ["s", "i0"], "b0", axis=0),
        node("Unsqueeze", ["b0", "ax"], "batch"),
        node("Slice", ["s", "one", "two"], "t0"),
        node("ReduceMax", ["x"], "mx", keepdims=0),
        node("Mul", ["mx", "zero_f"], "z"),
        node("Add", ["z", "four_f"], "k_f"),
        node("Cast", ["k_f"], "k", to=onnx.TensorProto.INT64),
        node("Mul", ["t0", "k"], "t1"),
        node("Reshape", ["t1", "flat"], "time4"),
        node("Concat", ["batch", "time4", "tail"], "target", axis=0),
        node("Reshape", ["x2", "target"], "y"),
    ]
    inits = {
        k: np.array(v, np.int64)
        for k, v in dict(frames=[0, -1, 20], i0=0, ax=[0], one=[1], two=[2], flat=[-1], tail=[-1, 10]).items()
    }
    inits.update(zero_f=np.array(0, np.float32), four_f=np.array(4, np.float32))
    m = model(nodes, [("x", "FLOAT", ("batch", "time", 80))], initializers=inits)
    result = eqsat.optimize(m)
    assert result.report.verification.ok
    assert op_counts(result.proto)["Shape"] == 1 and op_counts(result.proto)["Cast"] == 1


def test_a_declared_dim_param_that_reads_as_a_product_is_a_name() -> None:
    """x [2*seq, seq, 8]: the dim_param "2*seq" is a size of its own, not twice seq; Shape(x)[1:2] * 2 is no
    name for it, so a target Concat(Shape(x)[1:2] * 2, [-1]) is not written [0, -1]."""
    nodes = [
        node("Shape", ["x"], "s"),
        node("Slice", ["s", "one", "two"], "t0"),
        node("Mul", ["t0", "two"], "t1"),
        node("Concat", ["t1", "flat"], "target", axis=0),
        node("Reshape", ["x", "target"], "y"),
    ]
    ints = dict(one=[1], two=[2], flat=[-1])
    inits = {k: np.array(v, np.int64) for k, v in ints.items()}
    m = model(nodes, [("x", "FLOAT", ("2*seq", "seq", 8))], initializers=inits)
    out = eqsat.optimize(m, verify=False).proto
    assert op_counts(out)["Shape"] == 1
    feeds = {"x": RNG.standard_normal((3, 2, 8)).astype(np.float32)}  # 2*seq is 3 here: the Reshape is valid
    _same_outputs(m, out, feeds)


def _reshape_by_own_shape() -> onnx.ModelProto:
    """y = Reshape(Relu(x), Concat(Shape(x)[0], -1)) for x [batch, 4, 5]: a target computed at run time."""
    return model(
        [
            node("Relu", ["x"], "r"),
            node("Shape", ["x"], "s"),
            node("Gather", ["s", "zero"], "b", axis=0),
            node("Unsqueeze", ["b", "axes"], "bu"),
            node("Concat", ["bu", "minus_one"], "target", axis=0),
            node("Reshape", ["r", "target"], "y"),
        ],
        [("x", "FLOAT", ("batch", 4, 5))],
        initializers={
            "zero": np.array(0, np.int64),
            "axes": np.array([0], np.int64),
            "minus_one": np.array([-1], np.int64),
        },
    )


def test_the_first_encoding_reads_the_facts_normalization_computed_and_they_are_the_same() -> None:
    """A graph normalization leaves as it computed its shape facts on: the first encoding takes those facts (once),
    and encodes exactly what computing them again gives."""
    from eqsat.engine.encode import encode

    m = model(
        [node("Relu", ["x"], "r"), node("Add", ["r", "z"], "y")],
        [("x", "FLOAT", ("batch", 4)), ("z", "FLOAT", ("batch", 4))],
    )
    work, _ = normalize.normalize_proto(m)
    assert symbols.SHAPE_FACTS in work.meta
    first = encode(work)
    assert symbols.SHAPE_FACTS not in work.meta  # taken: a later encoding computes them again
    again = encode(work)
    assert first.rows.text == again.rows.text and first.rows.tables == again.rows.tables
    assert first.symbols.names == again.symbols.names


def test_facts_of_a_graph_normalization_rewrote_after_are_not_kept() -> None:
    """make_targets_static rewrites the Reshape's run-time target: the facts computed before describe another graph."""
    work, _ = normalize.normalize_proto(_reshape_by_own_shape())
    assert "Shape" not in op_counts(work)  # the target is a constant now
    assert symbols.SHAPE_FACTS not in work.meta
