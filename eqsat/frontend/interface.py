"""A model's interface, kept exactly: its graph inputs (names, order, types, default values) and outputs.

What a caller sees of a model is its contract: the optimized model has the input's graph inputs and outputs
as the input declared them (not as shape inference refined them), and an input that has an initializer (a
default value the caller may override; in IR version 3, every weight) keeps that initializer, as sparse
initializers stay. From IR version 4 on such an input is read as the input it is, its default never folded
(`overridable`: eqsat.frontend.normalize). An IR-3 model
requires every initializer to be a graph input; constants eqsat creates are not inputs (a caller must not
override them), so such an output is written as IR version 4, where initializers need not be inputs and
everything else means the same.
"""

from __future__ import annotations

import onnx

from eqsat.errors import InternalError

__all__ = ["check", "overridable", "restore"]

#: The first IR version in which an initializer need not be a graph input.
IR_INITIALIZERS_NOT_INPUTS = 4


def restore(model: onnx.ModelProto, original: onnx.ModelProto) -> None:
    """Give `model` (in place) the graph inputs, outputs and input defaults of `original`."""
    graph = model.graph
    del graph.input[:]
    graph.input.extend(original.graph.input)
    del graph.output[:]
    graph.output.extend(original.graph.output)
    defaults = _defaults(original)
    present = {t.name for t in graph.initializer}
    graph.initializer.extend(t for name, t in defaults.items() if name not in present)
    sparse = {t.values.name for t in graph.sparse_initializer}  # eqsat.frontend.io held them as inputs meanwhile
    graph.sparse_initializer.extend(t for t in original.graph.sparse_initializer if t.values.name not in sparse)
    inputs = {v.name for v in graph.input}
    if model.ir_version < IR_INITIALIZERS_NOT_INPUTS and any(t.name not in inputs for t in graph.initializer):
        model.ir_version = IR_INITIALIZERS_NOT_INPUTS


def check(model: onnx.ModelProto, original: onnx.ModelProto, label: str = "<model>") -> None:
    """Raise `InternalError` unless `model` has exactly the interface of `original`."""
    problem = difference(model, original)
    if problem:
        raise InternalError(f"{label}: eqsat changed the model's interface ({problem}); output not written")


def difference(model: onnx.ModelProto, original: onnx.ModelProto) -> str:
    """What differs between the two interfaces, in a few words ("" when they are the same)."""
    names = [v.name for v in model.graph.input]
    want = [v.name for v in original.graph.input]
    if names != want:
        return f"graph inputs {want} became {names}"
    for got, expected in zip(model.graph.input, original.graph.input):
        if got.type != expected.type:
            return f"graph input {got.name!r} changed its type"
    outputs = [v.name for v in model.graph.output]
    if outputs != [v.name for v in original.graph.output]:
        return f"graph outputs {[v.name for v in original.graph.output]} became {outputs}"
    for got, expected in zip(model.graph.output, original.graph.output):
        if got.type != expected.type:
            return f"graph output {got.name!r} changed its type"
    defaults, kept = _defaults(original), _defaults(model)
    for name, tensor in defaults.items():
        if name not in kept:
            return f"graph input {name!r} lost its default value"
        if kept[name] != tensor:
            return f"graph input {name!r} changed its default value"
    if extra := sorted(kept.keys() - defaults.keys()):
        return f"graph inputs {extra} gained a default value"
    return ""


def overridable(model: onnx.ModelProto) -> list[str]:
    """The graph inputs whose initializer is a default a caller may override (IR version 4 on), in input order."""
    if model.ir_version < IR_INITIALIZERS_NOT_INPUTS:
        return []
    defaults = _defaults(model)
    return [v.name for v in model.graph.input if v.name in defaults]


def _defaults(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """The initializers that are graph inputs: default values, by input name."""
    inputs = {v.name for v in model.graph.input}
    return {t.name: t for t in model.graph.initializer if t.name in inputs}
