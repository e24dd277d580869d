"""What verification knows about a model before running it: concrete shapes of its values for one choice of
input sizes, the element budget, and the outputs that depend on random ops.

Shapes. `ShapeFacts(model)` keeps a skeleton of the model (its nodes, functions and opsets; initializers of
more than `SMALL` elements become typed inputs, so the weights are never copied) and `infer(shapes,
constants)` runs ONNX shape inference (with data propagation) on it with the graph inputs at `shapes` and the
small integer inputs drawn so far as constants: every value's shape where inference knows it (about 10 ms
for a 700-node graph).

Budget. A candidate input is tried only when no value it would make, the inputs and the outputs included, is
known to hold more than `ELEMENT_BUDGET` (2**24 = 16,777,216) elements, and when its inputs together hold
no more: 64 MB of float32 per value, so that an op that multiplies sizes (Tile, Expand, Resize,
ConstantOfShape) on drawn sizes cannot exhaust memory. Sizes the model states or the user gave are not
choices (`fixed_sizes`: known without any choice) and are never a reason to skip.

Random outputs. Outputs that depend on RandomNormal(Like), RandomUniform(Like), Bernoulli, Multinomial or a
Dropout that may run in training mode (its training_mode input is not a constant false), directly or
through a subgraph or a function, differ between any two runs: they are not compared.
"""

from __future__ import annotations

import math

from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np
import onnx

from eqsat.ops import NONDETERMINISTIC

ELEMENT_BUDGET = 1 << 24
SMALL = 64  # initializers of at most this many elements keep their data in the skeleton (shape constants)
RANDOM_OPS = NONDETERMINISTIC

Dims = tuple  # a value's shape: ints, None where unknown


def _size(dims: Sequence[int]) -> int:
    return math.prod(map(int, dims))  # Python ints: exact at any size, and no numpy call per value


