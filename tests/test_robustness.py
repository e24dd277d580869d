"""Awkward but valid models are optimized around and verified; invalid ones are refused in one line; a
failed verification names the rules, the first differing output, and (with --bisect) the rule responsible.

Valid models (VALID): exit 0, the output is written, passes the full checker, keeps the graph's inputs and
outputs, keeps custom-domain nodes intact (attributes byte for byte) and subgraph nodes' attributes and body
interfaces (bodies themselves are optimized: eqsat/subgraphs.py), and is verified by
onnxruntime where it can run the model. Invalid models (INVALID): exit 2, one `eqsat: error: FILE: ...`
line naming the node where there is one, no traceback, no output file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import onnx
import onnx.helper as oh
import pytest
from onnx import TensorProto as TP

import eqsat
from eqsat.ui.cli import main
from eqsat.engine.rule import Rule, rw
from tests.conftest import build_model

F, I64, BOOL = TP.FLOAT, TP.INT64, TP.BOOL


# --------------------------------------------------------------------------------------------------
# models


def _sandwich(x: str, y: str, perm=(1, 0), back=(1, 0)) -> list[onnx.NodeProto]:
    """x -> Transpose -> Relu -> Transpose -> y: two transposes eqsat removes."""
    return [
        oh.make_node("Transpose", [x], [f"{y}_t"], perm=list(perm)),
        oh.make_node("Relu", [f"{y}_t"], [f"{y}_r"]),
        oh.make_node("Transpose", [f"{y}_r"], [y], perm=list(back)),
    ]


def _symbolic_batch() -> onnx.ModelProto:
    return build_model(
        _sandwich("x", "y", (0, 2, 3, 1), (0, 3, 1, 2)), [("x", F, ["N", 3, 4, 5])], [("y", F, ["N", 3, 4, 5])]
    )


def _symbolic_all() -> onnx.ModelProto:
    nodes = [oh.make_node("Shape", ["x"], ["s"]), oh.make_node("Reshape", ["x", "s"], ["x2"]), *_sandwich("x2", "y")]
    return build_model(nodes, [("x", F, ["a", "b"])], [("y", F, ["a", "b"])])


def _dynamic_reshape() -> onnx.ModelProto:
    """Shape -> Gather -> Concat -> Reshape on a symbolic batch: the target becomes [0, 12]
    (eqsat.frontend.shape_chains)."""
    nodes = [
        oh.make_node("Shape", ["x"], ["s"]),
        oh.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        oh.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
        oh.make_node("Concat", ["n1", "rest"], ["shape"], axis=0),
        *_sandwich("x", "t", (0, 2, 1), (0, 2, 1)),
        oh.make_node("Reshape", ["t", "shape"], ["y"]),
    ]
    return build_model(
        nodes,
        [("x", F, ["N", 3, 4])],
        [("y", F, ["N", 12])],
        {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "rest": np.array([12], np.int64)},
    )


def _weights_model() -> onnx.ModelProto:
    nodes = [
        oh.make_node("Conv", ["x", "w", "b"], ["c"], name="conv0"),
        *_sandwich("c", "y", (0, 2, 3, 1), (0, 3, 1, 2)),
    ]
    rng = np.random.default_rng(0)
    return build_model(
        nodes,
        [("x", F, [1, 3, 5, 5])],
        [("y", F, [1, 4, 5, 5])],
        {"w": rng.standard_normal((4, 3, 1, 1)).astype(np.float32), "b": rng.standard_normal(4).astype(np.float32)},
    )


def _conv_batchnorm() -> onnx.ModelProto:
    """Conv -> BatchNormalization: the folded weights are computed at lowering from the original ones,
    which must not stay behind in the file."""
    rng = np.random.default_rng(1)
    nodes = [
        oh.make_node("Conv", ["x", "w"], ["c"], name="conv0"),
        oh.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn0"),
    ]
    return build_model(
        nodes,
        [("x", F, [1, 3, 6, 6])],
        [("y", F, [1, 4, 6, 6])],
        {
            "w": rng.standard_normal((4, 3, 1, 1)).astype(np.float32),
            **{k: rng.uniform(0.5, 1.5, 4).astype(np.float32) for k in "sbmv"},
        },
    )


def _zero_sized_input() -> onnx.ModelProto:
    return build_model(_sandwich("x", "y"), [("x", F, [0, 3])], [("y", F, [0, 3])])


def _zero_sized_initializer() -> onnx.ModelProto:
    nodes = [
        oh.make_node("Add", ["x", "e"], ["a"]),
        oh.make_node("Relu", ["a"], ["r"]),
        oh.make_node("Relu", ["r"], ["y"]),
    ]
    return build_model(nodes, [("x", F, [0, 3])], [("y", F, [0, 3])], {"e": np.zeros((0, 3), np.float32)})


def _zero_sized_concat() -> onnx.ModelProto:
    nodes = [oh.make_node("Concat", ["x", "z"], ["c"], axis=0), *_sandwich("c", "y")]
    return build_model(nodes, [("x", F, [2, 3]), ("z", F, [0, 3])], [("y", F, [2, 3])])


def _zero_sized_reduce() -> onnx.ModelProto:
    nodes = [oh.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1), oh.make_node("Mul", ["s", "half"], ["y"])]
    return build_model(
        nodes,
        [("x", F, [2, 0])],
        [("y", F, [2, 1])],
        {"axes": np.array([1], np.int64), "half": np.array(0.5, np.float32)},
    )


def _dropout_mask_omitted() -> onnx.ModelProto:
    """Dropout's optional mask written "" (opset 12 on): folding makes the mask a constant, which needs a name."""
    nodes = [oh.make_node("Dropout", ["x"], ["d", ""]), oh.make_node("Relu", ["d"], ["y"])]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])])


