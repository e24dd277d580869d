"""Tensor family (rewrites/tensor.py), typed Concat/Split (encode, shape facts, lowering) and the MatMul
merges of the linear family: each rule fires where it should, not where its guard fails, and is sound.
The pixel shuffle, stack and one-hot rules have no instance in the bundled models: built graphs only."""

from __future__ import annotations

import numpy as np
import onnx.helper as oh
import pytest
from hypothesis import given

from eqsat.testing import (
    PROPERTIES,
    RuleCase,
    assert_rule_does_not_fire,
    assert_rule_sound,
    op_counts,
    optimize_with_rules,
    saturate_with_rules,
    to_proto,
)
from tests.rule_graphs import attribute, model, node, property_settings, transpose

RNG = np.random.default_rng(3)


def rand(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, size=shape).astype(np.float32)


def split(x: str, outs: list[str], axis: int, sizes: list[int] | None, opset: int, name: str = "sizes"):
    if sizes is not None and opset >= 13:
        return oh.make_node("Split", [x, name], outs, axis=axis)
    return oh.make_node("Split", [x], outs, axis=axis, **({"split": sizes} if sizes is not None else {}))


def ops_of(session) -> set[str]:
    return {n.op for n in session.egraph.nodes}


# ---- typed Concat / Split: encoding and lowering ----


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_concat_split_are_typed_and_round_trip(opset: int) -> None:
    inits = {"sizes": np.array([1, 3], np.int64)} if opset >= 13 else {}
    m = model(
        [
            node("Concat", ["a", "b"], "c", axis=-1),
            split("c", ["y0", "y1"], -1, [1, 3], opset),
            node("Relu", ["y0"], "r0"),
            node("Relu", ["y1"], "r1"),
        ],
        [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 2))],
        ["r0", "r1"],
        initializers=inits,
        opset=opset,
    )
    session = saturate_with_rules(m, [])
    assert {"Concat", "Split", "Out"} <= ops_of(session) and "Opaque" not in ops_of(session)
    result = session.extract("cpu", verify=True)
    assert op_counts(result.model) == {"Concat": 1, "Split": 1, "Relu": 2}


def test_even_split_without_sizes_is_typed() -> None:
    m = model([split("x", ["y0", "y1"], 1, None, 13), node("Add", ["y0", "y1"], "y")], [("x", "FLOAT", (2, 4))])
    session = saturate_with_rules(m, [])
    assert "Split" in ops_of(session)
    assert op_counts(session.extract("cpu", verify=True).model) == {"Split": 1, "Add": 1}


def test_split_with_runtime_sizes_stays_opaque() -> None:
    m = model(
        [oh.make_node("Split", ["x", "s"], ["y0", "y1"], axis=0), node("Add", ["y0", "y1"], "y")],
        [("x", "FLOAT", (4,)), ("s", "INT64", (2,))],
        [("y", "FLOAT", ("n",))],
        opset=13,
    )
    session = saturate_with_rules(m, [])
    assert "Split" not in ops_of(session) and "Opaque" in ops_of(session)


# ---- shape-concat-split (analysis) ----


def test_shape_concat_split_gives_created_concats_a_shape() -> None:
    m = model(
        [transpose("a", "ta", (1, 0)), transpose("b", "tb", (1, 0)), node("Concat", ["ta", "tb"], "y", axis=0)],
        [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (2, 1))],
    )
    session = saturate_with_rules(m, ["transpose-sink-concat"])
    created = [
        c
        for c in session.egraph.classes
        if any(session.egraph.node(n).op == "Concat" for n in c.nodes) and c.shape == (2, 4)
    ]
    assert created, "the sunk Concat(a, b) on axis 1 has shape (2, 4)"
    assert_rule_sound(m, "shape-concat-split", also=["transpose-sink-concat"])


def test_shape_concat_split_needs_the_input_shapes() -> None:
    m = model([node("Relu", ["a"], "y")], [("a", "FLOAT", (2, 3))])
    assert_rule_does_not_fire(m, "shape-concat-split")


@property_settings()
@given(PROPERTIES["shape-concat-split"]())
def test_shape_concat_split_property(case: RuleCase) -> None:
    case.check()


# ---- concat-merge and list-append ----


def _nested(inner_axis: int, outer_axis: int = 1):
    return model(
        [node("Concat", ["b", "c"], "i", axis=inner_axis), node("Concat", ["a", "i", "d"], "y", axis=outer_axis)],
        [("a", "FLOAT", (2, 1)), ("b", "FLOAT", (2, 2)), ("c", "FLOAT", (2, 3)), ("d", "FLOAT", (2, 1))],
    )


def test_concat_merge() -> None:
    m = _nested(1)
    result = assert_rule_sound(m, "concat-merge")
    assert op_counts(result.model) == {"Concat": 1}
    assert_rule_sound(m, "list-append", also=["concat-merge"])


def test_concat_merge_not_on_another_axis() -> None:
    m = model(
        [node("Concat", ["b", "c"], "i", axis=0), node("Concat", ["a", "i"], "y", axis=1)],
        [("a", "FLOAT", (4, 1)), ("b", "FLOAT", (2, 2)), ("c", "FLOAT", (2, 2))],
    )
    assert_rule_does_not_fire(m, "concat-merge")
    assert_rule_does_not_fire(m, "list-append", also=["concat-merge"])


