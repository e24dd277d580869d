"""Graph -> egglog: every ONNX value becomes a handle `(Ref i)` unioned with its term, plus facts.

The whole graph becomes rows of primitive load tables (eqsat.engine.bulk: `load-Relu 3 2` stands for
`(union (Ref 3) (Relu (Ref 2)))`, `load-shape 3 v` for `(set (shape (Ref 3)) v)`) that
`Backend.load_rows` inserts in bulk: no Python term building, no recursion, so a 20k-node graph loads in
well under a second. Opaque nodes (tensor lists) and strings a table cannot carry go as egglog text.
Shapes and dtypes come from ONNX shape inference (run by `eqsat.frontend.normalize`); every value of known rank
gets a shape fact, its unknown dims as symbols (negative ids, eqsat.frontend.symbols).

Side tables keep what egglog does not need: constant tensors by content key, the original nodes behind
opaque terms, and which original node produced each handle (provenance).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from eqsat.engine.bulk import ABSENT, Rows
from eqsat.frontend.symbols import SHAPE_FACTS, SymbolTable, attr_data_type, symbolic_shapes
from eqsat.engine.terms import BINARY, LIST_OPS, OPS, NONDETERMINISTIC, SMALL_CONST, OpSpec, default_opset, egg_str
from eqsat.engine.terms import FLT_MIN_NORMAL, MAX_SCALE, Param, egg_value


#: Gemm's C is an optional input from this opset on (required before).
GEMM_OPTIONAL_C = 11


@dataclasses.dataclass
class Encoding:
    """The load rows of one graph and the side tables needed to lower a result back."""

    rows: Rows = dataclasses.field(default_factory=Rows)
    refs: dict[str, int] = dataclasses.field(default_factory=dict)  # value name -> handle
    constants: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)  # Const key -> tensor
    constant_names: dict[str, str] = dataclasses.field(default_factory=dict)  # Const key -> name
    opaque_nodes: dict[str, ir.Node] = dataclasses.field(default_factory=dict)  # Opaque key -> node
    producers: dict[int, str] = dataclasses.field(default_factory=dict)  # handle -> node name
    outputs: tuple[int, ...] = ()
    opset: int = 0
    perms: set[tuple[int, ...]] = dataclasses.field(default_factory=set)
    max_rank: int = 0  # the largest rank of a value with a shape fact
    typed: int = 0
    opaque: int = 0
    handles: int = 0  # handles allocated: one per value, plus one per re-encoded broadcast constant
    symbols: SymbolTable = dataclasses.field(default_factory=SymbolTable)  # the symbols in shape facts

    unified: dict[int, int] = dataclasses.field(default_factory=dict)  # symbol -> the dim it was proven equal to

    @property
    def perm_rank(self) -> int:
        """The largest rank of a value with a shape fact or of a Transpose's perm: the inverse perms it may need."""
        return max([self.max_rank, *map(len, self.perms)])

    def arrays_by_name(self) -> dict[str, np.ndarray]:
        """Each constant's array under the name it was first read by (the model's initializer names)."""
        return {name: self.constants[key] for key, name in self.constant_names.items() if key in self.constants}


def constant_key(array: np.ndarray) -> str:
    digest = hashlib.sha1(f"{array.dtype.str}{array.shape}".encode())
    contiguous = np.ascontiguousarray(array)
    plain = contiguous.dtype.kind in "biufc" and contiguous.ndim  # hashed in place: no copy of a large weight
    digest.update(contiguous.view(np.uint8).data if plain else contiguous.tobytes())
    return "c" + digest.hexdigest()[:20]