class ShapeFacts:
    """Concrete shapes of a model's values for given input shapes (see the module docstring)."""

    def __init__(self, model: onnx.ModelProto):
        graph = model.graph
        self.initializers: dict[str, Dims] = {t.name: tuple(t.dims) for t in graph.initializer}
        skeleton = onnx.ModelProto(ir_version=model.ir_version)  # its graph inputs are added by each `infer`
        skeleton.opset_import.extend(model.opset_import)
        skeleton.functions.extend(model.functions)
        g = skeleton.graph
        g.name = graph.name
        g.node.extend(graph.node)
        g.output.extend(graph.output)
        typed = onnx.ModelProto()  # the large initializers, as typed inputs after the feeds
        for tensor in graph.initializer:
            if _size(tensor.dims) <= SMALL:
                g.initializer.append(tensor)
            else:
                typed.graph.input.append(
                    onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims))
                )
        self._feeds = [_copied(v) for v in graph.input if v.name not in self.initializers]
        self._typed = list(typed.graph.input)
        self._typed_names = {v.name for v in self._typed}
        self._typed_part = typed.SerializeToString()
        self._head: bytes | None = None  # None: too large to serialize (then nothing is inferred)
        try:
            self._head = skeleton.SerializeToString()
        except Exception:  # noqa: BLE001 - a skeleton over protobuf's 2 GB: inference is a help, as below
            pass
        self.constants: Mapping[str, np.ndarray] = _Arrays(  # small initializers and Constant nodes' values
            {t.name: t for t in g.initializer}
            | {
                node.output[0]: node.attribute[0].t
                for node in graph.node
                if node.op_type == "Constant"
                and node.attribute
                and node.attribute[0].name == "value"
                and _size(node.attribute[0].t.dims) <= SMALL
            }
        )

    def infer(self, shapes: Mapping[str, Sequence[int]], constants: Mapping[str, np.ndarray] = {}) -> dict[str, Dims]:
        """Every value's shape that shape inference knows with the graph inputs at `shapes` (tensor inputs
        not in `shapes` keep their declared dims) and `constants` (inputs by name) folded in."""
        facts: dict[str, Dims] = dict(self.initializers)
        for v in self._feeds:  # inputs not sized here: as declared
            if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                facts[v.name] = _dims(v.type.tensor_type.shape)
        facts.update({name: tuple(int(d) for d in shape) for name, shape in shapes.items()})
        if self._head is None:
            return facts
        data = self._serialized(self._head, shapes, constants)
        try:
            inferred = onnx.shape_inference.infer_shapes(data, strict_mode=False, data_prop=True)
        except Exception:  # noqa: BLE001 - inference is a help, not a requirement
            return facts
        for v in (*inferred.graph.value_info, *inferred.graph.output):
            if v.name not in facts and v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
                facts[v.name] = _dims(v.type.tensor_type.shape)
        return facts

    def _serialized(
        self, head: bytes, shapes: Mapping[str, Sequence[int]], constants: Mapping[str, np.ndarray]
    ) -> bytes:
        """The skeleton with the graph inputs at `shapes` and `constants` as initializers, serialized. The parts
        every call shares (the skeleton without inputs, the large initializers as typed inputs) were serialized
        once: each call serializes only the feeds and the constants. Parsing concatenated messages merges them
        (repeated fields appended in order), so onnx reads the skeleton as if edited in place and serialized."""
        feeds, rest = onnx.ModelProto(), onnx.ModelProto()
        for v in self._feeds:
            if v.name in constants:
                continue
            added = feeds.graph.input.add()
            added.CopyFrom(v)
            if v.name in shapes and v.type.HasField("tensor_type"):
                shape = added.type.tensor_type.shape
                del shape.dim[:]
                for size in shapes[v.name]:
                    shape.dim.add().dim_value = int(size)
        typed = self._typed_part
        if not self._typed_names.isdisjoint(constants):  # a constant named like a large initializer
            rest.graph.input.extend(v for v in self._typed if v.name not in constants)
            typed = b""
        for name, array in constants.items():
            rest.graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(array), name))
        return head + feeds.SerializeToString() + typed + rest.SerializeToString()


class _Arrays(Mapping[str, np.ndarray]):
    """Tensors by name read as numpy arrays when first asked for (most are never read)."""

    def __init__(self, tensors: dict[str, onnx.TensorProto]):
        self._tensors = tensors
        self._arrays: dict[str, np.ndarray] = {}

    def __getitem__(self, name: str) -> np.ndarray:
        found = self._arrays.get(name)
        if found is None:
            found = self._arrays[name] = onnx.numpy_helper.to_array(self._tensors[name])
        return found

    def __contains__(self, name: object) -> bool:
        return name in self._tensors

    def __iter__(self) -> Iterator[str]:
        return iter(self._tensors)

    def __len__(self) -> int:
        return len(self._tensors)


def _dims(shape: onnx.TensorShapeProto) -> Dims:
    """A shape's dims: sizes, None where unknown (a symbol, no value, or a negative one)."""
    dims = []
    for d in shape.dim:
        size = d.dim_value  # 0 when unset: only then is HasField asked
        dims.append(size if size > 0 or (size == 0 and d.HasField("dim_value")) else None)
    return tuple(dims)


def _copied(value: onnx.ValueInfoProto) -> onnx.ValueInfoProto:
    copy = onnx.ValueInfoProto()
    copy.CopyFrom(value)
    return copy


def largest(facts: Mapping[str, Dims], names: Iterable[str] | None = None) -> tuple[str, int]:
    """The value (of `names`, default all) with the most elements among those whose size is known."""
    best, most = "", 0
    for name in facts if names is None else names:
        dims = facts.get(name)
        if dims is not None and all(d is not None for d in dims):
            size = _size(dims)
            if size > most:
                best, most = name, size
    return best, most


