"""Cost models and extractors on real models: each ONNX graph is turned directly into a trivial e-graph
(one class per value, one node per class; multi-output ops become Opaque + Out, as the encoder does) so
that the roofline model sees real ops, shapes and dtypes."""

from __future__ import annotations

import collections
import math
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from eqsat.engine.egraph import EClass, EGraph, ENode  # noqa: E402
from eqsat.extract import EXTRACTORS, extract, roofline, targets  # noqa: E402

pytestmark = pytest.mark.slow  # python -m pytest -m "not slow" leaves these out (README)

MODELS = sorted((Path(__file__).parent / "models").glob("*.onnx"))  # the bundled ones: a clone has no ../shared


def dtype_name(elem_type: int) -> str | None:
    return onnx.TensorProto.DataType.Name(elem_type) if elem_type else None


def to_egraph(path: Path) -> EGraph:
    """A one-node-per-class e-graph of the model (after ONNX shape inference)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)), data_prop=True)
    g = model.graph
    facts: dict[str, tuple[tuple[int, ...] | None, str | None]] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        shape = tuple(dims) if t.HasField("shape") and all(d >= 0 for d in dims) else None
        facts[vi.name] = (shape, dtype_name(t.elem_type))
    for init in g.initializer:
        facts[init.name] = (tuple(init.dims), dtype_name(init.data_type))
    nodes: list[ENode] = []
    classes: list[tuple[str, tuple[int, ...] | None, str | None, bool]] = []
    value_class: dict[str, int] = {}

    def new(
        op: str, kids: tuple[int, ...], attrs: tuple, sort: str = "T", shape=None, dtype=None, const: bool = False
    ) -> int:
        classes.append((sort, shape, dtype, const))
        nodes.append(ENode(len(nodes), op, len(classes) - 1, kids, attrs))
        return len(classes) - 1

    absent = new("Absent", (), (), const=True)
    for vi in g.input:
        value_class[vi.name] = new("Input", (), (vi.name,), shape=facts[vi.name][0], dtype=facts[vi.name][1])
    for init in g.initializer:
        value_class[init.name] = new(
            "Const", (), (init.name,), shape=facts[init.name][0], dtype=facts[init.name][1], const=True
        )
    for i, n in enumerate(g.node):
        kids = tuple(value_class[x] if x else absent for x in n.input)
        const = bool(kids) and all(classes[k][3] for k in kids) or n.op_type == "Constant"
        if len(n.output) == 1 and n.domain in ("", "ai.onnx"):
            shape, dtype = facts.get(n.output[0], (None, None))
            value_class[n.output[0]] = new(n.op_type, kids, (), shape=shape, dtype=dtype, const=const)
            continue
        lst = new("TNil", (), (), sort="TL")
        for k in reversed(kids):
            lst = new("TCons", (k, lst), (), sort="TL")
        opaque = new("Opaque", (lst,), (f"{n.domain}::{n.op_type}#{i}",), sort="N")
        for j, out in enumerate(n.output):
            shape, dtype = facts.get(out, (None, None))
            value_class[out] = new("Out", (opaque,), (j,), shape=shape, dtype=dtype)
    roots = tuple(value_class[o.name] for o in g.output)
    eclasses = tuple(
        EClass(i, sort, (i,), shape, dtype, const) for i, (sort, shape, dtype, const) in enumerate(classes)
    )
    return EGraph(tuple(nodes), eclasses, roots)


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_real_models_cost_and_extract(path: Path) -> None:
    g = to_egraph(path)
    per_op: dict[str, collections.Counter] = {}
    for target in targets():
        model = roofline(target)
        costs = model.node_costs(g)
        for n, c in zip(g.nodes, costs):
            assert c >= 0 and math.isfinite(c), (target, n.op, c)
            if g.classes[n.eclass].constant:
                assert c == 0.0
            if n.op == "Transpose" and not g.classes[n.eclass].constant:
                assert c > 0
        per_op[target] = collections.Counter()
        for n, c in zip(g.nodes, costs):
            per_op[target][n.op] += c
        results = [extract(g, None, model, name) for name in EXTRACTORS]
        for r in results:
            r.check()
        dag = {r.extractor: r.dag_cost(costs) for r in results}
        assert dag["ilp"] == pytest.approx(dag["tree"]) == pytest.approx(dag["greedy-dag"])  # nothing to choose
        assert dag["tree"] == pytest.approx(sum(costs[g.classes[c].nodes[0]] for c in results[0].choice))
    # the npu cannot run fp32 (or LayerNormalization, Gelu): a model in fp32 costs more there than on cpu
    contractions = [n for n in g.nodes if n.op in ("Conv", "MatMul", "Gemm")]
    if contractions and all(g.classes[n.children[0]].dtype == "FLOAT" for n in contractions):
        assert sum(per_op["npu"].values()) > sum(per_op["cpu"].values())