class _Encoder:
    def __init__(self, model: ir.Model, symbolic: bool = True, unified: Mapping[int, int] | None = None) -> None:
        self.model = model
        self.enc = Encoding(opset=default_opset(model.opset_imports))
        self.rows = self.enc.rows
        facts = model.meta.pop(SHAPE_FACTS, None)  # taken once: later encodings compute them again
        if facts is None:
            facts = symbolic_shapes(model.graph)
        self.shapes, self.enc.symbols = facts.shapes, facts.table
        if unified:  # symbols proven equal (eqsat.engine.unify): each written as its representative
            self.enc.unified = dict(unified)
            self.shapes = {name: tuple(unified.get(d, d) for d in dims) for name, dims in self.shapes.items()}
        if not symbolic:
            self.shapes = {name: shape for name, shape in facts.shapes.items() if all(d >= 0 for d in shape)}
        self.conv_readers: dict[int, int] = {}  # value handle -> Convs reading it as their input
        self.const_rank: dict[str, int] = {}
        self.rows.text.append(f"(union (Ref {ABSENT}) (Absent))")

    # ---- handles and facts ----
    def ref(self, value: ir.Value | None) -> int:
        if value is None or not value.name:
            return ABSENT
        return self.enc.refs[value.name]

    def tensor_list(self, values: Sequence[ir.Value | None]) -> str:
        """`(TCons (Ref a) (TCons (Ref b) (TNil)))` for the values (absent ones as the Absent handle)."""
        items = "(TNil)"
        for value in reversed(values):
            items = f"(TCons (Ref {self.ref(value)}) {items})"
        return items

    def handle(self) -> int:
        self.enc.handles += 1
        return self.enc.handles - 1

    def facts(self, rid: int, shape: tuple[int, ...] | None, dtype: str | None) -> None:
        if shape is not None:
            self.rows.add("shape", rid, self.rows.vec(shape))
            self.enc.max_rank = max(self.enc.max_rank, len(shape))
        if dtype is not None:
            self.rows.add("dtype", rid, dtype)

    def new_ref(self, value: ir.Value, producer: str | None = None) -> int:
        rid = self.handle()
        name = _name(value)
        self.enc.refs[name] = rid
        if producer is not None:
            self.enc.producers[rid] = producer
        self.facts(rid, self.shapes.get(name), value.dtype.name if value.dtype is not None else None)
        return rid

    # ---- leaves ----
    def constant(self, rid: int, value: ir.Value, array: np.ndarray) -> None:
        """`rid` defined as the constant `array` (a Scalar when it has one element exact in f64), with its value
        facts and `positive` when its elements all are > 0."""
        extremes = _extremes(array)  # one pass each for min and max: the facts below all read them
        if array.size == 1 and array.dtype.kind in "biuf" and _exact_as_f64(array):
            self.rows.add("Scalar", rid, float(array.reshape(-1)[0]), _dtype(value), self.rows.vec(array.shape))
        else:
            key = constant_key(array)
            self.enc.constants.setdefault(key, array)
            self.enc.constant_names.setdefault(key, _name(value))
            self.rows.add("Const", rid, key)
            self.rows.add("const-rank", rid, self.const_rank.setdefault(key, len(self.const_rank)))
            self.value_facts(rid, array, extremes)
        if extremes is not None and array.dtype.kind in "iuf" and extremes[0] > 0:
            self.rows.add("positive", rid)

    def value_facts(self, rid: int, array: np.ndarray, extremes: tuple[Any, Any] | None) -> None:
        """`finite` for a constant without NaN or infinity, `safe-reciprocal` for a float one whose nonzero
        elements all have finite reciprocals, `moderate` for one within [FLT_MIN_NORMAL, MAX_SCALE]; `splat` for
        one whose elements are all equal; `const-value` rows for a small one whose values are exact as f64.
        `extremes`: its (min, max) (_extremes)."""
        kind = array.dtype.kind
        if kind not in "biuf" or (kind == "f" and extremes is not None and not np.all(np.isfinite(extremes))):
            return  # a NaN makes the minimum NaN, an infinity the minimum or maximum infinite
        self.rows.add("finite", rid)
        if kind == "f" and _safe_reciprocal(array, extremes):
            self.rows.add("safe-reciprocal", rid)
        if (
            kind == "f"
            and extremes is not None
            and FLT_MIN_NORMAL <= float(extremes[0]) <= float(extremes[1]) <= MAX_SCALE
        ):
            self.rows.add("moderate", rid)
        flat = array.reshape(-1)
        if flat.size > 1 and _exact_as_f64(flat[:1]) and extremes is not None and extremes[0] == extremes[1]:
            self.rows.add("splat", rid, float(flat[0]))
        if flat.size <= SMALL_CONST and all(_exact_as_f64(flat[k : k + 1]) for k in range(flat.size)):
            for k, v in enumerate(flat):
                self.rows.add("const-value", rid, k, float(v))

    def encode_leaves(self) -> None:
        graph = self.model.graph
        for value in graph.inputs:
            rid = self.new_ref(value)
            if not self.rows.add("Input", rid, value.name):
                self.rows.text.append(f"(union (Ref {rid}) (Input {egg_str(_name(value))}))")
        for name, value in graph.initializers.items():
            if name in self.enc.refs or value.const_value is None:
                continue
            array = value.const_value.numpy()
            rid = self.new_ref(value)
            self.constant(rid, value, array)

    # ---- nodes ----
    def encode_nodes(self) -> None:
        for index, node in enumerate(self.model.graph):
            spec = OPS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
            typed = self.typed_inputs_and_params(node, spec) if spec is not None else None
            name = node.name or f"{node.op_type}#{index}"
            if (
                spec is None
                and node.domain in ("", "ai.onnx")
                and node.op_type in LIST_OPS
                and self.encode_list_op(node, name)
            ):
                self.enc.typed += 1
                continue
            if (
                typed is None
                and spec is not None
                and spec.name == "Reshape"
                and self.encode_dynamic_reshape(node, name)
            ):
                self.enc.typed += 1
                continue
            if typed is not None and spec is not None:
                self.enc.typed += 1
                rid = self.new_ref(node.outputs[0], name)
                inputs, params = typed
                if spec.name == "Conv":
                    self.conv_readers[inputs[0]] = self.conv_readers.get(inputs[0], 0) + 1
                    if self.conv_readers[inputs[0]] == 2:  # a fan-out that conv-merge may join
                        self.rows.add("conv-fanout", inputs[0])
                columns = [self.rows.vec(v) if p.kind == "ints" else v for p, v in zip(spec.params, params)]
                if not self.rows.add(spec.name, rid, *inputs, *columns):  # a string a table cannot carry
                    args = [f"(Ref {r})" for r in inputs] + [egg_value(p.kind, v) for p, v in zip(spec.params, params)]
                    self.rows.text.append(f"(union (Ref {rid}) ({spec.name} {' '.join(args)}))")
            else:
                self.enc.opaque += 1
                self.encode_opaque(node, index, name)

    def typed_inputs_and_params(self, node: ir.Node, spec: OpSpec) -> tuple[list[int], list[Any]] | None:
        """The node's input handles and static parameter values (Python ints, floats, strings, int tuples),
        or None when some detail is not modelled (it then goes opaque)."""
        if (
            node.op_type in NONDETERMINISTIC
            or len([o for o in node.outputs if o.name]) != 1
            or not node.outputs[0].name
        ):
            return None
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
            return None
        static_inputs = {p.input for p in spec.params if p.input is not None and self.enc.opset >= p.since}
        tensor_inputs = [v for i, v in enumerate(node.inputs) if i not in static_inputs]
        if len(tensor_inputs) > len(spec.inputs) or len(tensor_inputs) < len(spec.inputs) - spec.optional:
            return None
        known_attrs = {p.name for p in spec.params if not (p.input is not None and self.enc.opset >= p.since)}
        noop = _reduce_noop(node, spec)
        if set(node.attributes) - known_attrs - ({"noop_with_empty_axes"} if noop is not None else set()):
            return None
        values = self.param_values(node, spec)
        if values is None or (noop and not values[0]):  # noop with no axes: x unchanged, not modelled
            return None
        x = node.inputs[0] if node.inputs else None
        if not spec.one_axis_at(self.enc.opset, values, self.shapes.get(x.name) if x is not None and x.name else None):
            return None
        if spec.name == "Transpose":
            self.enc.perms.add(tuple(values[0]))
        args = [self.ref(v) for v in tensor_inputs] + [ABSENT] * (len(spec.inputs) - len(tensor_inputs))
        if spec.name in BINARY:
            args = [self.broadcast_constant(v, node.outputs[0], a) for v, a in zip(node.inputs, args)]
        params = [
            tuple(v) if p.kind == "ints" else float(v) if p.kind == "float" else int(v) if p.kind == "int" else str(v)
            for p, v in zip(spec.params, values)
        ]
        if spec.name == "Gemm" and params[1] == 0.0:
            return self.gemm_without_c(args, params)
        return args, params

    def gemm_without_c(self, args: list[int], params: list[Any]) -> tuple[list[int], list[Any]] | None:
        """A Gemm with beta 0 as the Gemm without C (beta 1): onnxruntime and onnx.reference ignore C then, and a
        rule folding C * beta into a bias would turn an infinite or NaN C into NaN (0 * inf). C only broadcasts
        to [M, N], so the output's shape is the same. Before opset 11 C is required: not modelled."""
        if self.enc.opset < GEMM_OPTIONAL_C:
            return None
        return [*args[:2], ABSENT], [params[0], 1.0, *params[2:]]

    def param_values(self, node: ir.Node, spec: OpSpec) -> list[Any] | None:
        in_rank = (
            len(node.inputs[0].shape)
            if node.inputs and node.inputs[0] is not None and node.inputs[0].shape is not None
            else None
        )
        out_rank = len(node.outputs[0].shape) if node.outputs[0].shape is not None else None
        values: list[Any] = []
        for p in spec.params:
            given = True  # the parameter is written on the node (not its default)
            if p.input is not None and self.enc.opset >= p.since:
                v = node.inputs[p.input] if p.input < len(node.inputs) else None
                if v is None or not v.name:
                    value, given = p.default, False
                elif v.const_value is None:
                    return None  # a static parameter computed at run time: not modelled
                else:
                    arr = v.const_value.numpy()
                    if p.kind != "ints" and not _exact_as_f64(arr.reshape(-1)[:1]):
                        return None  # a float parameter holds it as f64 (an int64 Clip bound of 2^62 + 1): not modelled
                    value = tuple(int(x) for x in arr.reshape(-1)) if p.kind == "ints" else float(arr.reshape(-1)[0])
            else:
                attr = node.attributes.get(p.name)
                value = self.attribute_default(spec, p) if attr is None else attr.value
                given = attr is not None
                if p.kind == "dtype" and attr is not None:
                    dtype = attr_data_type(attr)
                    value = dtype.name if dtype is not None else None
            if value is None and spec.name == "Transpose" and in_rank is not None:
                value = tuple(reversed(range(in_rank)))
            if value is None:
                return None
            if p.kind == "ints":
                value = tuple(int(x) for x in value)
                if not value and given and spec.name == "Squeeze":
                    return None  # axes written but empty: onnxruntime squeezes every 1, ONNX's inference none
            if p.axes_of is not None:
                rank = in_rank if p.axes_of == "input" else out_rank
                value = _normalize_axes(value, rank)
                if value is None:
                    return None
            values.append(value)
        return values

    def attribute_default(self, spec: OpSpec, p: Param) -> Any:
        """A parameter's ONNX default at the model's opset: the axis of a flattening op (Softmax before 13) is 1."""
        return 1 if p.name == "axis" and self.enc.opset < spec.flattens_before else p.default

    def broadcast_constant(self, value: ir.Value | None, out: ir.Value, rid: int) -> int:
        """A constant operand of lower rank gets a handle of its own, re-encoded at the output's rank
        (numpy broadcasting); any other operand keeps `rid`."""
        if value is None or value.const_value is None or out.shape is None:
            return rid
        array = value.const_value.numpy()
        if array.ndim >= len(out.shape):
            return rid
        array = array.reshape((1,) * (len(out.shape) - array.ndim) + array.shape)
        handle = self.handle()
        self.constant(handle, value, array)
        self.facts(handle, array.shape, _dtype(value))
        return handle

    def encode_dynamic_reshape(self, node: ir.Node, name: str) -> bool:
        """A Reshape whose target is computed at run time as `(ReshapeDyn x target allowzero)`; False (opaque)
        for any other detail not modelled."""
        if (
            len(node.inputs) != 2
            or any(v is None or not v.name for v in node.inputs)
            or len(node.outputs) != 1
            or set(node.attributes) - {"allowzero"}
            or not node.outputs[0].name
        ):
            return False
        allowzero = int(node.attributes["allowzero"].value) if "allowzero" in node.attributes else 0
        rid = self.new_ref(node.outputs[0], name)
        x, target = (self.ref(v) for v in node.inputs)
        self.rows.text.append(f"(union (Ref {rid}) (ReshapeDyn (Ref {x}) (Ref {target}) {allowzero}))")
        return True

    def encode_list_op(self, node: ir.Node, name: str) -> bool:
        """Concat as `(Concat list axis)`, Split as `(Split x axis sizes)` with `(Out n k)` per output;
        False (the node goes opaque) when a detail is not static (rank, split sizes) or not modelled."""
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
            return False
        if node.op_type == "Concat":
            out = node.outputs[0] if len(node.outputs) == 1 else None
            if out is None or not out.name or not node.inputs or any(v is None or not v.name for v in node.inputs):
                return False
            if set(node.attributes) - {"axis"} or "axis" not in node.attributes:
                return False
            rank = len(out.shape) if out.shape is not None else None
            axis = _normalize_axes(int(node.attributes["axis"].value), rank)
            if axis is None or (rank is not None and not 0 <= axis < rank):
                return False
            rid = self.new_ref(out, name)
            self.rows.text.append(f"(union (Ref {rid}) (Concat {self.tensor_list(node.inputs)} {axis}))")
            return True
        found = self.split_sizes(node)
        if found is None:
            return False
        axis, sizes = found
        term = f"(Split (Ref {self.ref(node.inputs[0])}) {axis} {egg_value('ints', sizes)})"
        for k, out in enumerate(node.outputs):
            if out.name:
                rid = self.new_ref(out, name)
                self.rows.text.append(f"(union (Ref {rid}) (Out {term} {k}))")
        return True

    def split_sizes(self, node: ir.Node) -> tuple[int, tuple[int, ...]] | None:
        """Split's axis (non-negative) and static sizes, from its `split` input (opset >= 13), its `split`
        attribute (before), or an even split (num_outputs from opset 18, else the number of outputs)."""
        x = node.inputs[0] if node.inputs else None
        if x is None or not x.name or set(node.attributes) - {"axis", "split", "num_outputs"}:
            return None
        shape = self.shapes.get(x.name)
        rank = len(shape) if shape is not None else None
        axis = _normalize_axes(int(node.attributes["axis"].value) if "axis" in node.attributes else 0, rank)
        if axis is None or rank is None or not 0 <= axis < rank:
            return None
        n_out = len(node.outputs)
        split: tuple[int, ...] | None = None
        if self.enc.opset >= 13:
            v = node.inputs[1] if len(node.inputs) > 1 else None
            if v is not None and v.name:
                if v.const_value is None:
                    return None
                split = tuple(int(s) for s in v.const_value.numpy().reshape(-1))
        elif "split" in node.attributes:
            split = tuple(int(s) for s in node.attributes["split"].value)
        if split is None:
            if shape is None:
                return None
            dim = shape[axis]
            if dim < 0:  # a symbol: the sizes are not static
                return None
            if "num_outputs" in node.attributes:
                n = int(node.attributes["num_outputs"].value)
                if n != n_out:
                    return None
                chunk = -(-dim // n)
                split = tuple(max(0, min(chunk, dim - chunk * i)) for i in range(n))
            else:
                if dim % n_out:
                    return None
                split = (dim // n_out,) * n_out
        if (
            len(split) != n_out
            or any(s < 0 for s in split)
            or (shape is not None and shape[axis] >= 0 and sum(split) != shape[axis])
        ):
            return None
        return axis, split

    def encode_opaque(self, node: ir.Node, index: int, name: str) -> None:
        key = f"{node.domain or 'ai.onnx'}::{node.op_type}#{index}"
        self.enc.opaque_nodes[key] = node
        term = f"(Opaque {egg_str(key)} {self.tensor_list([*node.inputs, *_captured_values(node, self.enc.refs)])})"
        for k, out in enumerate(node.outputs):
            if out.name:
                rid = self.new_ref(out, name)
                self.rows.text.append(f"(union (Ref {rid}) (Out {term} {k}))")


def _extremes(array: np.ndarray) -> tuple[Any, Any] | None:
    """(min, max) of a non-empty numeric array (NaN when it holds one), else None."""
    if array.size == 0 or array.dtype.kind not in "biuf":
        return None
    return array.min(), array.max()


#: Float constants holding zeros or both signs are scanned for their smallest nonzero magnitude up to this many
#: elements (`_safe_reciprocal`); larger ones get no `safe-reciprocal` fact.
RECIPROCAL_SCAN = 1 << 16


def _safe_reciprocal(array: np.ndarray, extremes: tuple[Any, Any] | None) -> bool:
    """Whether every nonzero element of the finite float `array` has a reciprocal at most half its dtype's largest
    value (1 / x rounds to a finite value: no subnormal as small as 1e-39 in FLOAT; a 0 is fine, x / 0 and
    x * (1 / 0) agree). `extremes`: its (min, max)."""
    if extremes is None:
        return False
    low, high = extremes
    if low > 0:
        smallest = float(low)
    elif high < 0:
        smallest = -float(high)
    elif array.size <= RECIPROCAL_SCAN:
        magnitudes = np.abs(array)
        nonzero = magnitudes[magnitudes > 0]
        smallest = float(nonzero.min()) if nonzero.size else math.inf
    else:
        return False
    return smallest * float(np.finfo(array.dtype).max) >= 2.0


def _exact_as_f64(array: np.ndarray) -> bool:
    """Scalars carry their value as f64: integers beyond 2^53 stay `Const` to stay exact."""
    return array.dtype.kind not in "iu" or abs(int(array.reshape(-1)[0])) <= 1 << 53


def _reduce_noop(node: ir.Node, spec: OpSpec) -> int | None:
    """A reduction's noop_with_empty_axes (0 or 1), None for another op or when unset. Only an empty axes list
    reads it: with axes listed, or 0, the node is the plain reduction its term says."""
    attr = node.attributes.get("noop_with_empty_axes")
    if attr is None or not spec.name.startswith("Reduce"):
        return None
    return int(attr.value)


def _normalize_axes(value: Any, rank: int | None) -> Any:
    if isinstance(value, tuple):
        if all(a >= 0 for a in value):
            return tuple(sorted(value))
        return None if rank is None else tuple(sorted(a % rank for a in value))
    if value >= 0:
        return value
    return None if rank is None else value % rank


def _captured_values(node: ir.Node, refs: dict[str, int]) -> list[ir.Value]:
    """Outer-scope values read inside a node's subgraphs: kept alive as extra inputs of the opaque term."""
    captured: dict[str, ir.Value] = {}
    stack = [a for a in node.attributes.values() if a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)]
    graphs: list[ir.Graph] = []
    for attr in stack:
        graphs.extend(attr.value if attr.type == ir.AttributeType.GRAPHS else [attr.value])
    while graphs:
        graph = graphs.pop()
        local = {v.name for v in graph.inputs} | set(graph.initializers)
        for inner in graph:
            local |= {o.name for o in inner.outputs}
        for inner in graph:
            for v in inner.inputs:
                if v is not None and v.name and v.name not in local and v.name in refs:
                    captured.setdefault(v.name, v)
            for attr in inner.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    graphs.append(attr.value)
                elif attr.type == ir.AttributeType.GRAPHS:
                    graphs.extend(attr.value)
    return [captured[k] for k in sorted(captured)]


def _name(value: ir.Value) -> str:
    """A value's name: every value encoding refers to is named (the IR names them on load)."""
    if value.name is None:
        raise ValueError("an unnamed value cannot be encoded")
    return value.name


def _dtype(value: ir.Value) -> str:
    """A constant's dtype name (constants always have one)."""
    if value.dtype is None:
        raise ValueError(f"value {value.name!r} has no dtype")
    return value.dtype.name


def encode(model: ir.Model, symbolic: bool = True, unified: Mapping[int, int] | None = None) -> Encoding:
    """Actions and side tables for `model` (normalized: shapes inferred, constants folded and lifted).
    Without `symbolic`, only fully static shapes become shape facts (the fallback when sizes conflict);
    `unified` maps symbols to the dims an earlier saturation proved them equal to (eqsat.engine.unify)."""
    encoder = _Encoder(model, symbolic, unified)
    encoder.encode_leaves()
    encoder.encode_nodes()
    enc = encoder.enc
    enc.outputs = tuple(enc.refs[_name(v)] for v in model.graph.outputs)
    return enc