def test_concat_merge_any_length() -> None:
    """Two nested Concats in a list of ten items (lists longer than 8 were not merged before)."""
    xs = [f"x{k}" for k in range(12)]
    m = model(
        [
            node("Concat", xs[:2], "i", axis=1),
            node("Concat", xs[2:4], "j", axis=1),
            node("Concat", ["i", *xs[4:8], "j", *xs[8:]], "y", axis=1),
        ],
        [(x, "FLOAT", (2, 1)) for x in xs],
    )
    result = assert_rule_sound(m, "concat-merge")
    assert op_counts(result.model) == {"Concat": 1}


@property_settings()
@given(PROPERTIES["concat-merge"]())
def test_concat_merge_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["list-append"]())
def test_list_append_property(case: RuleCase) -> None:
    case.check()


# ---- split-concat ----


@pytest.mark.parametrize("opset", [11, 13])
def test_split_concat(opset: int) -> None:
    inits = {"sizes": np.array([2, 3], np.int64)} if opset >= 13 else {}
    m = model(
        [
            node("Concat", ["a", "b"], "c", axis=1),
            split("c", ["y0", "y1"], 1, [2, 3], opset),
            node("Sub", ["y0", "y0"], "s0"),
            node("Relu", ["y1"], "s1"),
        ],
        [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 3))],
        ["s0", "s1"],
        initializers=inits,
        opset=opset,
    )
    result = assert_rule_sound(m, "split-concat")
    assert op_counts(result.model) == {"Sub": 1, "Relu": 1}


def test_split_concat_not_with_other_sizes() -> None:
    m = model(
        [
            node("Concat", ["a", "b"], "c", axis=1),
            split("c", ["y0", "y1"], 1, [3, 2], 13),
            node("Add", ["y0", "y0"], "s0"),
            node("Relu", ["y1"], "s1"),
        ],
        [("a", "FLOAT", (2, 2)), ("b", "FLOAT", (2, 3))],
        ["s0", "s1"],
        initializers={"sizes": np.array([3, 2], np.int64)},
        opset=13,
    )
    assert_rule_does_not_fire(m, "split-concat")


@property_settings()
@given(PROPERTIES["split-concat"]())
def test_split_concat_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-concat ----


def test_transpose_sink_concat_cancels_with_a_transpose_after() -> None:
    m = model(
        [
            transpose("a", "ta", (0, 2, 1)),
            transpose("b", "tb", (0, 2, 1)),
            node("Concat", ["ta", "tb"], "c", axis=1),
            transpose("c", "y", (0, 2, 1)),
        ],
        [("a", "FLOAT", (1, 2, 3)), ("b", "FLOAT", (1, 2, 4))],
    )
    result = assert_rule_sound(m, "transpose-sink-concat", also=["transpose-merge", "transpose-identity"])
    assert op_counts(result.model) == {"Concat": 1}


