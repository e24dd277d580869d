"""Verification inputs the model accepts: integer inputs drawn from what consumes them (indices, axes, shapes,
repeats, k, pads, slice bounds), sequences and optionals of their type, the element budget that keeps sizes
drawn for Tile and friends bounded, and outputs of random ops left out of the comparison."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest

import eqsat
from eqsat.ui.cli import main
from eqsat.check.verify import expected_outputs, verify
from eqsat.check.verify_facts import ELEMENT_BUDGET, over_budget
from eqsat.check.verify_values import make_inputs
from tests.rule_graphs import model, node

F32, I64, BOOL = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64, onnx.TensorProto.BOOL


def _any(name: str) -> tuple[str, int, None]:
    return (name, F32, None)  # an output of unknown shape: it depends on a drawn input


def gather() -> onnx.ModelProto:
    """Gather along axis 1 of a graph input whose axis is a dynamic dim."""
    return model([node("Gather", ["x", "idx"], "y", axis=1)], [("x", F32, ["batch", "width"]), ("idx", I64, ["k"])])


def gather_elements() -> onnx.ModelProto:
    return model(
        [node("GatherElements", ["x", "idx"], "y", axis=1)],
        [("x", F32, ["batch", "width"]), ("idx", I64, ["batch", 3])],
    )


def gather_nd() -> onnx.ModelProto:
    return model([node("GatherND", ["x", "idx"], "y")], [("x", F32, ["batch", 5, 7]), ("idx", I64, [4, 2])])


def scatter_nd() -> onnx.ModelProto:
    return model(
        [node("ScatterND", ["x", "idx", "u"], "y")], [("x", F32, ["batch", 8]), ("idx", I64, [3, 2]), ("u", F32, [3])]
    )


def scatter_elements() -> onnx.ModelProto:
    return model(
        [node("ScatterElements", ["x", "idx", "u"], "y", axis=1)],
        [("x", F32, ["batch", "width"]), ("idx", I64, ["batch", 2]), ("u", F32, ["batch", 2])],
    )


def top_k() -> onnx.ModelProto:
    nodes = [oh.make_node("TopK", ["x", "k"], ["values", "indices"], axis=-1)]
    return model(nodes, [("x", F32, ["batch", "width"]), ("k", I64, [1])], ["values", "indices"])


def tile() -> onnx.ModelProto:
    return model(
        [node("Tile", ["x", "repeats"], "y")], [("x", F32, ["batch", 3, "h", "w"]), ("repeats", I64, [4])], [_any("y")]
    )


def reshape() -> onnx.ModelProto:
    return model(
        [node("Reshape", ["x", "shape"], "y")], [("x", F32, ["batch", "seq", 4]), ("shape", I64, [3])], [_any("y")]
    )


def reshape_free_rank() -> onnx.ModelProto:
    """The target shape's length is a dynamic dim too: the drawn vector chooses it (summed to a scalar: an
    output of unknown rank is refused)."""
    return model(
        [node("Reshape", ["x", "shape"], "r"), node("ReduceSum", ["r"], "y", keepdims=0)],
        [("x", F32, ["batch", "seq", 4]), ("shape", I64, ["r"])],
        [("y", F32, [])],
    )


def cum_sum() -> onnx.ModelProto:
    return model([node("CumSum", ["x", "axis"], "y")], [("x", F32, ["batch", "seq"]), ("axis", I64, [])])


def expand() -> onnx.ModelProto:
    return model([node("Expand", ["x", "shape"], "y")], [("x", F32, ["batch", 1]), ("shape", I64, [3])], [_any("y")])


def constant_of_shape() -> onnx.ModelProto:
    return model([node("ConstantOfShape", ["shape"], "y")], [("shape", I64, [3])], [_any("y")])


def one_hot() -> onnx.ModelProto:
    return model(
        [node("OneHot", ["idx", "depth", "values"], "y")],
        [("idx", I64, ["batch"]), ("depth", I64, [])],
        [_any("y")],
        {"values": np.array([0, 1], np.float32)},
    )


def slice_bounds() -> onnx.ModelProto:
    return model(
        [node("Slice", ["x", "starts", "ends", "axes"], "y")],
        [("x", F32, ["batch", "seq"]), ("starts", I64, [1]), ("ends", I64, [1]), ("axes", I64, [1])],
        [_any("y")],
    )


def reflect_pads() -> onnx.ModelProto:
    return model(
        [node("Pad", ["x", "pads"], "y", mode="reflect")],
        [("x", F32, ["batch", "seq"]), ("pads", I64, [4])],
        [_any("y")],
    )


def resize_sizes() -> onnx.ModelProto:
    return model(
        [node("Resize", ["x", "", "", "sizes"], "y", mode="linear")],
        [("x", F32, ["batch", 3, "h", "w"]), ("sizes", I64, [4])],
        [_any("y")],
    )


def resize_scales() -> onnx.ModelProto:
    return model(
        [node("Resize", ["x", "", "scales"], "y", mode="nearest")],
        [("x", F32, ["batch", 3, "h", "w"]), ("scales", F32, [4])],
        [_any("y")],
    )


def col2im() -> onnx.ModelProto:
    return model(
        [node("Col2Im", ["x", "image", "block"], "y")],
        [("x", F32, ["batch", 6, "blocks"]), ("image", I64, [2]), ("block", I64, [2])],
        [_any("y")],
        opset=18,
    )


def split() -> onnx.ModelProto:
    nodes = [oh.make_node("Split", ["x", "parts"], ["a", "b"], axis=1)]
    return model(nodes, [("x", F32, ["batch", "seq"]), ("parts", I64, [2])], [_any("a"), _any("b")])


def range_() -> onnx.ModelProto:
    return model(
        [node("Range", ["start", "limit", "delta"], "y")],
        [("start", I64, []), ("limit", I64, []), ("delta", I64, [])],
        [("y", I64, None)],
    )


def reduce_axes() -> onnx.ModelProto:
    return model(
        [node("ReduceSum", ["x", "axes"], "y")],
        [("x", F32, ["batch", "seq", 4]), ("axes", I64, [1])],
        [("y", F32, ["a", "b", "c"])],
    )


def integer_divisor() -> onnx.ModelProto:
    return model([node("Div", ["x", "d"], "y")], [("x", I64, ["batch"]), ("d", I64, ["batch"])])


CONSUMERS = [
    gather,
    gather_elements,
    gather_nd,
    scatter_nd,
    scatter_elements,
    top_k,
    tile,
    reshape,
    reshape_free_rank,
    cum_sum,
    expand,
    constant_of_shape,
    one_hot,
    slice_bounds,
    reflect_pads,
    resize_sizes,
    resize_scales,
    col2im,
    split,
    range_,
    reduce_axes,
    integer_divisor,
]


@pytest.mark.parametrize("make", CONSUMERS, ids=[m.__name__.strip("_") for m in CONSUMERS])
def test_integer_input_of_a_consumer_is_drawn_valid_and_verified(make) -> None:
    m = make()
    result = eqsat.optimize(m)
    verification = result.report.verification
    assert result.verified and verification.ok, verification.summary()
    assert result.warnings == []
    ran = verification.reference.runs
    for done in ran:
        for value in done.outputs:
            assert np.size(value) <= ELEMENT_BUDGET


def test_indices_follow_the_indexed_axis_of_each_assignment() -> None:
    reference = expected_outputs(gather())
    assert len(reference.runs) == 2
    for done in reference.runs:
        width = done.feeds["x"].shape[1]
        assert done.feeds["idx"].max() < width and done.feeds["idx"].min() >= 0
        assert len(np.unique(done.feeds["idx"])) > 1


def test_scatter_nd_indices_are_distinct() -> None:
    feeds = make_inputs(scatter_nd())
    tuples = {tuple(t) for t in feeds["idx"]}
    assert len(tuples) == 3 and all(0 <= a < 2 and 0 <= b < 8 for a, b in tuples)


def test_top_k_and_axis_within_the_data() -> None:
    feeds = make_inputs(top_k())
    assert 1 <= int(feeds["k"][0]) <= feeds["x"].shape[-1]
    assert 0 <= int(make_inputs(cum_sum())["axis"]) < 2


def test_tile_with_graph_input_repeats_stays_within_the_budget() -> None:
    """A 2 x 1024 x 1024 input (2M elements) tiled by drawn repeats: each drawn output stays within the
    budget (27 times the input would be 56M elements)."""
    m = model(
        [node("Tile", ["x", "repeats"], "y")], [("x", F32, ["batch", 1024, 1024]), ("repeats", I64, [3])], [_any("y")]
    )
    reference = expected_outputs(m)
    assert reference.runs
    for done in reference.runs:
        assert done.outputs[0].size <= ELEMENT_BUDGET
        assert (done.feeds["repeats"] >= 1).all()


def test_a_candidate_whose_output_is_over_the_budget_is_skipped() -> None:
    """x [k] -> Expand to [2**21, k]: 33M elements at the smallest k, over the budget on every candidate:
    each is skipped before it is run, and the model is not verified (nothing was allocated for it)."""
    m = model(
        [node("Expand", ["x", "rows"], "y")],
        [("x", F32, ["k"])],
        [("y", F32, [2**21, "k"])],
        {"rows": np.array([2**21, 1], np.int64)},
    )
    report = verify(m, m)
    assert not report.verified and report.ok
    assert (
        "sizes tried: none; skipped over the budget: x:16 (value 'y' would hold 33,554,432 elements); x:32"
        in report.unverified
    )
    assert over_budget({"y": (4097, 4096)}, {"x": (3,)}) == "value 'y' would hold 16,781,312 elements"
    assert over_budget({"y": (4097, 4096)}, {"x": (3,)}, fixed={"y"}) == ""  # a size the model states is no choice


def test_random_op_output_is_not_compared_and_named(tmp_path: Path) -> None:
    m = model(
        [
            node("Relu", ["x"], "y"),
            node("RandomNormalLike", ["x"], "noise"),
            node("Add", ["x", "noise"], "z"),
            oh.make_node("Dropout", ["x", "ratio", "training"], ["d"]),
        ],
        [("x", F32, ["batch", 4]), ("training", BOOL, [])],
        ["y", "z", "d"],
        {"ratio": np.array(0.5, np.float32)},
    )
    report = verify(m, m)
    assert report.ok and report.verified and [o.name for o in report.outputs] == ["y"]
    assert report.random_outputs == ("z", "d")
    assert report.summary().endswith("; not compared (they depend on random ops): z, d")
    path, out, js = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "r.json"
    path.write_bytes(m.SerializeToString())
    assert main(["optimize", str(path), "-o", str(out), "--report-json", str(js)]) == 0
    assert json.loads(js.read_text())["verification"]["not_compared_random"] == ["z", "d"]


def test_a_dropout_with_a_constant_false_training_mode_is_compared() -> None:
    m = model(
        [oh.make_node("Dropout", ["x", "ratio", "training"], ["d"])],
        [("x", F32, ["batch", 4])],
        ["d"],
        {"ratio": np.array(0.5, np.float32), "training": np.array(False)},
    )
    assert verify(m, m).random_outputs == ()


def test_sequence_and_optional_inputs_get_values_of_their_type() -> None:
    sequence = oh.make_sequence_type_proto(oh.make_tensor_type_proto(F32, ["n", 3]))
    optional = oh.make_optional_type_proto(oh.make_tensor_type_proto(F32, [2]))
    graph = oh.make_graph(
        [oh.make_node("ConcatFromSequence", ["s"], ["c"], axis=0), oh.make_node("OptionalHasElement", ["o"], ["has"])],
        "g",
        [oh.make_value_info("s", sequence), oh.make_value_info("o", optional)],
        [oh.make_tensor_value_info("c", F32, None), oh.make_tensor_value_info("has", BOOL, [])],
    )
    m = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 18)], ir_version=10)
    feeds = make_inputs(m)
    assert isinstance(feeds["s"], list) and len(feeds["s"]) == 2 and feeds["s"][0].shape == feeds["s"][1].shape
    report = verify(m, m)
    assert report.ok and report.verified and report.runtime == "onnxruntime"


def test_string_inputs_are_words() -> None:
    m = model([node("Identity", ["s"], "y")], [("s", onnx.TensorProto.STRING, ["batch"])])
    feeds = make_inputs(m)
    assert feeds["s"].dtype == object and feeds["s"].shape == (2,) and all(isinstance(w, str) for w in feeds["s"])
    assert verify(m, m).ok
