"""Normalization: the graph made canonical before encoding.

Shape inference with data propagation, constant and static-shape folding (eqsat.frontend.fold), Ifs a
rank requirement decides inlined (eqsat.frontend.decided_ifs), run-time shape chains made static
(eqsat.frontend.shape_chains), zero recurrent states dropped (eqsat.frontend.zero_states).
"""

from __future__ import annotations

from typing import Iterator

import onnx
import onnx_ir as ir

from eqsat.frontend import interface, io, weights
from eqsat.frontend.decided_ifs import decide_ifs
from eqsat.frontend.fold import fold, infer_light, infer_model, infer_proto, infer_shapes
from eqsat.frontend.shape_chains import make_targets_static
from eqsat.frontend.symbols import SHAPE_FACTS, symbolic_shapes
from eqsat.frontend.zero_states import drop_zero_states

#: `ir.Model.meta` key of the normalized model: the Ifs whose condition its rank requirements decided.
DECIDED_IFS = "eqsat.decided_ifs"


def normalize(model: ir.Model) -> ir.Model:
    """Shape inference, constant/static-shape folding, Constant lifting, dead-node removal (in place)."""
    infer_shapes(model)
    if fold(model):
        infer_shapes(model)
    return model


def normalize_proto(proto: onnx.ModelProto, label: str = "<model>") -> tuple[ir.Model, onnx.ModelProto]:
    """`normalize` for a validated proto: the IR to encode and its shape-annotated proto.

    Shape inference runs on protos (the IR pass round-trips the whole model through protobuf twice per
    call: 20k nodes cost 3 s more). It runs again after folding only where that can add facts: some
    value still lacks a static shape, and folding computed new constants, rewrote nodes, or left a value of
    unknown type, rank or dim (`_can_add_facts`; folding keeps every shape already inferred valid). Ifs whose condition
    the model's rank requirements decide (eqsat.frontend.decided_ifs) are inlined; `model.meta[DECIDED_IFS]` says which.

    Weights are held once: the IR's large initializers (eqsat.frontend.weights.LARGE_BYTES) are numpy arrays
    (what encoding and lowering read as they are), and the returned proto, which lowering reads for
    everything but initializers, is without them. A model with If/Loop/Scan bodies keeps them in the proto
    too (its bodies are cut out of it with the outer initializers they read).
    """
    prepared = _defaults_as_inputs(_sparse_as_inputs(io.without_negative_dims(proto)))  # no -1 dims left
    shared = not _has_bodies(prepared)
    if shared:
        model, inferred = _inferred_ir(weights.Light.of(prepared), label)
    else:
        inferred = infer_proto(prepared)
        model = io.from_proto(inferred, label)
    constants = _constant_names(model.graph)
    folded = fold(model)
    decided = decide_ifs(model, label)
    if decided:
        folded = fold(model) or True
    facts = symbolic_shapes(model.graph)
    rewritten = make_targets_static(model, facts) | drop_zero_states(model.graph)  # both free nodes for the folder
    if rewritten:
        folded = fold(model, infer=False) or True
    reinfer = (
        folded
        and not _all_shapes_static(model.graph)
        and _can_add_facts(model.graph, constants, bool(decided) or rewritten)
    )
    if reinfer:
        if shared:
            inferred = _reinferred(model)
        else:
            inferred = infer_model(model)
            model = io.from_proto(inferred, label)
    elif folded:
        if shared:
            light = weights.Light.of_ir(model)
            inferred = light.put_back(light.proto, large=False)
        else:
            inferred = io.to_proto(model)
    if not (rewritten or reinfer):  # the graph and its shapes are those the facts were computed on: encoding reads them
        model.meta[SHAPE_FACTS] = facts
    model.meta[DECIDED_IFS] = decided
    return model, inferred


def _inferred_ir(light: weights.Light, label: str) -> tuple[ir.Model, onnx.ModelProto]:
    """The IR of the model `light` was made of, with shapes inferred and its large initializers shared (not
    copied), and its inferred proto without them."""
    inferred = infer_light(light)
    model = light.attach(io.from_proto(inferred, label))
    return model, light.put_back(inferred, large=False)