def test_transpose_sink_concat_not_with_different_perms() -> None:
    m = model(
        [transpose("a", "ta", (1, 0)), node("Concat", ["ta", "b"], "y", axis=0)],
        [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (3, 2))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-concat")


@property_settings()
@given(PROPERTIES["transpose-sink-concat"]())
def test_transpose_sink_concat_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-concat-const ----


def test_transpose_sink_concat_const_cancels_with_a_transpose_after() -> None:
    """Concat([Transpose(a), c], 1) then the inverse Transpose: c is transposed at lowering, one Concat is left."""
    c = np.arange(8, dtype=np.float32).reshape(1, 4, 2)
    m = model(
        [transpose("a", "ta", (0, 2, 1)), node("Concat", ["ta", "c"], "c2", axis=1), transpose("c2", "y", (0, 2, 1))],
        [("a", "FLOAT", (1, 2, 3))],
        initializers={"c": c},
    )
    result = assert_rule_sound(m, "transpose-sink-concat-const", also=["transpose-merge", "transpose-identity"])
    assert op_counts(result.model) == {"Concat": 1}


def test_transpose_sink_concat_const_not_with_a_runtime_operand() -> None:
    """The other item is a graph input, not a constant: its Transpose would run (transpose-sink-concat's case)."""
    m = model(
        [transpose("a", "ta", (1, 0)), node("Concat", ["ta", "b"], "y", axis=0)],
        [("a", "FLOAT", (2, 3)), ("b", "FLOAT", (3, 2))],
    )
    assert_rule_does_not_fire(m, "transpose-sink-concat-const")


def test_transpose_sink_concat_const_not_with_two_constants() -> None:
    """One constant item only: with two, neither is matched as 'the other items are transposes'."""
    m = model(
        [transpose("a", "ta", (1, 0)), node("Concat", ["ta", "c", "d"], "y", axis=0)],
        [("a", "FLOAT", (2, 3))],
        initializers={"c": np.ones((1, 2), np.float32), "d": np.zeros((2, 2), np.float32)},
    )
    assert_rule_does_not_fire(m, "transpose-sink-concat-const")


@property_settings()
@given(PROPERTIES["transpose-sink-concat-const"]())
def test_transpose_sink_concat_const_property(case: RuleCase) -> None:
    case.check()


# ---- concat-transposed-items (the walk both transpose-sink-concat rules read) ----


def test_concat_transposed_items_any_length() -> None:
    """Nine transposed items (more than any per-length pattern had): one walk, one rewrite row."""
    names = [f"x{k}" for k in range(9)]
    m = model(
        [
            *(transpose(x, f"t{x}", (1, 0)) for x in names),
            node("Concat", [f"t{x}" for x in names], "c", axis=0),
            transpose("c", "y", (1, 0)),
        ],
        [(x, "FLOAT", (2, 3)) for x in names],
    )
    result = assert_rule_sound(m, "transpose-sink-concat", also=["transpose-merge", "transpose-identity"])
    assert op_counts(result.model) == {"Concat": 1}


@property_settings()
@given(PROPERTIES["concat-transposed-items"]())
def test_concat_transposed_items_property(case: RuleCase) -> None:
    case.check()


# ---- matmul-merge, matmul-bias-merge (linear family) ----


def _qkv(bias: bool, n: int = 3, const: bool = True):
    nodes, outs, inits = [], [], {}
    inputs = [("x", "FLOAT", (2, 5, 8))]
    for i in range(n):
        if const:
            inits[f"w{i}"] = rand(8, 4 + i)
        else:
            inputs.append((f"w{i}", "FLOAT", (8, 4 + i)))
        nodes.append(node("MatMul", ["x", f"w{i}"], f"m{i}"))
        y = f"m{i}"
        if bias:
            inits[f"b{i}"] = rand(4 + i)
            nodes.append(node("Add", [y, f"b{i}"], f"z{i}"))
            y = f"z{i}"
        nodes.append(node("Relu", [y], f"o{i}"))
        outs.append(f"o{i}")
    return model(nodes, inputs, outs, initializers=inits)


@pytest.mark.parametrize("rule,bias", [("matmul-merge", False), ("matmul-bias-merge", True)])
def test_matmul_merge_three_projections(rule: str, bias: bool) -> None:
    m = _qkv(bias)
    session = saturate_with_rules(m, [rule, "matmul-merge-epilogue"])
    # runs of consecutive sites in const-rank order: 2 pairs, then the first pair grown by the third
    assert session.saturation.rules_fired[rule] == 3
    result = session.extract("gpu", verify=True)
    assert op_counts(result.model)["MatMul"] == 1 and op_counts(result.model)["Split"] == 1
    assert op_counts(result.model)["Relu"] == 1  # the merged product's epilogue, before the Split
    # without the epilogue rule the Relus stay after the Split: dearer than the input as a graph of its own
    alone = saturate_with_rules(m, [rule]).extract("gpu")
    assert op_counts(alone.model)["MatMul"] == 3 and "input kept" in alone.report.extraction.notes[-1]
    assert_rule_sound(m, rule)


@pytest.mark.parametrize("rule,bias", [("matmul-merge", False), ("matmul-bias-merge", True)])
def test_matmul_merge_any_number(rule: str, bias: bool) -> None:
    """Six projections of one x become one MatMul and a Split (main merged at most four)."""
    m = _qkv(bias, n=6)
    session = saturate_with_rules(m, [rule, "matmul-merge-epilogue"])
    assert session.saturation.rules_fired[rule] == 15  # 5 pairs of neighbours, grown 4 + 3 + 2 + 1 times
    result = session.extract("gpu", verify=True)
    assert result.report.verification.ok
    assert op_counts(result.model)["MatMul"] == 1 and op_counts(result.model)["Split"] == 1
    assert_rule_sound(m, rule, target="gpu")


@pytest.mark.parametrize("rule,bias", [("matmul-merge", False), ("matmul-bias-merge", True)])
def test_matmul_merge_not_with_runtime_weights(rule: str, bias: bool) -> None:
    if bias:
        m = _qkv(True, 2, const=False)
    else:
        m = _qkv(False, 2, const=False)
    assert_rule_does_not_fire(m, rule)


def test_matmul_bias_merge_not_without_bias() -> None:
    assert_rule_does_not_fire(_qkv(False), "matmul-bias-merge")


@pytest.mark.parametrize("rule", ["matmul-merge", "matmul-bias-merge"])
@property_settings()
@given(case=PROPERTIES["matmul-merge"]())
def test_matmul_merge_property(rule: str, case: RuleCase) -> None:
    if rule == "matmul-merge":
        case.check()


@property_settings()
@given(PROPERTIES["matmul-bias-merge"]())
def test_matmul_bias_merge_property(case: RuleCase) -> None:
    case.check()


# ---- transpose-sink-split ----


@pytest.mark.parametrize("opset", [11, 13])
def test_transpose_sink_split_cancels_with_transposes_after(opset: int) -> None:
    inits = {"sizes": np.array([1, 3], np.int64)} if opset >= 13 else {}
    m = model(
        [
            transpose("x", "t", (0, 2, 1)),
            split("t", ["s0", "s1"], 1, [1, 3], opset),
            transpose("s0", "y0", (0, 2, 1)),
            transpose("s1", "y1", (0, 2, 1)),
        ],
        [("x", "FLOAT", (2, 3, 4))],
        ["y0", "y1"],
        initializers=inits,
        opset=opset,
    )
    result = assert_rule_sound(m, "transpose-sink-split", also=["transpose-merge", "transpose-identity"])
    assert op_counts(result.model) == {"Split": 1}


def test_transpose_sink_split_not_through_another_op() -> None:
    m = model(
        [transpose("x", "t", (1, 0)), node("Relu", ["t"], "r"), split("r", ["y0", "y1"], 0, [1, 2], 13)],
        [("x", "FLOAT", (2, 3))],
        ["y0", "y1"],
        initializers={"sizes": np.array([1, 2], np.int64)},
        opset=13,
    )
    assert_rule_does_not_fire(m, "transpose-sink-split")


@property_settings()
@given(PROPERTIES["transpose-sink-split"]())
def test_transpose_sink_split_property(case: RuleCase) -> None:
    case.check()


# ---- depth-to-space, space-to-depth ----

DCR = (0, 3, 4, 1, 5, 2)
CRD = (0, 1, 4, 2, 5, 3)


def _reshape_transpose_reshape(x_shape, mid, perm, out, dtype: str = "FLOAT", opset: int = 17):
    inits = {"mid": np.array(mid, np.int64), "out": np.array(out, np.int64)}
    return model(
        [node("Reshape", ["x", "mid"], "r"), transpose("r", "t", perm), node("Reshape", ["t", "out"], "y")],
        [("x", dtype, x_shape)],
        initializers=inits,
        opset=opset,
    )


def _pixel_shuffle(mode: str, b: int = 2, cb: int = 3, h: int = 2, w: int = 3, **kw):
    mid = (2, b, b, cb, h, w) if mode == "DCR" else (2, cb, b, b, h, w)
    return _reshape_transpose_reshape(
        (2, b * b * cb, h, w), mid, DCR if mode == "DCR" else CRD, (2, cb, h * b, w * b), **kw
    )


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode: str) -> None:
    result = assert_rule_sound(_pixel_shuffle(mode), "depth-to-space")
    assert op_counts(result.model) == {"DepthToSpace": 1}
    assert attribute(result.model, "DepthToSpace", "blocksize") == 2
    modes = [a for n in to_proto(result.model).graph.node for a in n.attribute if a.name == "mode"]
    assert [oh.get_attribute_value(a) for a in modes] == ([] if mode == "DCR" else [b"CRD"])  # DCR: the default


