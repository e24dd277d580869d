"""The model's interface is kept exactly (graph inputs with their defaults, outputs as declared), IR-3 models
keep their contract, and folding never writes an op form newer than the model's opset."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import onnxruntime as ort
import pytest
from onnx import TensorProto

import eqsat
from eqsat.frontend import interface
from eqsat.errors import InternalError

F32 = TensorProto.FLOAT


def _session_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def _ir3_conv(ir_version: int = 3, opset: int = 7) -> onnx.ModelProto:
    """A pytorch-0.3-style export: IR version 3, every weight an initializer listed as a graph input, and a
    constant computed from a weight (the folder must not fold through an overridable input)."""
    rng = np.random.default_rng(0)
    w = onh.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "1")
    b = onh.from_array(rng.standard_normal(4).astype(np.float32), "2")
    scale = onh.from_array(np.full((1, 4, 1, 1), 0.5, np.float32), "3")
    graph = oh.make_graph(
        [
            oh.make_node("Conv", ["0", "1", "2"], ["c"], pads=[1, 1, 1, 1]),
            oh.make_node("Mul", ["c", "3"], ["m"]),
            oh.make_node("Relu", ["m"], ["y"]),
        ],
        "torch-jit-export",
        [
            oh.make_tensor_value_info("0", F32, [2, 3, 8, 8]),
            oh.make_tensor_value_info("1", F32, [4, 3, 3, 3]),
            oh.make_tensor_value_info("2", F32, [4]),
            oh.make_tensor_value_info("3", F32, [1, 4, 1, 1]),
        ],
        [oh.make_tensor_value_info("y", F32, [2, 4, 8, 8])],
        [w, b, scale],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=ir_version)


def test_ir3_model_keeps_inputs_and_their_defaults_and_runs(tmp_path: Path) -> None:
    model = _ir3_conv()
    out = tmp_path / "out.onnx"
    eqsat.optimize(model, output=out)
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert interface.difference(written, model) == ""
    assert [v.name for v in written.graph.input] == ["0", "1", "2", "3"]
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(
        _session_run(written, {"0": x})[0], _session_run(model, {"0": x})[0], rtol=1e-5, atol=1e-5
    )


def test_an_overridden_default_gives_the_originals_result() -> None:
    """An input with a default is an input: feeding another weight must give what the original gives
    (onnxruntime lets a caller override an initializer from IR version 4 on)."""
    model = _ir3_conv(ir_version=8, opset=17)
    written = eqsat.optimize(model).proto
    rng = np.random.default_rng(2)
    feeds = {
        "0": rng.standard_normal((2, 3, 8, 8)).astype(np.float32),
        "3": rng.standard_normal((1, 4, 1, 1)).astype(np.float32),
    }
    np.testing.assert_allclose(_session_run(written, feeds)[0], _session_run(model, feeds)[0], rtol=1e-5, atol=1e-5)


def _with_default(case: str) -> onnx.ModelProto:
    """x and an input d with a default value (IR 8): the default a rule would fold away (a neutral element, a Clip
    a Relu merges into, an If condition)."""
    one, zero = np.array(1.0, np.float32), np.zeros(3, np.float32)  # a scalar, and a vector that broadcasts
    if case == "if":
        then, other = (
            oh.make_graph(
                [oh.make_node(op, ["x"], [f"{op}_y"])], op, [], [oh.make_tensor_value_info(f"{op}_y", F32, [2, 3])]
            )
            for op in ("Relu", "Neg")
        )
        nodes = [oh.make_node("If", ["d"], ["y"], then_branch=then, else_branch=other)]
        default = onh.from_array(np.array(True), "d")
    else:
        op = {"mul-one": "Mul", "add-zero": "Add", "clip": "Clip"}[case]
        inputs = ["x", "d", "hi"] if case == "clip" else ["x", "d"]
        nodes = [oh.make_node(op, inputs, ["c"]), oh.make_node("Relu", ["c"], ["y"])]
        value = np.array(-1.0, np.float32) if case == "clip" else (one if case == "mul-one" else zero)
        default = onh.from_array(value, "d")
    inits = [default] + ([onh.from_array(np.array(6.0, np.float32), "hi")] if case == "clip" else [])
    d_info = oh.make_tensor_value_info("d", default.data_type, list(default.dims))
    graph = oh.make_graph(
        nodes,
        "g",
        [oh.make_tensor_value_info("x", F32, [2, 3]), d_info],
        [oh.make_tensor_value_info("y", F32, [2, 3])],
        inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("case", ["mul-one", "add-zero", "clip", "if"])
def test_a_default_a_rule_would_fold_stays_an_input(case: str) -> None:
    """x * d with d defaulting to ones (x + zeros, Clip(x, d) then Relu, If(d)): a caller who feeds d must get
    what the original gives, so d is read as an input, never as its default; the run says so."""
    model = _with_default(case)
    result = eqsat.optimize(model, verify=False)
    assert any(w.startswith("inputs with defaults: 1 graph input(s) ('d')") for w in result.warnings)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    shape = {"mul-one": (), "add-zero": (3,), "clip": (), "if": ()}[case]
    d = np.array(False) if case == "if" else rng.standard_normal(shape).astype(np.float32)
    for feeds in ({"x": x}, {"x": x, "d": d}):
        np.testing.assert_allclose(_session_run(result.proto, feeds)[0], _session_run(model, feeds)[0], rtol=1e-6)


def test_graph_metadata_is_kept_and_training_information_dropped_with_a_warning() -> None:
    """Graph metadata_props stay; a quantization annotation stays while its tensors do (x and its scale s), one
    on a value the optimization removed (m = r * 1) goes; training information, naming the weights as they were,
    is dropped with a warning."""
    nodes = [
        oh.make_node("Relu", ["x"], ["r"]),
        oh.make_node("Mul", ["r", "one"], ["m"]),
        oh.make_node("Add", ["m", "s"], ["y"]),
    ]
    inits = [onh.from_array(np.array(1.0, np.float32), "one"), onh.from_array(np.full(3, 0.5, np.float32), "s")]
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("x", F32, [2, 3])], [oh.make_tensor_value_info("y", F32, [2, 3])], inits
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    entry = model.graph.metadata_props.add()
    entry.key, entry.value = "source", "unit test"
    for tensor in ("x", "m"):
        annotation = model.graph.quantization_annotation.add()
        annotation.tensor_name = tensor
        scale = annotation.quant_parameter_tensor_names.add()
        scale.key, scale.value = "SCALE_TENSOR", "s"
    model.training_info.add().algorithm.CopyFrom(oh.make_graph([], "algorithm", [], []))
    result = eqsat.optimize(model, verify=False)
    assert [(p.key, p.value) for p in result.proto.graph.metadata_props] == [("source", "unit test")]
    assert [a.tensor_name for a in result.proto.graph.quantization_annotation] == ["x"]
    assert not result.proto.training_info
    assert any(w.startswith("training information dropped") for w in result.warnings)


def test_ir3_output_with_new_constants_is_ir4() -> None:
    """Constants eqsat creates are not inputs: an IR-3 output holding one is written as IR version 4."""
    x = oh.make_tensor_value_info("x", F32, [2, 4])
    two = onh.from_array(np.full((2, 4), 2.0, np.float32), "two")
    graph = oh.make_graph(
        [oh.make_node("Mul", ["x", "two"], ["m"]), oh.make_node("Mul", ["m", "two"], ["y"])],
        "g",
        [x, oh.make_tensor_value_info("two", F32, [2, 4])],
        [oh.make_tensor_value_info("y", F32, [2, 4])],
        [two],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 7)], ir_version=3)
    written = eqsat.optimize(model).proto
    onnx.checker.check_model(written, full_check=True)
    assert interface.difference(written, model) == ""
    assert written.ir_version == (3 if all(t.name == "two" for t in written.graph.initializer) else 4)


def test_outputs_keep_their_declared_types() -> None:
    """Shape inference may know more than the model declares; the output still declares what the input did."""
    graph = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Abs", ["r"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", F32, [2, 3])],
        [oh.make_tensor_value_info("y", F32, [None, None])],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    written = eqsat.optimize(model).proto
    assert written.graph.output[0] == model.graph.output[0]


def test_a_value_listed_twice_among_the_outputs_is_assigned_once() -> None:
    """Outputs [y, y] with y = x * 1: the Mul goes, and one Identity writes y for both (a value is assigned once);
    the interface is the original's and onnxruntime gives the same outputs."""
    graph = oh.make_graph(
        [oh.make_node("Mul", ["x", "one"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", F32, [2, 3])],
        [oh.make_tensor_value_info("y", F32, [2, 3])] * 2,
        [onh.from_array(np.array(1.0, np.float32), "one")],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 13)], ir_version=9)
    out = eqsat.optimize(model, verify=False).proto
    onnx.checker.check_model(out, full_check=True)
    assert interface.difference(out, model) == ""
    assert [(n.op_type, list(n.output)) for n in out.graph.node] == [("Identity", ["y"])]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    for got, want in zip(_session_run(out, {"x": x}), _session_run(model, {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_a_changed_interface_is_never_written(tmp_path: Path) -> None:
    model = _ir3_conv()
    result = eqsat.optimize(model)
    del result.proto.graph.initializer[:]
    with pytest.raises(InternalError, match="interface.*lost its default"):
        result.save(tmp_path / "out.onnx")
    assert not (tmp_path / "out.onnx").exists()


def _sequence_model(opset: int) -> onnx.ModelProto:
    """SplitToSequence then ConcatFromSequence with constant inputs, which onnxscript's folder rewrites with
    Split/Unsqueeze nodes taking a split/axes input (opset 13 forms)."""
    x = onh.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "c")
    graph = oh.make_graph(
        [
            oh.make_node("SplitToSequence", ["c"], ["s"], axis=0, keepdims=0),
            oh.make_node("ConcatFromSequence", ["s"], ["k"], axis=0, new_axis=1),
            oh.make_node("Add", ["k", "x"], ["y"]),
        ],
        "g",
        [oh.make_tensor_value_info("x", F32, [3, 2])],
        [oh.make_tensor_value_info("y", F32, [3, 2])],
        [x],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [11, 12, 13])
def test_folding_never_writes_a_form_newer_than_the_opset(opset: int) -> None:
    model = _sequence_model(opset)
    written = eqsat.optimize(model).proto
    onnx.checker.check_model(written, full_check=True)
    x = np.ones((3, 2), np.float32)
    np.testing.assert_allclose(_session_run(written, {"x": x})[0], _session_run(model, {"x": x})[0])


def test_a_node_the_folder_fails_on_stays_unfolded(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception inside onnxscript's folder for one op leaves that op's nodes as they are; the rest folds."""
    from onnxscript.optimizer import _constant_folding as folding

    def broken(node, op, state):  # noqa: ANN001 - the folder's evaluator signature
        raise ValueError("planted")

    monkeypatch.setattr(
        folding.registry,
        "lookup_evaluators",
        lambda domain, op, version, original=folding.registry.lookup_evaluators: (
            [broken] if op == "Size" else original(domain, op, version)
        ),
    )
    c = onh.from_array(np.ones((2, 2), np.float32), "c")
    graph = oh.make_graph(
        [
            oh.make_node("Size", ["x"], ["n"]),
            oh.make_node("Neg", ["c"], ["nc"]),
            oh.make_node("Add", ["x", "nc"], ["y"]),
        ],
        "g",
        [oh.make_tensor_value_info("x", F32, [2, 2])],
        [oh.make_tensor_value_info("y", F32, [2, 2]), oh.make_tensor_value_info("n", TensorProto.INT64, [])],
        [c],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=8)
    written = eqsat.optimize(model).proto
    ops = [n.op_type for n in written.graph.node]
    assert "Neg" not in ops  # folded
    assert interface.difference(written, model) == ""


def test_sparse_and_string_initializers_pass_through(tmp_path: Path) -> None:
    """A sparse initializer read by a custom-domain op and a string initializer behind an Identity output
    survive untouched (onnx_ir holds neither; folding never evaluates strings)."""
    sparse = oh.make_sparse_tensor(
        onh.from_array(np.array([1.0, 2.0], np.float32), "sp"),
        onh.from_array(np.array([1, 5], np.int64), "sp_idx"),
        [2, 4],
    )
    words = onh.from_array(np.array([b"a", b"b"], dtype=object), "words")
    graph = oh.make_graph(
        [
            oh.make_node("Relu", ["x"], ["r"]),
            oh.make_node("Relu", ["r"], ["y"]),
            oh.make_node("Identity", ["words"], ["w"]),
            oh.make_node("Densify", ["sp", "x"], ["z"], domain="com.x"),
        ],
        "g",
        [oh.make_tensor_value_info("x", F32, [2, 4])],
        [
            oh.make_tensor_value_info("y", F32, [2, 4]),
            oh.make_tensor_value_info("w", TensorProto.STRING, [2]),
            oh.make_tensor_value_info("z", F32, [2, 4]),
        ],
        [words],
        sparse_initializer=[sparse],
    )
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17), oh.make_opsetid("com.x", 1)], ir_version=8)
    out = tmp_path / "out.onnx"
    eqsat.optimize(model, output=out, verify=False)  # no runtime knows com.x::Densify
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    assert interface.difference(written, model) == ""
    assert list(written.graph.sparse_initializer) == list(model.graph.sparse_initializer)
    assert [t for t in written.graph.initializer if t.name == "words"] == [words]
    assert sorted(n.op_type for n in written.graph.node) == ["Densify", "Identity", "Relu"]
