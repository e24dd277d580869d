"""Load, normalize and save: bundled models round-trip with their interface intact; folding on small graphs;
unsorted graphs are sorted; saving is atomic."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto

import eqsat
from eqsat.frontend import fold, io
from eqsat.errors import BadInputError, InternalError
from eqsat.result import Result

F32 = TensorProto.FLOAT


@pytest.fixture(scope="module")
def round_trip(
    bundled_model: Path, optimized_bundled: tuple[Path, Result]
) -> tuple[onnx.ModelProto, onnx.ModelProto, Result]:
    """(input, saved output, result) of `eqsat.optimize(model, output=...)` on one bundled model."""
    out, result = optimized_bundled
    return onnx.load(bundled_model), onnx.load(out), result


def _signature(values) -> list[tuple[str, onnx.TypeProto]]:
    return [(v.name, v.type) for v in values]


def test_output_passes_full_check(round_trip) -> None:
    onnx.checker.check_model(round_trip[1], full_check=True)


def test_every_output_node_names_its_origin(round_trip) -> None:
    """Provenance on every node: rewritten, kept, opaque, and the Identity that keeps an output's name."""
    from eqsat.engine.lower import PROVENANCE_KEY

    from eqsat.subgraphs import all_graphs

    unnamed = [
        n.name
        for g in all_graphs(round_trip[1].graph)
        for n in g.node  # bodies too
        if not any(p.key == PROVENANCE_KEY and p.value for p in n.metadata_props)
    ]
    assert not unnamed


def test_opaque_nodes_and_output_aliases_name_their_origin() -> None:
    from eqsat.engine.lower import PROVENANCE_KEY

    m = oh.make_model(
        oh.make_graph(
            [
                oh.make_node("Shape", ["x"], ["s"], name="shape"),
                oh.make_node("Identity", ["x"], ["y"], name="alias"),
                oh.make_node("Relu", ["x"], ["r"], name="relu"),
                oh.make_node("Relu", ["r"], ["z"], name="relu2"),
            ],
            "g",
            [oh.make_tensor_value_info("x", F32, ["n", 3])],
            [
                oh.make_tensor_value_info("s", TensorProto.INT64, [2]),
                oh.make_tensor_value_info("y", F32, ["n", 3]),
                oh.make_tensor_value_info("z", F32, ["n", 3]),
            ],
        ),
        opset_imports=[oh.make_opsetid("", 17)],
        ir_version=10,
    )
    out = eqsat.optimize(m).proto
    origin = {n.output[0]: {p.key: p.value for p in n.metadata_props}.get(PROVENANCE_KEY) for n in out.graph.node}
    assert origin == {"s": "shape", "y": "alias", "z": "relu,relu2"}


def test_graph_inputs_and_outputs_kept(round_trip) -> None:
    before, after, _ = round_trip
    assert _signature(after.graph.input) == _signature(before.graph.input)
    assert _signature(after.graph.output) == _signature(before.graph.output)


def test_opsets_and_metadata_kept(round_trip) -> None:
    before, after, _ = round_trip
    assert {o.domain: o.version for o in after.opset_import} == {o.domain: o.version for o in before.opset_import}
    assert [(p.key, p.value) for p in after.metadata_props] == [(p.key, p.value) for p in before.metadata_props]


def test_never_more_nodes(round_trip) -> None:
    before, after, result = round_trip
    assert len(after.graph.node) <= len(before.graph.node)
    assert result.report.nodes_after == len(after.graph.node)


def test_verified(round_trip) -> None:
    verification = round_trip[2].report.verification
    assert verification is not None and verification.ok, verification.summary()


def _ops(result: Result) -> list[str]:
    return [node.op_type for node in result.model.graph]