def _empty_graph() -> onnx.ModelProto:
    return build_model([], [("x", F, [2, 3])], [("x", F, [2, 3])])


def _identity_only() -> onnx.ModelProto:
    return build_model([oh.make_node("Identity", ["x"], ["y"])], [("x", F, [2, 3])], [("y", F, [2, 3])])


def _two_outputs_one_value() -> onnx.ModelProto:
    nodes = [*_sandwich("x", "y"), oh.make_node("Identity", ["y"], ["z"])]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3]), ("z", F, [2, 3])])


def _two_outputs_merged() -> onnx.ModelProto:
    """Two nodes computing the same thing: hash-consing makes them one e-class."""
    return build_model(
        [oh.make_node("Relu", ["x"], ["y"]), oh.make_node("Relu", ["x"], ["z"])],
        [("x", F, [2, 3])],
        [("y", F, [2, 3]), ("z", F, [2, 3])],
    )


def _two_outputs_of_the_input() -> onnx.ModelProto:
    nodes = [oh.make_node("Identity", ["x"], ["y"]), oh.make_node("Identity", ["x"], ["z"])]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3]), ("z", F, [2, 3])])


def _input_is_an_output() -> onnx.ModelProto:
    return build_model(_sandwich("x", "y"), [("x", F, [2, 3])], [("x", F, [2, 3]), ("y", F, [2, 3])])


def _same_output_twice() -> onnx.ModelProto:
    return build_model(_sandwich("x", "y"), [("x", F, [2, 3])], [("y", F, [2, 3]), ("y", F, [2, 3])])


def _output_is_initializer() -> onnx.ModelProto:
    nodes = [oh.make_node("Add", ["x", "w"], ["a"]), *_sandwich("a", "y")]
    return build_model(
        nodes,
        [("x", F, [2, 3])],
        [("y", F, [2, 3]), ("w", F, [2, 3])],
        {"w": np.arange(6, dtype=np.float32).reshape(2, 3)},
    )


def _output_folds_to_constant() -> onnx.ModelProto:
    nodes = [oh.make_node("Add", ["a", "b"], ["c"]), *_sandwich("x", "y")]
    return build_model(
        nodes,
        [("x", F, [2, 3])],
        [("y", F, [2, 3]), ("c", F, [2, 3])],
        {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), 2.0, np.float32)},
    )


def _equal_constant_outputs() -> onnx.ModelProto:
    """Two outputs holding equal constants (one class by content), one of them through an Identity."""
    nodes = [oh.make_node("Identity", ["a"], ["c"]), *_sandwich("x", "y")]
    return build_model(
        nodes,
        [("x", F, [2, 3])],
        [("y", F, [2, 3]), ("c", F, [2]), ("b", F, [2])],
        {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)},
    )


def _custom_domain(domain: str, op: str, **attrs) -> Callable[[], onnx.ModelProto]:
    def make() -> onnx.ModelProto:
        nodes = [
            *_sandwich("x", "t", (0, 2, 3, 1), (0, 3, 1, 2)),
            oh.make_node(op, ["t"], ["c"], domain=domain, name="custom", **attrs),
            *_sandwich("c", "y", (0, 2, 3, 1), (0, 3, 1, 2)),
        ]
        model = build_model(nodes, [("x", F, [1, 2, 3, 4])], [("y", F, [1, 2, 3, 4])])
        model.opset_import.append(oh.make_opsetid(domain, 1))
        return model

    return make