def test_depth_to_space_with_inferred_reshape_targets() -> None:
    m = _reshape_transpose_reshape((1, 8, 2, 2), (0, 2, 2, -1, 2, 2), DCR, (1, -1, 4, 4))
    result = assert_rule_sound(m, "depth-to-space")
    assert op_counts(result.model) == {"DepthToSpace": 1}


def test_depth_to_space_dcr_before_opset_11() -> None:
    result = assert_rule_sound(_pixel_shuffle("DCR", opset=9), "depth-to-space")
    assert op_counts(result.model) == {"DepthToSpace": 1}


@pytest.mark.parametrize("case", ["crd-opset-10", "wrong-perm", "wrong-target", "crd-shapes-dcr-perm", "int32"])
def test_depth_to_space_not_when_guard_fails(case: str) -> None:
    m = {
        "crd-opset-10": lambda: _pixel_shuffle("CRD", opset=10),
        "wrong-perm": lambda: _reshape_transpose_reshape(
            (2, 12, 2, 3), (2, 2, 2, 3, 2, 3), (0, 3, 4, 1, 2, 5), (2, 3, 4, 6)
        ),
        "wrong-target": lambda: _reshape_transpose_reshape((2, 12, 2, 3), (2, 2, 2, 3, 2, 3), DCR, (2, 3, 2, 12)),
        "crd-shapes-dcr-perm": lambda: _reshape_transpose_reshape((2, 12, 2, 3), (2, 3, 2, 2, 2, 3), DCR, (2, 3, 4, 6)),
        "int32": lambda: _pixel_shuffle("DCR", dtype="INT32"),
    }[case]()  # no ONNX Runtime kernel for int32
    assert_rule_does_not_fire(m, "depth-to-space")


@property_settings()
@given(PROPERTIES["depth-to-space"]())
def test_depth_to_space_property(case: RuleCase) -> None:
    case.check()


def test_space_to_depth() -> None:
    m = _reshape_transpose_reshape((2, 3, 4, 6), (2, 3, 2, 2, 3, 2), (0, 3, 5, 1, 2, 4), (2, 12, 2, 3))
    result = assert_rule_sound(m, "space-to-depth")
    assert op_counts(result.model) == {"SpaceToDepth": 1}
    assert attribute(result.model, "SpaceToDepth", "blocksize") == 2


def test_space_to_depth_not_with_the_depth_to_space_perm() -> None:
    m = _reshape_transpose_reshape((2, 3, 4, 6), (2, 3, 2, 2, 3, 2), DCR, (2, 12, 2, 3))
    assert_rule_does_not_fire(m, "space-to-depth")
    assert_rule_does_not_fire(m, "depth-to-space")