def test_static_shape_chain_folds_to_one_reshape(make_model) -> None:
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape on a static shape becomes Reshape(x, [2, -1])."""
    model = make_model(
        [
            oh.make_node("Shape", ["x"], ["shape"]),
            oh.make_node("Gather", ["shape", "zero"], ["batch"], axis=0),
            oh.make_node("Unsqueeze", ["batch", "axes"], ["batch1"]),
            oh.make_node("Concat", ["batch1", "minus_one"], ["target"], axis=0),
            oh.make_node("Reshape", ["x", "target"], ["y"]),
        ],
        [("x", F32, [2, 3, 4])],
        [("y", F32, [2, 12])],
        {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus_one": np.array([-1], np.int64)},
    )
    result = eqsat.optimize(model)
    assert _ops(result) == ["Reshape"]
    shape = next(iter(result.model.graph)).inputs[1].const_value
    assert shape is not None and shape.numpy().tolist() == [2, -1]


def test_constant_nodes_become_initializers(make_model) -> None:
    bias = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make_model(
        [
            oh.make_node("Constant", [], ["bias"], value=onnx.numpy_helper.from_array(bias)),
            oh.make_node("Add", ["x", "bias"], ["y"]),
        ],
        [("x", F32, [2, 3])],
        [("y", F32, [2, 3])],
    )
    result = eqsat.optimize(model)
    assert "Constant" not in _ops(result)
    (add,) = result.model.graph
    (lifted,) = [v for v in add.inputs if v.is_initializer()]  # either operand order is fine
    np.testing.assert_array_equal(lifted.const_value.numpy(), bias)


BIG_ROWS = fold.FOLD_OUTPUT_LIMIT // 1024 + 1  # rows of 1024 elements: just above the folding cap


@pytest.mark.parametrize(
    ("producer", "rows", "folded"),
    [
        ("Expand", 4, True),
        ("Expand", BIG_ROWS, False),
        ("ConstantOfShape", 1, True),
        ("ConstantOfShape", 4, False),
        ("ConstantOfShape", BIG_ROWS, False),
    ],
    ids=[
        "expand-small-folds",
        "expand-over-cap-stays",
        "constant-of-shape-small-folds",
        "constant-of-shape-over-fill-cap-stays",
        "constant-of-shape-over-cap-stays",
    ],
)
def test_folding_respects_size_cap(make_model, producer: str, rows: int, folded: bool) -> None:
    """A constant bigger than FOLD_OUTPUT_LIMIT elements stays a computation instead of an initializer; a
    ConstantOfShape (a compact fill) folds up to FOLD_FILL_LIMIT elements only."""
    if producer == "Expand":
        node = oh.make_node("Expand", ["one", "shape"], ["filled"])
    else:
        node = oh.make_node(
            "ConstantOfShape", ["shape"], ["filled"], value=onnx.helper.make_tensor("v", F32, [1], [1.0])
        )
    model = make_model(
        [node, oh.make_node("Add", ["x", "filled"], ["y"])],
        [("x", F32, [1, 1024])],
        [("y", F32, [rows, 1024])],
        {"one": np.array(1.0, np.float32), "shape": np.array([rows, 1024], np.int64)},
    )
    result = eqsat.optimize(model)
    assert (producer not in _ops(result)) == folded
    assert max(v.const_value.size for v in result.model.graph.initializers.values()) <= fold.FOLD_OUTPUT_LIMIT


def test_unsorted_graph_is_accepted_and_sorted(make_model, tmp_path: Path) -> None:
    model = make_model(
        [
            oh.make_node("Mul", ["a", "b"], ["y"], name="last"),
            oh.make_node("Sigmoid", ["a"], ["b"], name="middle"),
            oh.make_node("Relu", ["x"], ["a"], name="first"),
        ],
        [("x", F32, [2, 3])],
        [("y", F32, [2, 3])],
    )
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    given = model.SerializeToString()
    result = eqsat.optimize(model, output=tmp_path / "sorted.onnx")
    assert result.report.verification.ok
    assert model.SerializeToString() == given, "the caller's proto was changed"
    onnx.checker.check_model(onnx.load(tmp_path / "sorted.onnx"), full_check=True)


def _branch(op: str, name: str) -> onnx.GraphProto:
    """A subgraph that reads `r` from the outer scope."""
    return oh.make_graph([oh.make_node(op, ["r"], [name])], name, [], [oh.make_tensor_value_info(name, F32, [2, 3])])


@pytest.mark.parametrize("order", [[2, 0, 1], [0, 1, 2], [1, 2, 0]], ids=["if-first", "sorted", "if-middle"])
def test_sorting_counts_values_read_by_subgraphs(make_model, order: list[int]) -> None:
    """If's branches read `r` (not an input of the If node): it must come after r's producer; a sorted
    graph keeps its order."""
    nodes = [
        oh.make_node("Relu", ["x"], ["r0"], name="relu0"),
        oh.make_node("Relu", ["r0"], ["r"], name="relu1"),
        oh.make_node(
            "If",
            ["cond"],
            ["y"],
            name="if",
            then_branch=_branch("Identity", "then"),
            else_branch=_branch("Neg", "else"),
        ),
    ]
    model = make_model(
        [nodes[i] for i in order], [("x", F32, [2, 3]), ("cond", TensorProto.BOOL, [])], [("y", F32, [2, 3])]
    )
    assert [node.name for node in io.load(model).graph] == ["relu0", "relu1", "if"]


def _fail(*_args, **_kwargs) -> None:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        (None, InternalError),
        ("fsync", BadInputError),
        ("replace", BadInputError),
    ],
    ids=["invalid-model", "write-fails", "rename-fails"],
)
def test_failed_save_leaves_no_file(
    make_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, patch: str | None, error: type[Exception]
) -> None:
    if patch is None:  # Add with one input: rejected by the checker before anything is written
        model = make_model([oh.make_node("Add", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])])
    else:
        model = make_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])])
        monkeypatch.setattr(os, patch, _fail)
    with pytest.raises(error):
        io.save(model, tmp_path / "out.onnx")
    assert list(tmp_path.iterdir()) == []


def test_failed_save_keeps_previous_file(make_model, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out.onnx"
    target.write_bytes(b"previous")
    monkeypatch.setattr(os, "replace", _fail)
    with pytest.raises(BadInputError, match="out.onnx: cannot be written: No space left on device"):
        io.save(make_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])]), target)
    assert list(tmp_path.iterdir()) == [target]
    assert target.read_bytes() == b"previous"


def test_saved_file_honours_umask(make_model, tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        io.save(
            make_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F32, [2])], [("y", F32, [2])]),
            tmp_path / "out.onnx",
        )
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "out.onnx").stat().st_mode) == 0o640


def test_a_model_only_onnx_strict_inference_rejects_is_optimized(tmp_path: Path) -> None:
    """MeanVarianceNormalization at opset 13: the checker passes, onnxruntime runs it, but strict shape
    inference trips on the op's own function body. Valid: optimized and written, held to the same standard."""
    m = oh.make_model(
        oh.make_graph(
            [
                oh.make_node("MeanVarianceNormalization", ["x"], ["m"]),
                oh.make_node("Relu", ["m"], ["r"]),
                oh.make_node("Relu", ["r"], ["y"]),
            ],
            "g",
            [oh.make_tensor_value_info("x", F32, [2, 3, 4, 4])],
            [oh.make_tensor_value_info("y", F32, [2, 3, 4, 4])],
        ),
        opset_imports=[oh.make_opsetid("", 13)],
        ir_version=8,
    )
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.checker.check_model(m, full_check=True)
    out = tmp_path / "out.onnx"
    result = eqsat.optimize(m, output=out)
    assert result.report.verification.ok
    onnx.checker.check_model(onnx.load(out))
    assert [n.op_type for n in onnx.load(out).graph.node] == ["MeanVarianceNormalization", "Relu"]
