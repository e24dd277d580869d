"""Constant and static-shape folding (onnxscript's folder) and shape inference, within bounds.

`fold` folds what is constant, lifts Constant nodes to initializers and drops dead nodes, with size caps so
Expand/Tile/ConstantOfShape cannot blow the file up, never evaluating strings, never writing an op form newer
than the model's opset, and leaving a node the folder fails on as it is. `infer_proto` runs ONNX shape
inference with data propagation, best effort.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import re
from typing import TYPE_CHECKING, Iterator

import onnx
import onnx_ir as ir

from eqsat.frontend import weights
from eqsat.frontend.names import fresh_name, value_names

if TYPE_CHECKING:
    from onnx_ir.passes.common import LiftConstantsToInitializersPass

#: Largest tensor (in elements) that folding may materialize; bigger results stay as computations.
FOLD_OUTPUT_LIMIT = 1 << 20
#: Largest constant input (in elements) that folding will read.
FOLD_INPUT_LIMIT = 1 << 20
#: Largest ConstantOfShape (in elements) folded: onnxscript keeps them all (a compact form of a big fill).
FOLD_FILL_LIMIT = 1 << 10


def fold(model: ir.Model, infer: bool = True) -> bool:
    """Fold constants and static-shape sub-graphs, lift Constant nodes, drop dead nodes; True if changed.

    The folder never sees the nodes it would rewrite into forms newer than the model's opset
    (`NEWER_FORMS_BELOW_13`), and a node it fails on stays as it is: its op is hidden and the fold rerun
    (what the failed attempt folded before the failure is already valid).
    """
    from onnx_ir.passes import common as passes

    # The folder's own module (what `onnxscript.optimizer.fold_constants` calls for an ir.Model): the command
    # imports it without onnxscript's package `__init__`s (eqsat.ui.startup.OPENED).
    from onnxscript.optimizer._constant_folding import fold_constants

    # Per-node shape inference inside the folder only pays off where shapes are computed at run time
    # (Shape/Size chains); elsewhere it costs 6x the fold itself (20k nodes: 1.3 s against 0.2 s).
    reads_shapes = infer and any(n.op_type in ("Shape", "Size") for n in model.graph)
    hidden = set(NEWER_FORMS_BELOW_13) if model.opset_imports.get("", 1) < 13 else set()
    folded_any = False
    for _ in range(FOLD_ATTEMPTS):
        try:
            with _hidden_from_folder(model, hidden), _sum_names_hidden(model), _omitted_outputs_named(model):
                with quiet_folder():
                    folded = fold_constants(
                        model,
                        onnx_shape_inference=reads_shapes,
                        should_fold=_should_fold,
                        input_size_limit=FOLD_INPUT_LIMIT,
                        output_size_limit=FOLD_OUTPUT_LIMIT,
                    )
            folded_any = folded.modified
            break
        except RuntimeError as exc:  # "Error during constant folding for node 'n' (domain::Op)"
            failed = _FOLDER_FAILURE.search(str(exc))
            if failed is None or failed["op"] in hidden:
                raise
            hidden.add(failed["op"])
            folded_any = True  # the failed attempt may have folded nodes before this one
    lifted = lift_constants(model)
    removed = passes.RemoveUnusedNodesPass()(model)
    _restore_positional_inputs(model)
    return bool(folded_any or lifted or removed.modified)


def _restore_positional_inputs(model: ir.Model) -> None:
    """Give back the omitted optional inputs onnx_ir's dead-node pass trims that the op's schema still counts:
    Loop(M, "") must keep its empty cond ("input size 1 not in range [min=2", onnxruntime says without it)."""
    opset = model.opset_imports.get("", 1)
    for node in model.graph.all_nodes():
        if node.domain not in ("", "ai.onnx") or node.op_type not in _POSITIONAL_OPTIONALS:
            continue
        least = _least_inputs(node.op_type, opset)
        if len(node.inputs) < least:
            node.resize_inputs(least)


#: Ops whose optional inputs come before a variadic one: the schema counts them even when omitted.
_POSITIONAL_OPTIONALS = frozenset({"Loop"})


@functools.cache
def _least_inputs(op: str, opset: int) -> int:
    return int(onnx.defs.get_schema(op, opset).min_input)


#: Ops that onnxscript's folder rewrites with Unsqueeze, Split or Squeeze taking an axes or split input, a
#: form that exists from opset 13 on: below it they are not folded.
NEWER_FORMS_BELOW_13 = frozenset({"SplitToSequence", "ConcatFromSequence"})
#: Fold reruns after a node the folder fails on (each hides one more op).
FOLD_ATTEMPTS = 8
_FOLDER_FAILURE = re.compile(r"Error during constant folding for node .* \((?P<domain>[^:()]*)::(?P<op>[^)]+)\)")
#: A domain no model imports: the folder skips a node of an unimported domain.
_HIDDEN_DOMAIN = "eqsat.hidden_from_folder"


@contextlib.contextmanager
def _hidden_from_folder(model: ir.Model, ops: set[str]) -> Iterator[None]:
    """Default-domain nodes of `ops` (in every graph) moved to a domain no model imports while inside."""
    hidden = [n for n in model.graph.all_nodes() if n.op_type in ops and n.domain in ("", "ai.onnx")] if ops else []
    domains = [n.domain for n in hidden]
    for node in hidden:
        node.domain = _HIDDEN_DOMAIN
    try:
        yield
    finally:
        for node, domain in zip(hidden, domains):
            node.domain = domain


#: The folder names the sum of two symbolic dims a and b "a+b" (onnxscript's Add evaluator), and takes dims of one
#: name as equal: a dim_param spelled so would be taken for such a sum.
_FOLDER_SUM = "+"


@contextlib.contextmanager
def _sum_names_hidden(model: ir.Model) -> Iterator[None]:
    """Dims whose names read as the folder's sums ("N+1") renamed apart while inside, then named back: the folder
    must not take an Expand to a computed shape [N + 1] for a no-op on an input declared ["N+1"]."""
    taken = {d for v in _shaped_values(model) for d in _dim_names(v)}
    sums = sorted(d for d in taken if _FOLDER_SUM in d)
    if not sums:
        yield
        return
    renamed = {name: fresh_name("eqsat_sum_dim", taken) for name in sums}
    _rename_dims(model, renamed)
    try:
        yield
    finally:  # the folder's own values included
        _rename_dims(model, {new: old for old, new in renamed.items()})


#: The name an omitted optional output (written "") has while the folder runs: it may fold the node and make that
#: output a constant, and an initializer needs a name (Dropout's mask, in inference).
_OMITTED = "eqsat_omitted_output"


@contextlib.contextmanager
def _omitted_outputs_named(model: ir.Model) -> Iterator[None]:
    """Node outputs written "" (an optional output omitted) named while inside, and unnamed again after where
    nothing reads them."""
    omitted = [v for node in model.graph.all_nodes() for v in node.outputs if not v.name]
    taken = value_names(model.graph) if omitted else set()
    for value in omitted:
        value.name = fresh_name(_OMITTED, taken)
    try:
        yield
    finally:
        outputs = set(model.graph.outputs)
        for value in omitted:
            if value.producer() is not None and not value.uses() and value not in outputs:
                value.name = ""


def _shaped_values(model: ir.Model) -> Iterator[ir.Value]:
    """The values of every graph of `model` that have a shape (graph inputs, initializers, node outputs)."""
    graph = model.graph
    for value in (*graph.inputs, *graph.initializers.values(), *(v for n in graph.all_nodes() for v in n.outputs)):
        if value.shape is not None:
            yield value


def _dim_names(value: ir.Value) -> list[str]:
    assert value.shape is not None
    return [d.value for d in value.shape.dims if isinstance(d, ir.SymbolicDim) and d.value is not None]


def _renamed(dim: int | ir.SymbolicDim, renamed: dict[str, str]) -> int | ir.SymbolicDim | str:
    return renamed.get(dim.value, dim) if isinstance(dim, ir.SymbolicDim) and dim.value is not None else dim


def _rename_dims(model: ir.Model, renamed: dict[str, str]) -> None:
    for value in _shaped_values(model):
        if any(name in renamed for name in _dim_names(value)):
            assert value.shape is not None
            value.shape = ir.Shape([_renamed(d, renamed) for d in value.shape.dims])


def lift_constants(model: ir.Model) -> bool:
    """onnx_ir's LiftConstantsToInitializersPass lifting every Constant node (`lift_all_constants`, no size
    limit), its tensor check made cheap; True if any was lifted.

    The pass reads a `value` attribute through `Attr.as_tensor`, whose `isinstance(v, TensorProtocol)` is a
    structural Protocol check (14 `hasattr`s, some computing sizes: ~50 µs per Constant, 15 ms of rapidocr's 308).
    A value of one of onnx_ir's own tensor classes implements the protocol by construction and is taken as it
    is (what `as_tensor` returns); anything else goes through the pass's own conversion, as does every other
    attribute kind. Everything else is the pass itself.
    """
    return bool(_lifter_class()(lift_all_constants=True, size_limit=0)(model).modified)


@functools.cache
def _lifter_class() -> type[LiftConstantsToInitializersPass]:
    from onnx_ir.passes.common import LiftConstantsToInitializersPass

    # onnx_ir's own tensor classes (those this onnx_ir has: another version may lack one)
    tensors = tuple(
        cls
        for cls in (
            *(getattr(ir, name, None) for name in ("Tensor", "ExternalTensor", "StringTensor", "LazyTensor")),
            getattr(ir, "PackedTensor", None),
            getattr(getattr(ir, "serde", None), "TensorProtoTensor", None),
        )
        if isinstance(cls, type)
    )

    class Lifter(LiftConstantsToInitializersPass):
        def _constant_node_attribute_to_tensor(
            self, node: ir.Node, attr_name: str, attr_value: ir.Attr, initializer_name: str
        ) -> ir.TensorProtocol | None:
            value = attr_value.value
            if attr_name == "value" and attr_value.type == ir.AttributeType.TENSOR and type(value) in tensors:
                return None if value.size < self.size_limit else value
            return super()._constant_node_attribute_to_tensor(node, attr_name, attr_value, initializer_name)

    return Lifter


def _should_fold(node: ir.Node) -> bool | None:
    """False for a node that reads or writes strings (a folded string tensor cannot be written back by
    onnx_ir); True for a ConstantOfShape of a constant shape with at most FOLD_FILL_LIMIT elements (ViT's
    class-token Expand computes its shape through one); None leaves every other node to the folder's rules."""
    if any(v is not None and v.dtype == ir.DataType.STRING for v in (*node.inputs, *node.outputs)):
        return False
    if node.op_type != "ConstantOfShape" or node.domain not in ("", "ai.onnx") or not node.inputs:
        return None
    shape = node.inputs[0].const_value if node.inputs[0] is not None else None
    if shape is None:
        return None
    dims = [int(d) for d in shape.numpy().reshape(-1)]
    return True if all(d >= 0 for d in dims) and math.prod(dims) <= FOLD_FILL_LIMIT else None


def infer_proto(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `proto` with shapes inferred (large weights kept out of the round trip), or `proto` itself when
    inference fails."""
    light = weights.Light.of(proto)
    inferred = _inferred(light.proto)
    return proto if inferred is None else light.put_back(inferred)


def infer_model(model: ir.Model) -> onnx.ModelProto:
    """The proto of `model` with shapes inferred (as `infer_proto`; as it is when inference fails), its weights
    serialized once."""
    light = weights.Light.of_ir(model)
    return light.put_back(_inferred(light.proto) or light.proto)


def infer_light(light: weights.Light) -> onnx.ModelProto:
    """Shape inference on a light copy (as `infer_proto`): the inferred copy, or `light.proto` itself when
    inference fails; the large initializers stay out (`Light.attach` and `Light.put_back` bring them)."""
    return _inferred(light.proto) or light.proto


def _inferred(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    try:
        return onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # best effort, as in _infer_shapes
        return None


def infer_shapes(model: ir.Model) -> None:
    from onnx_ir.passes import common as passes

    try:
        passes.ShapeInferencePass(strict_mode=False, data_prop=True)(model)
    except Exception:  # shape inference is best effort: unknown ops simply get no shapes
        pass


@contextlib.contextmanager
def quiet_folder() -> Iterator[None]:
    """onnxscript's folder logs warnings (inconsistent shapes in a trial, "Skipping constant folding for op
    ..."): silenced while folding, they are not problems of the user's model."""
    folder = logging.getLogger("onnxscript")
    level = folder.level
    folder.setLevel(logging.ERROR)
    try:
        yield
    finally:
        folder.setLevel(level)