def _if() -> onnx.ModelProto:
    then_graph = oh.make_graph(
        [oh.make_node("Identity", ["r"], ["out_then"])], "then", [], [oh.make_tensor_value_info("out_then", F, [2, 3])]
    )
    else_graph = oh.make_graph(
        [oh.make_node("Neg", ["r"], ["out_else"])], "else", [], [oh.make_tensor_value_info("out_else", F, [2, 3])]
    )
    nodes = [
        *_sandwich("x", "r"),
        oh.make_node("If", ["cond"], ["i"], then_branch=then_graph, else_branch=else_graph, name="branch"),
        *_sandwich("i", "y"),
    ]
    return build_model(nodes, [("x", F, [2, 3]), ("cond", BOOL, [])], [("y", F, [2, 3])])


def _loop() -> onnx.ModelProto:
    """acc = x; three times: acc = acc + r (r from the outer scope)."""
    body = oh.make_graph(
        [oh.make_node("Add", ["acc_in", "r"], ["acc_out"]), oh.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            oh.make_tensor_value_info("i", I64, []),
            oh.make_tensor_value_info("cond_in", BOOL, []),
            oh.make_tensor_value_info("acc_in", F, [2, 3]),
        ],
        [oh.make_tensor_value_info("cond_out", BOOL, []), oh.make_tensor_value_info("acc_out", F, [2, 3])],
    )
    nodes = [
        *_sandwich("x", "r"),
        oh.make_node("Loop", ["n", "", "x"], ["acc"], body=body, name="loop"),
        *_sandwich("acc", "y"),
    ]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])], {"n": np.array(3, np.int64)})


def _scan() -> onnx.ModelProto:
    """Cumulative sum over the rows of r, two outputs (the final sum and every partial one)."""
    body = oh.make_graph(
        [oh.make_node("Add", ["s_in", "e"], ["s_out"]), oh.make_node("Identity", ["s_out"], ["scan_out"])],
        "sbody",
        [oh.make_tensor_value_info("s_in", F, [3]), oh.make_tensor_value_info("e", F, [3])],
        [oh.make_tensor_value_info("s_out", F, [3]), oh.make_tensor_value_info("scan_out", F, [3])],
    )
    nodes = [
        *_sandwich("x", "r"),
        oh.make_node("Scan", ["init", "r"], ["final", "cum"], body=body, num_scan_inputs=1, name="scan"),
        oh.make_node("Relu", ["cum"], ["c1"]),
        oh.make_node("Relu", ["c1"], ["y"]),
    ]
    return build_model(
        nodes, [("x", F, [2, 3])], [("y", F, [2, 3]), ("final", F, [3])], {"init": np.zeros(3, np.float32)}
    )


@dataclasses.dataclass(frozen=True)
class Valid:
    make: Callable[[], onnx.ModelProto]
    ops: Mapping[str, int] = dataclasses.field(default_factory=dict)  # op -> count in the output
    intact: tuple[str, ...] = ()  # op types whose nodes must come out unchanged (attributes, domain)
    verified: bool = True  # onnxruntime runs it: verification must have run and passed
    external: bool = False  # saved with its weights in a separate file
    options: tuple[str, ...] = ()


