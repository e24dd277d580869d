"""If conditions that the model's own rank requirements decide.

torch exports `squeeze(x, d)` on a dynamic dim as `If(Shape(x)[d] == 1, Squeeze(x, d), x)`, and its recurrent
layers test the rank of what they get at run time (`If(Size(Shape(v)) != 2, Unsqueeze(v), v)`). Where one
branch of such an If can only lead to an op whose input then has a rank the ONNX spec forbids (an LSTM's X
of rank 5), the model fails on every input that takes that branch: for every input on which the model runs,
the condition has the other value, and the If is that other branch.

The proof is by folding: a copy of the model with the condition fixed to the refuted value is folded (the
folder inlines constant Ifs and evaluates Shape/Size of values of known rank), and an op of RANK_RULES gets
an input of a forbidden rank. The condition is then fixed to the other value in the model itself, and the
usual folding inlines it. Outputs do not change on any input the original runs on; inputs that it rejected
(a size the exporter's trace did not allow) may run afterwards, as they do after onnxscript's optimizer.

Only top-level Ifs whose branches give outputs of different ranks are tried (at most MAX_TRIALS, fewer in
large graphs: MAX_TRIAL_NODES).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir

from eqsat.frontend import io
from eqsat.frontend.fold import fold, infer_proto, quiet_folder
from eqsat.frontend.names import add_constant
from eqsat.ops import STATE_INPUTS


#: (op, input index) -> the only rank that input may have: the ONNX operator spec, and what onnxruntime enforces
#: ("Input X must have 3 dimensions only"; a Gemm is not here: onnxruntime also runs a rank-1 A).
RANK_RULES: dict[tuple[str, int], int] = {
    **{(op, k): 3 for op in STATE_INPUTS for k in (0, 1, 2, 5)},  # the recurrent ops' X, W, R, initial_h
    ("RNN", 3): 2,
    ("GRU", 3): 2,
    ("LSTM", 3): 2,  # B
    ("LSTM", 6): 3,
    ("LSTM", 7): 2,  # initial_c, P
}
#: If nodes tried per graph (each trial folds a copy of the whole model), and the most nodes all the tried
#: copies may hold together: a deterministic bound on the work (a large model gets fewer trials).
MAX_TRIALS = 8
MAX_TRIAL_NODES = 50_000


def decide_ifs(model: ir.Model, label: str = "<model>") -> list[str]:
    """Fix the condition of each top-level If whose other branch breaks a rank rule; one line per If decided
    (which branch, and the op whose input rank refutes the other). A trial is settled: folded, then its
    shapes inferred from its inputs and constants alone (declared intermediate shapes are not enforced by
    runtimes, so they prove nothing)."""
    decided: list[str] = []
    affordable = min(MAX_TRIALS, MAX_TRIAL_NODES // max(1, 2 * len(model.graph)))
    candidates = [(i, node) for i, node in enumerate(model.graph) if _ranks_differ(node)][:affordable]
    # The model's proto while no decision has changed it: each trial is read from it.
    proto: onnx.ModelProto | None = None
    for index, node in candidates:  # a decision replaces one condition input: node order and indices stay
        for refuted in (False, True):
            try:
                proto = proto if proto is not None else io.to_proto(model)
                trial = io.from_proto(proto, label)
                _fix_condition(trial, list(trial.graph)[index], refuted, index)
                with quiet_folder():  # the refuted branch is inconsistent by design: the folder says so
                    broken = _broken_rank_rule(settled(trial))
            except Exception:  # noqa: BLE001 - a trial that cannot be folded proves nothing
                broken = None
            if broken is not None:
                _fix_condition(model, node, not refuted, index)
                proto = None
                branch = "then" if not refuted else "else"
                decided.append(f"If {node.name!r}: {branch} branch kept; the other makes {broken}")
                break
    return decided


def _ranks_differ(node: ir.Node) -> bool:
    """An If with a run-time condition whose branches give some output of two different (known) ranks."""
    if node.op_type != "If" or node.domain not in ("", "ai.onnx") or not node.inputs or node.inputs[0] is None:
        return False
    if node.inputs[0].const_value is not None:
        return False
    then, other = node.attributes.get("then_branch"), node.attributes.get("else_branch")
    if then is None or other is None:
        return False
    for a, b in zip(then.value.outputs, other.value.outputs):
        if a.shape is not None and b.shape is not None and len(a.shape) != len(b.shape):
            return True
    return False


def _fix_condition(model: ir.Model, node: ir.Node, value: bool, index: int) -> None:
    const = add_constant(model.graph, f"{node.name or 'If'}_decided_condition_{index}", np.array(value, dtype=np.bool_))
    node.replace_input_with(0, const)


def _broken_rank_rule(proto: onnx.ModelProto) -> str | None:
    """'<op> <name>: input k of rank r (spec: n)' for the first top-level node breaking a rank rule, else None."""
    declared: dict[str, Declared] | None = None  # read once, at the first node a rule applies to
    for node in proto.graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        for k, name in enumerate(node.input):
            rank = RANK_RULES.get((node.op_type, k))
            if rank is None or not name:
                continue
            declared = declared if declared is not None else _declarations(proto.graph)
            actual = _rank(declared.get(name))
            if actual is not None and actual != rank:
                return f"{node.op_type} {node.name!r} read an input {k} of rank {actual} (spec: {rank})"
    return None


#: What gives a value its shape in the IR: a ValueInfoProto, an initializer's dims, or nothing.
Declared = onnx.ValueInfoProto | tuple[int, ...] | None


def _declarations(graph: onnx.GraphProto) -> dict[str, Declared]:
    """What each value of `graph` takes its shape from when the graph is deserialized into the IR
    (onnx_ir.serde._deserialize_graph's order): an input its declaration; an initializer its value_info, else
    its dims; a graph output its declaration; any other value (a node output, or a name read and produced by
    none) its value_info. A name in none of these has no shape."""
    infos = {info.name: info for info in graph.value_info}
    declared: dict[str, Declared] = {info.name: info for info in graph.input}
    for tensor in graph.initializer:
        if tensor.name and tensor.name not in declared:
            declared[tensor.name] = infos.get(tensor.name, tuple(tensor.dims))
    declared.update({info.name: info for info in graph.output})
    for name, info in infos.items():  # a node output, or a name read and produced by none
        declared.setdefault(name, info)
    return declared


def _rank(declared: Declared) -> int | None:
    if declared is None or isinstance(declared, tuple):
        return None if declared is None else len(declared)
    shape = ir.serde.deserialize_type_proto_for_shape(declared.type)
    return None if shape is None else len(shape)


def settled(model: ir.Model) -> onnx.ModelProto:
    """`model` folded (in place), then serialized with its shapes inferred anew from its inputs and constants:
    every intermediate and output shape declaration dropped first (runtimes do not enforce them).

    The proto is read as it is (`_broken_rank_rule`): deserializing it again only to read ranks cost silero_vad
    a whole-model deserialization per trial (~2 ms each)."""
    fold(model)
    proto = io.to_proto(model)
    for graph in io.all_graphs(proto.graph):
        del graph.value_info[:]
        for value in [*graph.output, *(graph.input if graph is not proto.graph else [])]:
            if value.type.HasField("tensor_type"):
                value.type.tensor_type.ClearField("shape")
    return infer_proto(proto)