def test_space_to_depth_then_depth_to_space_cancel() -> None:
    s2d = [
        node("Reshape", ["x", "m1"], "r1"),
        transpose("r1", "t1", (0, 3, 5, 1, 2, 4)),
        node("Reshape", ["t1", "o1"], "s"),
    ]
    d2s = [node("Reshape", ["s", "m2"], "r2"), transpose("r2", "t2", DCR), node("Reshape", ["t2", "o2"], "y")]
    inits = {
        "m1": np.array((1, 3, 2, 2, 2, 2), np.int64),
        "o1": np.array((1, 12, 2, 2), np.int64),
        "m2": np.array((1, 2, 2, 3, 2, 2), np.int64),
        "o2": np.array((1, 3, 4, 4), np.int64),
    }
    m = model(s2d + d2s, [("x", "FLOAT", (1, 3, 4, 4))], initializers=inits)
    result = assert_rule_sound(m, "space-to-depth", also=["depth-to-space"])
    assert op_counts(result.model) == {"SpaceToDepth": 1, "DepthToSpace": 1}


@property_settings()
@given(PROPERTIES["space-to-depth"]())
def test_space_to_depth_property(case: RuleCase) -> None:
    case.check()


# ---- stack-reshape-to-concat ----


def _stack(axis: int, out: tuple[int, ...], opset: int = 17):
    inits = {"s": np.array(out, np.int64)}
    if opset >= 13:
        inits["ax"] = np.array([axis], np.int64)
        ups = [node("Unsqueeze", [x, "ax"], f"u{x}") for x in "abc"]
    else:
        ups = [node("Unsqueeze", [x], f"u{x}", axes=[axis]) for x in "abc"]
    return model(
        [*ups, node("Concat", ["ua", "ub", "uc"], "st", axis=axis), node("Reshape", ["st", "s"], "y")],
        [(x, "FLOAT", (2, 4, 5)) for x in "abc"],
        initializers=inits,
        opset=opset,
    )


@pytest.mark.parametrize("opset", [11, 17])
def test_stack_reshape_to_concat(opset: int) -> None:
    result = assert_rule_sound(_stack(1, (2, 12, 5), opset), "stack-reshape-to-concat")
    assert op_counts(result.model) == {"Concat": 1}
    assert attribute(result.model, "Concat", "axis") == 1


def test_stack_reshape_not_when_merging_with_the_previous_axis() -> None:
    """Stacked at 1 and merged with axis 0: an interleave of the inputs' rows, not a Concat."""
    m = _stack(1, (6, 4, 5))
    assert_rule_does_not_fire(m, "stack-reshape-to-concat")
    result, _ = optimize_with_rules(m, ["stack-reshape-to-concat"])
    assert op_counts(result.model) == {"Unsqueeze": 3, "Concat": 1, "Reshape": 1}


def test_stack_reshape_not_at_the_last_axis() -> None:
    assert_rule_does_not_fire(_stack(3, (2, 4, 15)), "stack-reshape-to-concat")  # no next axis: an interleave


@property_settings()
@given(PROPERTIES["stack-reshape-to-concat"]())
def test_stack_reshape_to_concat_property(case: RuleCase) -> None:
    case.check()


# ---- onehot-matmul-to-gather ----


def _onehot(
    d: int = 512,
    cols: int = 256,
    lead: tuple[int, ...] = (2, 64),
    values: tuple[float, float] = (0.0, 1.0),
    w: np.ndarray | None = None,
    axis: int = -1,
    opset: int = 17,
    const_w: bool = True,
    index: str = "INT64",
):
    """i -> OneHot(depth d, values, axis) -> MatMul with W [d (axis -1) or lead[-1], cols], constant or an input."""
    inits = {"depth": np.array(d, np.int64), "values": np.array(values, np.float32)}
    inputs = [("i", index, lead)]
    rows = d if axis == -1 else lead[-1]
    if const_w:
        inits["w"] = RNG.uniform(-1, 1, size=(rows, cols)).astype(np.float32) if w is None else w
    else:
        inputs.append(("w", "FLOAT", (rows, cols)))
    return model(
        [node("OneHot", ["i", "depth", "values"], "h", axis=axis), node("MatMul", ["h", "w"], "y")],
        inputs,
        initializers=inits,
        opset=opset,
    )


def test_onehot_matmul_to_gather() -> None:
    m = _onehot()
    i = RNG.integers(-512, 512, size=(2, 64)).astype(np.int64)
    result = assert_rule_sound(m, "onehot-matmul-to-gather", {"i": i})
    assert op_counts(result.model) == {"Clip": 1, "Equal": 1, "Unsqueeze": 1, "Gather": 1, "Where": 1}


@pytest.mark.parametrize("index", ["INT64", "INT32"])
def test_onehot_matmul_to_gather_out_of_range_rows_are_zero(index: str) -> None:
    """OneHot gives a zero row for an index outside [-d, d-1] (and wraps the negative ones): so does the rewrite."""
    m = _onehot(d=4, cols=3, lead=(9,), index=index)
    i = np.array([0, 3, -1, -4, 4, -5, 100, -100, 2], dtype=np.int64 if index == "INT64" else np.int32)
    session = saturate_with_rules(m, ["onehot-matmul-to-gather"])
    assert session.saturation.rules_fired["onehot-matmul-to-gather"] == 1
    assert_rule_sound(m, "onehot-matmul-to-gather", {"i": i})