VALID = [
    pytest.param(Valid(_symbolic_batch, {"Transpose": 0}), id="symbolic-batch-dim"),
    pytest.param(Valid(_symbolic_all, {"Transpose": 0}), id="symbolic-dims-everywhere"),
    pytest.param(Valid(_dynamic_reshape, {"Transpose": 0, "Reshape": 1, "Shape": 0}), id="shape-computed-at-run-time"),
    pytest.param(Valid(_weights_model, {"Transpose": 0, "Conv": 1}, external=True), id="external-data-weights"),
    pytest.param(
        Valid(_conv_batchnorm, {"Conv": 1, "BatchNormalization": 0}), id="folded-weights-leave-no-dead-initializers"
    ),
    pytest.param(Valid(_zero_sized_input, {"Transpose": 0}), id="zero-sized-input"),
    pytest.param(Valid(_zero_sized_initializer, {"Relu": 1}), id="zero-sized-initializer"),
    pytest.param(Valid(_zero_sized_concat, {"Transpose": 0}), id="zero-sized-concat-operand"),
    pytest.param(Valid(_zero_sized_reduce), id="zero-sized-reduction"),
    pytest.param(Valid(_dropout_mask_omitted, {"Dropout": 0, "Relu": 1}), id="dropout-mask-output-omitted"),
    pytest.param(Valid(_empty_graph, {}), id="empty-graph-input-is-output"),
    pytest.param(Valid(_identity_only, {"Identity": 1}), id="input-passed-to-output-by-identity"),
    pytest.param(Valid(_two_outputs_one_value, {"Transpose": 0}), id="two-outputs-same-value"),
    pytest.param(Valid(_two_outputs_merged, {"Relu": 1}), id="two-outputs-merged-by-hash-consing"),
    pytest.param(Valid(_two_outputs_of_the_input, {"Identity": 2}), id="two-outputs-both-the-input"),
    pytest.param(Valid(_input_is_an_output, {"Transpose": 0}), id="input-is-also-an-output"),
    pytest.param(Valid(_same_output_twice, {"Transpose": 0}), id="same-output-listed-twice"),
    pytest.param(Valid(_output_is_initializer, {"Transpose": 0}), id="output-is-an-initializer"),
    pytest.param(Valid(_output_folds_to_constant, {"Transpose": 0}), id="output-folds-to-a-constant"),
    pytest.param(Valid(_equal_constant_outputs, {"Transpose": 0}), id="two-equal-constant-outputs"),
    pytest.param(
        Valid(_custom_domain("com.microsoft", "Gelu"), {"Transpose": 0}, ("Gelu",)),
        id="custom-domain-op-onnxruntime-runs",
    ),
    pytest.param(
        Valid(
            _custom_domain("com.example", "MyOp", alpha=0.5, mode="fast"),
            {"Transpose": 0},
            ("MyOp",),
            verified=False,
            options=("--no-verify",),
        ),
        id="custom-domain-op-unverified",
    ),
    pytest.param(Valid(_if, {"Transpose": 0, "If": 1}, ("If",)), id="if-subgraph"),
    pytest.param(Valid(_loop, {"Transpose": 0, "Loop": 1}, ("Loop",)), id="loop-subgraph"),
    pytest.param(Valid(_scan, {"Transpose": 0, "Scan": 1, "Relu": 2}, ("Scan",)), id="scan-subgraph"),
]


def _unknown_op() -> onnx.ModelProto:
    return build_model([oh.make_node("FooBar", ["x"], ["y"], name="foo")], [("x", F, [2, 3])], [("y", F, [2, 3])])


def _missing_initializer() -> onnx.ModelProto:
    nodes = [oh.make_node("Conv", ["x", "W"], ["c"], name="conv0"), oh.make_node("Relu", ["c"], ["y"])]
    return build_model(nodes, [("x", F, [1, 1, 3, 3])], [("y", F, [1, 1, 3, 3])])


def _custom_domain_without_opset_import() -> onnx.ModelProto:
    return build_model(
        [oh.make_node("MyOp", ["x"], ["y"], domain="com.example", name="mine")], [("x", F, [2, 3])], [("y", F, [2, 3])]
    )


def _if_with(bad_node: onnx.NodeProto) -> Callable[[], onnx.ModelProto]:
    def make() -> onnx.ModelProto:
        then_graph = oh.make_graph([bad_node], "then", [], [oh.make_tensor_value_info("out_then", F, [2, 3])])
        else_graph = oh.make_graph(
            [oh.make_node("Neg", ["x"], ["out_else"])], "else", [], [oh.make_tensor_value_info("out_else", F, [2, 3])]
        )
        node = oh.make_node("If", ["cond"], ["y"], then_branch=then_graph, else_branch=else_graph, name="branch")
        return build_model([node], [("x", F, [2, 3]), ("cond", BOOL, [])], [("y", F, [2, 3])])

    return make


def _loop_body_missing_condition() -> onnx.ModelProto:
    body = oh.make_graph(
        [oh.make_node("Add", ["acc_in", "x"], ["acc_out"])],
        "body",
        [
            oh.make_tensor_value_info("i", I64, []),
            oh.make_tensor_value_info("cond_in", BOOL, []),
            oh.make_tensor_value_info("acc_in", F, [2, 3]),
        ],
        [oh.make_tensor_value_info("acc_out", F, [2, 3])],
    )
    node = oh.make_node("Loop", ["n", "", "x"], ["y"], body=body, name="loop")
    return build_model([node], [("x", F, [2, 3])], [("y", F, [2, 3])], {"n": np.array(3, np.int64)})


def _missing_external_file() -> onnx.ModelProto:
    model = build_model(
        [oh.make_node("Add", ["x", "w"], ["y"], name="adder")],
        [("x", F, [2, 3])],
        [("y", F, [2, 3])],
        {"w": np.ones((2, 3), np.float32)},
    )
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.data_location = TP.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", "weights-that-were-never-copied.bin"
    return model


def _unknown_rank_input() -> onnx.ModelProto:
    graph = oh.make_graph(
        [oh.make_node("Relu", ["x"], ["y"])],
        "g",
        [oh.make_tensor_value_info("x", F, None)],
        [oh.make_tensor_value_info("y", F, [2, 3])],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)], ir_version=10)