def fixed_sizes(facts: Mapping[str, Dims]) -> set[str]:
    """The values whose size `facts` know completely: inferred with only what the model states and the
    user gave, these sizes are not the verifier's choice, and the budget does not count them."""
    return {name for name, dims in facts.items() if dims is not None and all(d is not None for d in dims)}


def over_budget(
    facts: Mapping[str, Dims],
    inputs: Mapping[str, Sequence[int]],
    fixed: frozenset[str] | set[str] = frozenset(),
    budget: int = ELEMENT_BUDGET,
) -> str:
    """Why a candidate is over the element budget ("" when it is not): its inputs together, or the largest
    value whose size the facts know (outputs and intermediate values); values in `fixed` do not count."""
    total = sum(_size(s) for name, s in inputs.items() if name not in fixed)
    if total > budget:
        return f"its inputs hold {total:,} elements"
    name, most = largest({k: v for k, v in facts.items() if k not in inputs and k not in fixed})
    if most > budget:
        return f"value {name!r} would hold {most:,} elements"
    return ""


def random_outputs(model: onnx.ModelProto) -> list[str]:
    """The graph outputs that depend on a random op (see the module docstring), in output order."""
    graph = model.graph
    if not _may_be_random(graph.node) and not any(_may_be_random(f.node) for f in model.functions):
        return []  # no op that can be random anywhere: nothing to follow
    constant_false = {
        t.name for t in graph.initializer if _size(t.dims) == 1 and not onnx.numpy_helper.to_array(t).any()
    }
    constant_false |= {
        n.output[0]
        for n in graph.node
        if n.op_type == "Constant"
        and n.attribute
        and n.attribute[0].name == "value"
        and _size(n.attribute[0].t.dims) == 1
        and not onnx.numpy_helper.to_array(n.attribute[0].t).any()
    }
    random_functions = _random_functions(model.functions)
    tainted: set[str] = set()
    for node in graph.node:  # nodes are in topological order (the checker requires it)
        if (
            _is_random(node, constant_false, random_functions)
            or any(i in tainted for i in node.input if i)
            or any(i in tainted for i in _outer_reads(node))
        ):
            tainted.update(o for o in node.output if o)
    return [o.name for o in graph.output if o.name in tainted]


def _is_random(node: onnx.NodeProto, constant_false: set[str], random_functions: set[tuple[str, str]]) -> bool:
    if node.op_type in RANDOM_OPS and node.domain in ("", "ai.onnx"):
        return True
    if node.op_type == "Dropout" and len(node.input) > 2 and node.input[2] and node.input[2] not in constant_false:
        return True
    if (node.domain, node.op_type) in random_functions:
        return True
    return any(_is_random(n, constant_false, random_functions) for g in _subgraphs(node) for n in g.node)


#: The ops `_is_random` can find random, whatever their domain and inputs.
_MAYBE_RANDOM = frozenset(RANDOM_OPS) | {"Dropout"}


def _may_be_random(nodes: Iterable[onnx.NodeProto]) -> bool:
    """Whether one of `nodes` (their subgraphs included) is an op that may be random: one walk of the op types
    instead of `random_outputs`'s taint analysis, which can only find an output random where there is one."""
    for node in nodes:
        if node.op_type in _MAYBE_RANDOM:
            return True
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH and _may_be_random(a.g.node):
                return True
            if a.type == onnx.AttributeProto.GRAPHS and any(_may_be_random(g.node) for g in a.graphs):
                return True
    return False


def _random_functions(functions: Sequence[onnx.FunctionProto]) -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    changed = True
    while changed:  # a function calling a random function is random
        changed = False
        for f in functions:
            key = (f.domain, f.name)
            if key not in found and any(_is_random(n, set(), found) for n in f.node):
                found.add(key)
                changed = True
    return found


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    return [g for a in node.attribute for g in ([a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs)]


def _outer_reads(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read (outer-scope values among them)."""
    return {i for g in _subgraphs(node) for n in g.node for i in (*n.input, *_outer_reads(n)) if i}