@pytest.mark.parametrize("case", ["values", "non-finite", "runtime-weights", "axis-0", "opset-11", "float-indices"])
def test_onehot_matmul_not_when_guard_fails(case: str) -> None:
    w = RNG.uniform(-1, 1, size=(4, 3)).astype(np.float32)
    w[1, 2] = np.inf  # 0 * inf is NaN in every row of the product: not a row gather
    m = {
        "values": lambda: _onehot(4, 3, (5,), values=(0.0, 2.0)),
        "non-finite": lambda: _onehot(4, 3, (5,), w=w),
        "runtime-weights": lambda: _onehot(4, 3, (5,), const_w=False),
        "axis-0": lambda: _onehot(4, 3, (3,), axis=0),  # OneHot [4, 3]: W has 3 rows, not depth 4
        "opset-11": lambda: _onehot(4, 3, (5,), opset=11),  # Clip on integers needs opset 12
        "float-indices": lambda: _onehot(4, 3, (5,), index="FLOAT"),
    }[case]()  # Gather takes int32/int64 only
    assert_rule_does_not_fire(m, "onehot-matmul-to-gather")


@property_settings()
@given(PROPERTIES["onehot-matmul-to-gather"]())
def test_onehot_matmul_to_gather_property(case: RuleCase) -> None:
    case.check()


# ---- gather-before-elementwise ----

TABLE_ROWS = 4096  # a table large enough that dequantizing all of it costs more than the extra Gather


def _embedding(scale_shape: tuple, axis: int = 0, zero_point: bool = False) -> object:
    """A run-time int8 table [TABLE_ROWS, 64] dequantized (Cast, optional Sub of a zero point, Mul) and gathered."""
    inits = {"s": RNG.uniform(0.5, 2, size=scale_shape).astype(np.float32), "zp": np.array(3.0, np.float32)}
    nodes = [node("Cast", ["w"], "f", to=1)]
    if zero_point:
        nodes.append(node("Sub", ["f", "zp"], "f0"))
    nodes += [node("Mul", ["f0" if zero_point else "f", "s"], "d"), node("Gather", ["d", "i"], "y", axis=axis)]
    return model(nodes, [("w", "INT8", (TABLE_ROWS, 64)), ("i", "INT64", ("B", 3))], initializers=inits)


@pytest.mark.parametrize("scale_shape, zero_point", [((TABLE_ROWS, 1), False), ((), False), ((TABLE_ROWS, 1), True)])
def test_gather_before_elementwise_dequantizes_only_the_gathered_rows(scale_shape: tuple, zero_point: bool) -> None:
    m = _embedding(scale_shape, zero_point=zero_point)
    feeds = {
        "w": RNG.integers(-128, 128, size=(TABLE_ROWS, 64)).astype(np.int8),
        "i": np.array([[0, TABLE_ROWS - 1, -1], [2, 2, -TABLE_ROWS]]),
    }
    result = assert_rule_sound(m, "gather-before-elementwise", feeds, also=["gather-before-cast"])
    (first,) = [n for n in result.model.graph if n.op_type == "Cast"]
    assert first.inputs[0].producer() is not None and first.inputs[0].producer().op_type == "Gather"


@pytest.mark.parametrize("case", ["per-column-scale", "gather-axis-1"])
def test_gather_before_elementwise_not_when_the_scale_does_not_follow_the_rows(case: str) -> None:
    """A scale along the other axis, or a Gather along axis 1 of a per-row scale: the Mul stays in front."""
    m = _embedding((1, 64)) if case == "per-column-scale" else _embedding((TABLE_ROWS, 1), axis=1)
    assert_rule_does_not_fire(m, "gather-before-elementwise")


@pytest.mark.parametrize("table, index", [((8,), (3,)), (("N",), ("M",)), ((8, 4), ())])
def test_gather_before_elementwise_not_when_the_scalar_broadcasts_the_table_or_the_output(
    table: tuple, index: tuple
) -> None:
    """A single-element c of higher rank than the table broadcasts B(a, c) up (static or symbolic dims), and one of
    the table's rank gathered by a rank-0 index would broadcast the output up: Gather(a) then B would change the
    shape, so the Mul stays in front."""
    c = np.full((1,) * (len(table) + (1 if index else 0)), 2.0, np.float32)
    m = model(
        [node("Mul", ["a", "c"], "u"), node("Gather", ["u", "i"], "y", axis=0)],
        [("a", "FLOAT", table), ("i", "INT64", index)],
        initializers={"c": c},
    )
    assert_rule_does_not_fire(m, "gather-before-elementwise")
    for n, k in ((1, 1), (5, 3)):  # the symbolic dims at two sizes
        sizes = {"N": n, "M": k}
        feeds = {
            "a": RNG.standard_normal([sizes.get(d, d) for d in table]).astype(np.float32),
            "i": np.zeros([sizes.get(d, d) for d in index], np.int64),
        }
        assert_rule_sound(m, "gather-before-elementwise", feeds, must_fire=False)


def test_gather_before_cast_along_any_axis() -> None:
    m = model(
        [node("Cast", ["w"], "f", to=1), node("Gather", ["f", "i"], "y", axis=1)],
        [("w", "INT8", (100, 40)), ("i", "INT64", (3,))],
    )
    feeds = {"w": RNG.integers(-128, 128, size=(100, 40)).astype(np.int8), "i": np.array([0, 39, -40])}
    result = assert_rule_sound(m, "gather-before-cast", feeds)
    assert [n.op_type for n in result.model.graph] == ["Gather", "Cast"]