def _output_not_produced() -> onnx.ModelProto:
    return build_model([oh.make_node("Relu", ["x"], ["y"])], [("x", F, [2, 3])], [("ghost", F, [2, 3])])


def _sparse_constant() -> onnx.ModelProto:
    """A valid model onnx_ir cannot read (a Constant holding a sparse tensor): refused, naming the node and why."""
    values = oh.make_tensor("values", F, [2], [1.0, 2.0])
    indices = oh.make_tensor("indices", I64, [2], [0, 4])
    sparse = oh.make_sparse_tensor(values, indices, [2, 3])
    nodes = [
        oh.make_node("Constant", [], ["c"], name="weights", sparse_value=sparse),
        oh.make_node("Add", ["x", "c"], ["y"]),
    ]
    return build_model(nodes, [("x", F, [2, 3])], [("y", F, [2, 3])])


INVALID = [  # how the model is made, extra options, what the error line says after the file's name
    pytest.param(
        _missing_initializer,
        (),
        r"node 'conv0' \(Conv\): input 'W' is not defined by any node, input or "
        r"initializer$",
        id="missing-initializer",
    ),
    pytest.param(
        _unknown_op,
        (),
        r"node 'foo' \(FooBar\): fails the ONNX checker: No Op registered for FooBar",
        id="unknown-op-default-domain",
    ),
    pytest.param(
        _custom_domain_without_opset_import,
        (),
        r"node 'mine' \(MyOp\): fails the ONNX checker: No opset import for domain 'com.example'",
        id="custom-domain-without-opset-import",
    ),
    pytest.param(
        _custom_domain("com.example", "MyOp"),
        ("--strict",),  # without --strict: written, with a warning
        r"cannot be verified, no runtime runs it \(onnxruntime: .*MyOp.*\); rerun with --no-verify$",
        id="custom-domain-op-no-runtime-strict",
    ),
    pytest.param(
        _if_with(oh.make_node("Add", ["x"], ["out_then"], name="bad_add")),
        (),
        r"node 'branch' \(If\): fails the ONNX checker: Node\(bad_add\) .*input size 1",
        id="if-invalid-subgraph",
    ),
    pytest.param(
        _if_with(oh.make_node("Add", ["x", "ghost"], ["out_then"], name="bad_add")),
        (),
        r"node 'branch' \(If\): input 'ghost' is not defined",
        id="if-subgraph-reads-undefined-value",
    ),
    pytest.param(
        _loop_body_missing_condition,
        (),
        r"node 'loop' \(Loop\): fails the ONNX checker: .*Expected 2",
        id="loop-body-without-condition-output",
    ),
    pytest.param(
        _missing_external_file,
        (),
        r"external weights cannot be loaded: .*weights-that-were-never-copied",
        id="external-data-file-missing",
    ),
    pytest.param(
        _unknown_rank_input,
        (),
        r"fails the ONNX checker: graph input 'x' has no shape \(unknown rank\)",
        id="unknown-rank-input",
    ),
    pytest.param(
        _sparse_constant,
        (),
        r"cannot be read into the IR \(node 'weights' \(ai\.onnx::Constant\)\): Sparse tensors are not supported yet$",
        id="sparse-constant-unreadable",
    ),
    pytest.param(
        _output_not_produced,
        (),
        r"fails the ONNX checker: Graph output 'ghost' is not an output of any node",
        id="output-not-produced",
    ),
]


# --------------------------------------------------------------------------------------------------
# the table


def _save(model: onnx.ModelProto, path: Path, external: bool = False) -> Path:
    if external:
        onnx.save(
            model,
            str(path),
            save_as_external_data=True,
            all_tensors_to_one_file=True,
            location=path.name + ".data",
            size_threshold=0,
        )
        assert (path.parent / (path.name + ".data")).stat().st_size > 0
    else:
        path.write_bytes(model.SerializeToString())
    return path


def _attributes(node: onnx.NodeProto) -> list[object]:
    """Attributes byte for byte; of a body, its interface (inputs and outputs, names and types) and op types."""

    def form(a: onnx.AttributeProto) -> object:
        if a.type == onnx.AttributeProto.GRAPH:
            return (
                a.name,
                [v.SerializeToString(deterministic=True) for v in [*a.g.input, *a.g.output]],
                sorted(n.op_type for n in a.g.node),
            )
        return a.SerializeToString(deterministic=True)

    return [form(a) for a in node.attribute]