def _reinferred(model: ir.Model) -> onnx.ModelProto:
    """Shape inference again on `model` (no bodies), its large initializers kept out of the round trip: the
    shapes inferred are set on the model's own values (what deserializing the inferred proto would give them,
    without deserializing every node again), and the inferred proto, without the large initializers, returned."""
    light = weights.Light.of_ir(model)
    inferred = infer_light(light)
    graph = model.graph
    values = {v.name: v for v in graph.initializers.values()} | {o.name: o for n in graph for o in n.outputs if o.name}
    for info in (*inferred.graph.value_info, *inferred.graph.output):
        value = values.get(info.name)
        if value is not None:
            ir.serde.deserialize_value_info_proto(info, value)
    return light.put_back(inferred, large=False)


def _has_bodies(proto: onnx.ModelProto) -> bool:
    return any(
        a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for n in proto.graph.node for a in n.attribute
    )


def _defaults_as_inputs(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model without the initializers that are graph inputs from IR version 4 on (in a copy when it has
    some): there they are default values a caller may override (onnxruntime lets one feed them), so eqsat reads
    them as the inputs they are and folds nothing of them; eqsat.frontend.interface.restore writes the defaults
    back. In IR version 3 every initializer is an input and none may be fed: those stay constants."""
    defaults = set(interface.overridable(proto))  # none below IR version 4
    if not defaults:
        return proto
    proto = io.copy_proto(proto)
    kept = [t for t in proto.graph.initializer if t.name not in defaults]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(kept)
    return proto


def _sparse_as_inputs(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The model with each top-level sparse initializer standing as a graph input of its dense type, in a copy
    when there is one. onnx_ir cannot hold sparse tensors; only ops of custom domains (kept as they are) and
    graph outputs can read them, and a graph input is never rewritten: eqsat.frontend.interface.restore puts the
    sparse initializers back in place of these inputs."""
    if not proto.graph.sparse_initializer:
        return proto
    proto = io.copy_proto(proto)
    for sparse in proto.graph.sparse_initializer:
        proto.graph.input.append(
            onnx.helper.make_tensor_value_info(sparse.values.name, sparse.values.data_type, list(sparse.dims))
        )
    del proto.graph.sparse_initializer[:]
    return proto


def _constant_names(graph: ir.Graph) -> set[str]:
    constants = {n.outputs[0].name for n in graph if n.op_type == "Constant" and n.domain in ("", "ai.onnx")}
    return set(graph.initializers) | {name for name in constants if name}


def _can_add_facts(graph: ir.Graph, constants: set[str], rewritten: bool) -> bool:
    """Whether shape inference after folding can learn what it did not before: from values folding computed
    (a constant not among the `constants` before; the folder lifts every Constant node), nodes normalizing
    `rewritten` (an If inlined, a Reshape target made constant, a zero state dropped), or for a value whose
    type, rank or a dim is still unknown. Otherwise folding only removed or
    bypassed nodes (an Identity, a dead branch), and every value left keeps the facts it had: a symbolic dim
    stays the symbol (rn200: 0.13 s of re-inference for nothing)."""
    return rewritten or not set(graph.initializers) <= constants or not _all_shapes_known(graph)


def _all_shapes_known(graph: ir.Graph) -> bool:
    """Every node output has a type and a shape whose dims are sizes or named symbols."""
    return all(
        v.dtype is not None and v.shape is not None and all(isinstance(d, int) or d.value is not None for d in v.shape)
        for v in _node_outputs(graph)
    )


def _all_shapes_static(graph: ir.Graph) -> bool:
    return all(v.dtype is not None and v.shape is not None and v.shape.is_static() for v in _node_outputs(graph))


def _node_outputs(graph: ir.Graph) -> Iterator[ir.Value]:
    """The named outputs of the graph's nodes: the values shape inference gives facts to."""
    return (v for node in graph for v in node.outputs if v.name)