def test_gather_before_cast_not_through_other_ops() -> None:
    m = model(
        [node("Cast", ["w"], "f", to=1), node("Relu", ["f"], "r"), node("Gather", ["r", "i"], "y")],
        [("w", "INT8", (100, 40)), ("i", "INT64", (3,))],
    )
    assert_rule_does_not_fire(m, "gather-before-cast")


@property_settings()
@given(PROPERTIES["gather-before-cast"]())
def test_gather_before_cast_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["gather-before-elementwise"]())
def test_gather_before_elementwise_property(case: RuleCase) -> None:
    case.check()


# ---- slice-merge ----

BIG = 2**62


def _two_slices(first: tuple, second: tuple, dims: tuple = ("N", 6, 8)) -> object:
    """Slice(Slice(x, *first), *second), each (starts, ends, axes, steps) as constant inputs (steps None: absent)."""
    inits: dict = {}
    nodes = []
    for k, (starts, ends, axes, steps) in enumerate((first, second)):
        names = [f"s{k}", f"e{k}", f"a{k}"] + ([f"t{k}"] if steps is not None else [])
        for name, values in zip(names, (starts, ends, axes, steps)):
            inits[name] = np.array(values, np.int64)
        nodes.append(node("Slice", ["x" if k == 0 else "y0", *names], f"y{k}"))
    return model(nodes, [("x", "FLOAT", dims)], ["y1"], inits, opset=13)


@pytest.mark.parametrize(
    "first,second",
    [
        (([1], [5], [1], [2]), ([-6], [BIG], [-1], [1])),  # axis 1 by 2, then the last axis (negative) from -6
        (([-1], [-BIG], [2], [-2]), ([0, 4], [-1, 1], [0, 1], [1, -1])),  # reversed last axis; then batch and axis 1
        (([1], [-1], [0], [1]), ([2, 0], [8, 3], [2, 1], [3, 1])),  # the dynamic batch, then two axes unsorted
    ],
)
def test_slice_merge_disjoint_axes(first: tuple, second: tuple) -> None:
    """Slices of different axes are one Slice over both (bounds relative to the same dims); the dynamic batch
    at two sizes."""
    m = _two_slices(first, second)
    rng = np.random.default_rng(1)
    for n in (3, 5):
        feeds = {"x": rng.standard_normal((n, 6, 8)).astype(np.float32)}
        result = assert_rule_sound(m, "slice-merge", feeds)
        assert op_counts(result.model) == {"Slice": 1}


@pytest.mark.parametrize(
    "first,second",
    [
        (([1], [5], [1], [1]), ([1], [3], [1], [1])),  # the same axis: the second indexes the first's output
        (([0], [4], [2], [1]), ([1], [3], [-1], [1])),  # axis 2 and -1 are one axis of a rank-3 x
        (([0, 1], [4, 5], [0, -1], [1, 1]), ([1], [3], [1], [1])),  # a mixed-sign axes list (not normalized)
        (([1], [5], [1], None), ([1], [3], [2], [1])),  # steps not listed
    ],
)
def test_slice_merge_not(first: tuple, second: tuple) -> None:
    assert_rule_does_not_fire(_two_slices(first, second), "slice-merge")


@property_settings()
@given(PROPERTIES["slice-merge"]())
def test_slice_merge_property(case: RuleCase) -> None:
    case.check()


# ---- split-reshape-merge ----


def _reshaped_qkv(x_shape: tuple, flat: bool, targets: list, widths=(16, 16, 16)) -> object:
    """Q/K/V projections of x: (flat: x Reshaped to [-1, 16] first, tf2onnx) MatMul(W_k) + b_k, each Reshaped."""
    nodes = [node("Reshape", ["x", "flat"], "xf")] if flat else []
    inits = {"flat": np.array([-1, 16], np.int64)} if flat else {}
    for k, (n, target) in enumerate(zip(widths, targets)):
        inits |= {f"w{k}": RNG.uniform(-1, 1, (16, n)).astype(np.float32), f"s{k}": np.array(target, np.int64)}
        inits[f"b{k}"] = RNG.uniform(-1, 1, (n,)).astype(np.float32)
        nodes += [node("MatMul", ["xf" if flat else "x", f"w{k}"], f"m{k}"), node("Add", [f"m{k}", f"b{k}"], f"a{k}")]
        nodes.append(node("Reshape", [f"a{k}", f"s{k}"], f"y{k}"))
    return model(nodes, [("x", "FLOAT", x_shape)], [f"y{k}" for k in range(len(widths))], inits)