@pytest.mark.parametrize("case", VALID)
def test_valid_model_is_optimized_around(case: Valid, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = case.make()
    source = _save(model, tmp_path / "in.onnx", case.external)
    out, report_json = tmp_path / "out.onnx", tmp_path / "report.json"
    code = main(["optimize", str(source), "-o", str(out), "--report-json", str(report_json), *case.options])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert stderr == "" and "Traceback" not in stdout
    optimized = onnx.load(str(out))
    onnx.checker.check_model(optimized, full_check=True)
    assert [(v.name, v.type) for v in optimized.graph.input] == [(v.name, v.type) for v in model.graph.input]
    assert [o.name for o in optimized.graph.output] == [o.name for o in model.graph.output]
    read = {o.name for o in optimized.graph.output} | {i for n in optimized.graph.node for i in n.input}
    read |= {
        i
        for n in optimized.graph.node
        for a in n.attribute
        if a.type == onnx.AttributeProto.GRAPH
        for m in a.g.node
        for i in m.input
    }
    assert [t.name for t in optimized.graph.initializer if t.name not in read] == [], "dead initializers"
    ops = [n.op_type for n in optimized.graph.node]
    for op, count in case.ops.items():
        assert ops.count(op) == count, (op, ops)
    for op in case.intact:
        (before,), (after,) = ([n for n in m.graph.node if n.op_type == op] for m in (model, optimized))
        assert (after.domain, _attributes(after)) == (before.domain, _attributes(before)), op
    report = json.loads(report_json.read_text())
    if case.verified:
        assert report["verification"]["ok"] and report["verification"]["runtime"] == "onnxruntime"
    else:
        assert "verification" not in report


@pytest.mark.parametrize(("make", "options", "says"), INVALID)
def test_invalid_model_is_refused_in_one_line(
    make: Callable[[], onnx.ModelProto],
    options: tuple[str, ...],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    source = _save(make(), tmp_path / "bad.onnx")
    before = set(tmp_path.iterdir())
    assert main(["optimize", str(source), "-o", str(tmp_path / "out.onnx"), *options]) == 2
    stdout, stderr = capsys.readouterr()
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert re.match(re.escape(f"eqsat: error: {source}: ") + says, lines[0]), lines[0]
    assert "Traceback" not in stdout + stderr
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text
    assert set(tmp_path.iterdir()) == before, "a file was written"


# --------------------------------------------------------------------------------------------------
# verification trust: what a failure says, and bisecting to the rule responsible

MUL_DROP = Rule(
    "mul-drop",
    "test",
    "exact",
    "test",
    "Mul(x, c) -> x (deliberately unsound)",
    (rw("(Mul x c)", "x", "(is-const c)"),),
    ruleset="simplify",
)
ADD_DROP = Rule(
    "add-drop",
    "test",
    "exact",
    "test",
    "Add(x, c) -> x (deliberately unsound)",
    (rw("(Add x c)", "x", "(is-const c)"),),
    ruleset="simplify",
)


def _scaled_sandwich() -> onnx.ModelProto:
    """x -> Transpose -> Mul(2) -> Relu -> Add(1) -> Transpose -> y: sound rules fire as well as the bad ones."""
    nodes = [
        oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
        oh.make_node("Mul", ["t", "k"], ["m"]),
        oh.make_node("Relu", ["m"], ["r"]),
        oh.make_node("Add", ["r", "one"], ["a"]),
        oh.make_node("Transpose", ["a"], ["y"], perm=[0, 3, 1, 2]),
    ]
    return build_model(
        nodes,
        [("x", F, [1, 3, 4, 5])],
        [("y", F, [1, 3, 4, 5])],
        {"k": np.full((1, 1, 1, 3), 2.0, np.float32), "one": np.ones((1, 1, 1, 3), np.float32)},
    )


def test_failed_verification_names_output_element_and_rules() -> None:
    with pytest.raises(eqsat.VerificationError) as failure:
        eqsat.optimize(_scaled_sandwich(), extra_rules=[MUL_DROP], strict=True)
    message = str(failure.value)
    assert "\n" not in message
    assert re.match(
        r"<model>: verification failed on output 'y': .* at \[\d+, \d+, \d+, \d+\]: expected \S+, got \S+; "
        r"rules fired: .*mul-drop.*; rerun with --bisect to find the rule responsible; output not written$",
        message,
    ), message
    assert "transpose-sink-binary-const" in message  # every rule that fired, sound ones included
    assert failure.value.bisection is None and failure.value.report.verification.first_failure.name == "y"


@pytest.mark.slow  # bisection: many whole runs
def test_find_culprit_names_the_unsound_rule() -> None:
    from eqsat.bisect import find_culprit

    found = find_culprit(_scaled_sandwich(), extra_rules=[MUL_DROP])
    assert found.failed and found.confirmed and found.culprit == "mul-drop", found.to_text()
    assert "mul-drop" in found.fired and len(found.fired) > 3
    assert found.summary().startswith("bisect: rule 'mul-drop' is responsible (disabling it alone")
    assert found.probes[-1].ok and found.probes[-1].disabled == ("mul-drop",)
    assert len(found.probes) <= 3 + len(found.fired).bit_length() + 1  # a binary search, not one probe per rule


@pytest.mark.slow  # bisection: many whole runs
def test_find_culprit_finds_two_independent_unsound_rules() -> None:
    from eqsat.bisect import find_culprit

    found = find_culprit(_scaled_sandwich(), extra_rules=[MUL_DROP, ADD_DROP])
    assert found.confirmed and found.culprits == ("mul-drop", "add-drop"), found.to_text()
    assert found.culprit is None
    assert found.summary().startswith("bisect: rules 'mul-drop', 'add-drop' are responsible (verification passes only")


@pytest.mark.slow  # bisection: many whole runs
def test_bisection_reads_and_normalizes_the_model_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """`eqsat.optimize` that drops a rule: every probe saturates the session's loaded model; nothing is read,
    checked or folded again (the original's outputs are computed once too: tests/test_verify_inputs.py)."""
    from eqsat.frontend import io, normalize

    calls = {"load_proto": 0, "normalize_proto": 0}
    for module, name in ((io, "load_proto"), (normalize, "normalize_proto")):
        real = getattr(module, name)

        def counted(*args, _real=real, _name=name, **kwargs):  # noqa: ANN002, ANN003, ANN202
            calls[_name] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)
    result = eqsat.optimize(_scaled_sandwich(), extra_rules=[MUL_DROP])
    assert result.bisection is not None and result.bisection.culprit == "mul-drop"
    assert len(result.bisection.probes) >= 3
    assert calls == {"load_proto": 1, "normalize_proto": 1}, calls


def test_find_culprit_on_a_sound_optimization_has_nothing_to_do() -> None:
    from eqsat.bisect import find_culprit

    found = find_culprit(_scaled_sandwich())
    assert not found.failed and found.culprits == () and len(found.probes) == 1
    assert "nothing to bisect" in found.summary()


@pytest.fixture
def mul_drop_registered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """MUL_DROP registered like any rule (the CLI selects from `registry.all_rules`); the sandwich it breaks,
    saved: its path."""
    from eqsat.rewrites import registry

    registered = registry.all_rules
    monkeypatch.setattr(registry, "all_rules", lambda: (*registered(), MUL_DROP))
    return _save(_scaled_sandwich(), tmp_path / "in.onnx")


@pytest.mark.slow  # bisection: many whole runs
def test_cli_bisect_names_the_rule_in_one_line(
    mul_drop_registered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = mul_drop_registered
    out = tmp_path / "out.onnx"
    assert main(["optimize", str(source), "-o", str(out), "--bisect", "--strict"]) == 3
    stdout, stderr = capsys.readouterr()
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith(f"eqsat: error: {source}: verification failed on output 'y'")
    assert "; bisect: rule 'mul-drop' is responsible (disabling it alone makes verification pass; " in stderr
    assert stderr.rstrip().endswith("output not written") and not out.exists()
    # the culprit, disabled by name, gives a verified output
    assert main(["optimize", str(source), "-o", str(out), "--disable", "mul-drop"]) == 0
    assert out.exists()
    # --report prints every probe; --report-json writes the failed report with the bisection
    out.unlink()
    capsys.readouterr()
    report_json = tmp_path / "report.json"
    assert (
        main(
            [
                "optimize",
                str(source),
                "-o",
                str(out),
                "--bisect",
                "--strict",
                "--report",
                "--report-json",
                str(report_json),
            ]
        )
        == 3
    )
    assert re.search(r"^  probe \d+: pass with disabled mul-drop ", capsys.readouterr().out, re.MULTILINE)
    report = json.loads(report_json.read_text())
    assert not report["verification"]["ok"] and report["verification"]["outputs"][0]["where"].startswith("at [")
    assert "mul-drop" in report["saturation"]["rules_fired"]
    assert report["bisection"]["culprits"] == ["mul-drop"] and report["bisection"]["confirmed"]
    assert not out.exists()


# no valid model refused: by default the rule responsible is dropped and the model re-optimized without it


@pytest.mark.slow  # bisection: many whole runs
def test_optimize_drops_the_unsound_rule_and_returns_a_verified_model(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    result = eqsat.optimize(_scaled_sandwich(), extra_rules=[MUL_DROP], output=out)
    assert result.report.verification.ok and out.exists()
    (warning,) = result.report.warnings
    assert warning.startswith(
        "rule 'mul-drop' unsound on this model: verification failed with it (verification failed on output 'y'"
    ), warning
    assert result.bisection.culprit == "mul-drop"
    assert "mul-drop" not in result.report.saturation.rules_fired
    assert "transpose-sink-binary-const" in result.report.saturation.rules_fired  # the sound rules still ran
    assert "warning: rule 'mul-drop' unsound" in result.report.to_text()
    assert result.report.to_dict()["warnings"] == [warning]
    # the written model computes what the input does
    x = np.random.default_rng(0).standard_normal((1, 3, 4, 5)).astype(np.float32)
    import onnxruntime as ort

    def run(proto: onnx.ModelProto) -> np.ndarray:
        return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[
            0
        ]

    np.testing.assert_allclose(run(onnx.load(out)), run(_scaled_sandwich()), rtol=1e-5, atol=1e-5)


@pytest.mark.slow  # bisection: many whole runs
def test_bisection_reuses_the_outputs_of_the_original(monkeypatch: pytest.MonkeyPatch) -> None:
    """The original's outputs are computed once, then passed to every probe: one search for inputs in all."""
    from eqsat.check import verify as verification

    searches = []
    search = verification._Search

    class Counted(search):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            searches.append(args[0].graph.name)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(verification, "_Search", Counted)
    result = eqsat.optimize(_scaled_sandwich(), extra_rules=[MUL_DROP])
    assert result.bisection.culprit == "mul-drop" and len(result.bisection.probes) > 2
    assert len(searches) == 1


@pytest.mark.slow  # bisection: many whole runs
def test_optimize_drops_two_unsound_rules() -> None:
    result = eqsat.optimize(_scaled_sandwich(), extra_rules=[MUL_DROP, ADD_DROP])
    assert result.report.verification.ok and result.bisection.culprits == ("mul-drop", "add-drop")
    assert result.report.warnings[0].startswith("rules 'mul-drop', 'add-drop' unsound on this model")


def test_optimize_without_unsound_rules_has_no_warning() -> None:
    result = eqsat.optimize(_scaled_sandwich())
    assert result.report.warnings == [] and result.bisection is None


@pytest.mark.slow  # bisection: many whole runs
def test_cli_drops_the_unsound_rule_with_a_warning(
    mul_drop_registered: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = mul_drop_registered
    out, report_json = tmp_path / "out.onnx", tmp_path / "report.json"
    assert main(["optimize", str(source), "-o", str(out), "--report-json", str(report_json)]) == 0
    stdout, stderr = capsys.readouterr()
    assert len(stderr.splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith("eqsat: warning: rule 'mul-drop' unsound on this model: verification failed with it")
    assert "--strict refuses instead" in stderr and out.exists()
    report = json.loads(report_json.read_text())
    assert report["verification"]["ok"] and report["warnings"] == [stderr.strip().removeprefix("eqsat: warning: ")]
    assert report["bisection"]["culprits"] == ["mul-drop"] and "mul-drop" not in report["saturation"]["rules_fired"]
    # --strict: today's refusal, nothing written
    out.unlink()
    assert main(["optimize", str(source), "-o", str(out), "--strict"]) == 3
    stderr = capsys.readouterr().err
    assert stderr.startswith(f"eqsat: error: {source}: verification failed on output 'y'") and not out.exists()
    assert stderr.rstrip().endswith("rerun with --bisect to find the rule responsible; output not written")


def test_the_command_in_a_process_of_its_own(tmp_path: Path) -> None:
    """`python -m eqsat` (eqsat.ui.cli.run_command) ends without the interpreter's teardown: its exit code, its
    flushed output and the written model must be exactly what `main` produced."""
    import subprocess
    import sys

    nodes = [oh.make_node("Relu", ["x"], ["r"]), oh.make_node("Relu", ["r"], ["y"])]
    source = tmp_path / "in.onnx"
    onnx.save(build_model(nodes, [("x", TP.FLOAT, [2, 3])], [("y", TP.FLOAT, [2, 3])]), source)
    out = tmp_path / "out.onnx"
    done = subprocess.run(
        [sys.executable, "-m", "eqsat", "optimize", str(source), "-o", str(out), "--report-json", "-"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["nodes_after"] == 1 and len(onnx.load(out).graph.node) == 1
    missing = subprocess.run(
        [sys.executable, "-m", "eqsat", "optimize", str(tmp_path / "no.onnx"), "-o", str(out)],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such file" in missing.stderr
