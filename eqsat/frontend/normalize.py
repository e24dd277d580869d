"""Normalization: the graph made canonical before encoding.

Shape inference with data propagation, constant and static-shape folding (eqsat.frontend.fold), Ifs a
rank requirement decides inlined (eqsat.frontend.decided_ifs), run-time shape chains made static
(eqsat.frontend.shape_chains), zero recurrent states dropped (eqsat.frontend.zero_states).
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

from eqsat.frontend import io, weights
from eqsat.frontend.decided_ifs import decide_ifs
from eqsat.frontend.fold import fold, infer_light, infer_model, infer_proto, infer_shapes
from eqsat.frontend.shape_chains import make_targets_static
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
    value still lacks a static shape (folding keeps every shape already inferred valid). Ifs whose condition
    the model's rank requirements decide (eqsat.frontend.decided_ifs) are inlined; `model.meta[DECIDED_IFS]` says which.

    Weights are held once: the IR's large initializers (eqsat.frontend.weights.LARGE_BYTES) are numpy arrays
    (what encoding and lowering read as they are), and the returned proto, which lowering reads for
    everything but initializers, is without them. A model with If/Loop/Scan bodies keeps them in the proto
    too (its bodies are cut out of it with the outer initializers they read).
    """
    prepared = _sparse_as_inputs(io.without_negative_dims(proto))  # loaded protos have no -1 dims left
    shared = not _has_bodies(prepared)
    if shared:
        model, inferred = _inferred_ir(weights.Light.of(prepared), label)
    else:
        inferred = infer_proto(prepared)
        model = io.from_proto(inferred, label)
    folded = fold(model)
    decided = decide_ifs(model, label)
    if decided:
        folded = fold(model) or True
    if make_targets_static(model) | drop_zero_states(model.graph):  # both: each frees nodes for the folder
        folded = fold(model, infer=False) or True
    if folded and not _all_shapes_static(model.graph):
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


def _all_shapes_static(graph: ir.Graph) -> bool:
    return all(
        v.dtype is not None and v.shape is not None and v.shape.is_static()
        for node in graph
        for v in node.outputs
        if v.name
    )