@pytest.mark.parametrize("target", ["cpu", "gpu"])
@pytest.mark.parametrize(
    "x_shape,flat,heads",
    [(("batch", 4, 16), True, [-1, 4, 2, 8]), (("batch", "seq", 16), False, [0, 0, 2, 8])],
    ids=["tf2onnx-flattened", "symbolic-batch-and-seq"],
)
def test_split_reshape_merge_qkv(target: str, x_shape: tuple, flat: bool, heads: list) -> None:
    """The merged projection is Reshaped to [.., 6 heads, 8] once and split along the heads (main: one Reshape per
    part after the Split): 1 Reshape fewer per part but one, verified at two sizes of each symbolic dim."""
    import eqsat

    result = eqsat.optimize(_reshaped_qkv(x_shape, flat, [heads] * 3), target=target)
    counts = op_counts(result.proto)
    assert result.report.verification.ok, result.report.verification.summary()
    assert "x:2x" in result.report.verification.summary() and "x:3x" in result.report.verification.summary()
    assert counts["Reshape"] == 1 + flat and counts["Split"] == 1 and sum(counts.values()) == 4, counts
    assert attribute(result.proto, "Split", "axis") == 2  # the heads axis of [batch, seq, 6, 8]


def test_split_reshape_merge_whole_parts() -> None:
    """Parts of y [2, 3, 12] reshaped to [6, n_k] (rows regrouped, the width whole): one Reshape to [6, 12]."""
    m = model(
        [split("y", ["p0", "p1"], 2, [4, 8], 13)] + [node("Reshape", [f"p{k}", "rows"], f"o{k}") for k in range(2)],
        [("y", "FLOAT", (2, 3, 12))],
        ["o0", "o1"],
        initializers={"sizes": np.array([4, 8], np.int64), "rows": np.array([6, -1], np.int64)},
    )
    result = assert_rule_sound(m, "split-reshape-merge")
    assert op_counts(result.model) == {"Reshape": 1, "Split": 1}


def _split_parts(y_shape: tuple, axis: int, sizes: list, targets: list) -> object:
    outs = [f"o{k}" for k in range(len(sizes))]
    nodes = [split("y", [f"p{k}" for k in range(len(sizes))], axis, sizes, 13)]
    nodes += [node("Reshape", [f"p{k}", f"t{k}"], o) for k, o in enumerate(outs)]
    inits = {f"t{k}": np.array(t, np.int64) for k, t in enumerate(targets)} | {"sizes": np.array(sizes, np.int64)}
    return model(nodes, [("y", "FLOAT", y_shape)], outs, inits)


@pytest.mark.parametrize(
    "y_shape,axis,sizes,targets",
    [
        ((6, 48), 1, [16, 16, 16], [[12, 8], [3, 32], [2, 48]]),  # the parts' last axis split across rows
        ((6, 52), 1, [16, 16, 20], [[6, 2, 8], [6, 2, 8], [6, 2, 10]]),  # 8 and 10 do not divide every width
        ((6, 44), 1, [16, 16, 12], [[6, 2, 8], [6, 2, 8], [6, 2, 6]]),
        ((16, 8), 0, [8, 8], [[8, 2, 4], [8, 2, 4]]),  # a Split along the rows (each 8 wide and 8 high)
        ((16, 48), 1, [16, 16, 16], [[1, 0, 16], [1, 0, 16], [1, 0, 16]]),  # 0 copies the part's width, not y's
    ],
    ids=["last-axis-split-otherwise", "d-not-dividing", "widths-not-multiples", "non-last-axis", "zero-copies-width"],
)
def test_split_reshape_merge_not(y_shape: tuple, axis: int, sizes: list, targets: list) -> None:
    assert_rule_does_not_fire(_split_parts(y_shape, axis, sizes, targets), "split-reshape-merge")


@property_settings()
@given(PROPERTIES["split-reshape-merge"]())
def test_split_reshape_merge_property(case: RuleCase) -> None:
    case.check()


@pytest.mark.parametrize("batch", [1, 3])
def test_gather_before_elementwise_at_any_rank(batch: int) -> None:
    """A rank-5 table with a per-row scale [n, 1, 1, 1, 1] (the rule's rows once stopped at rank 4): the rows are
    gathered first, the scale's too (shape(i) + [1, 1, 1, 1]); the index's batch dim at two sizes."""
    table = (TABLE_ROWS, 2, 2, 2, 2)
    inits = {"s": RNG.uniform(0.5, 2, size=(TABLE_ROWS, 1, 1, 1, 1)).astype(np.float32)}
    nodes = [node("Cast", ["w"], "f", to=1), node("Mul", ["f", "s"], "d"), node("Gather", ["d", "i"], "y")]
    m = model(nodes, [("w", "INT8", table), ("i", "INT64", ("B", 3))], initializers=inits)
    feeds = {
        "w": RNG.integers(-128, 128, size=table).astype(np.int8),
        "i": RNG.integers(-TABLE_ROWS, TABLE_ROWS, size=(batch, 3)),
    }
    result = assert_rule_sound(m, "gather-before-elementwise", feeds, also=["gather-before-cast"])
    (first,) = [n for n in result.model.graph if n.op_type == "Cast"]
    assert first.inputs[0].producer() is not None and first.inputs[0].producer().op_type == "Gather"


# ---- the sites (guards computed once in analysis) ----


@property_settings()
@given(PROPERTIES["split-reshape-merge-site"]())
def test_split_reshape_merge_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["onehot-matmul-to-gather-site"]())
def test_onehot_matmul_to_gather_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["gather-before-elementwise-site"]())
def test_gather_before_elementwise_site_property(case: RuleCase) -> None:
    case.check()


@property_settings()
@given(PROPERTIES["space-depth-site"]())
def test_space_depth_site_property(case: RuleCase) -> None:
    case.check()
