"""Symbolic dims: every value of known rank gets a shape fact, its unknown dims as symbols.

A shape fact is a vector of i64: a dim >= 0 is a size, a dim < 0 is a *symbol*, an unknown size. Equal
symbols are equal sizes; different symbols may or may not be. Symbols come from

- the model's dim_params (the same name is the same size everywhere, as ONNX declares it);
- recovery where ONNX shape inference leaves a dim unnamed, or names it differently, although it is
  provably equal to an input's dim
  (elementwise and normalization ops copy their input's dims, broadcasting keeps the one non-1 symbol,
  Transpose permutes, MatMul/Gemm keep rows and columns, Conv/pooling keep the batch dim and derive each
  spatial dim from the input's by a name that encodes the formula, so equal inputs give equal symbols);
- a fresh symbol for any other unknown dim (a dim_value < 0, as paddle2onnx writes them, included).

Rules read symbols as opaque: they may copy, permute and compare them, never compute with them (a rule
that needs a size guards that the dim is >= 0). The cost model prices a symbol at a representative size
(`representative_size`); lowering writes declared dim_params back and leaves other symbols unnamed.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Sequence

import onnx_ir as ir

from eqsat.ops import ARITHMETIC, BROADCASTING, GLOBAL_POOLS, MATMULS, REDUCTIONS, SAME_SHAPE, WINDOWED

Dim = int | str | None  # a size, a symbol's name, or unknown

#: dim_params that name a batch dim besides those containing "batch" (priced at 1).
_BATCH_NAMES = frozenset({"n", "b", "bs", "N", "B"})
#: Size a symbol is priced at by the cost model unless it looks like a batch dim.
SYMBOL_SIZE = 64


@dataclasses.dataclass
class SymbolTable:
    """Symbol names and their negative ids (`-1` the first); `declared` names came from the model."""

    ids: dict[str, int] = dataclasses.field(default_factory=dict)
    declared: set[str] = dataclasses.field(default_factory=set)
    fresh_count: int = 0

    def id(self, name: str) -> int:
        return self.ids.setdefault(name, -1 - len(self.ids))

    def fresh(self, hint: str) -> str:
        """A name no other dim has (an unknown dim nothing is known to equal)."""
        self.fresh_count += 1
        return f"?{self.fresh_count}:{hint}"

    @property
    def names(self) -> dict[int, str]:
        return {i: n for n, i in self.ids.items()}

    def declared_name(self, symbol: int) -> str | None:
        """The dim_param to write for `symbol`, or None (a recovered or fresh symbol stays unnamed)."""
        name = self.names.get(symbol)
        return name if name in self.declared else None

    def preference(self, symbol: int) -> int:
        """Which of unified symbols represents them: a declared one (lowering writes it back), else any."""
        return 1 if self.declared_name(symbol) is not None else 0

    def sizes(self) -> dict[int, int]:
        """The size each symbol is priced at."""
        return {i: representative_size(n) for n, i in self.ids.items()}


def representative_size(name: str) -> int:
    """What the cost model assumes for a symbol: 1 for batch-like names, else SYMBOL_SIZE; a product
    symbol ("3*batch*seq") the product of its factors'."""
    size, factors = _factors([name])
    if len(factors) > 1 or size != 1:
        return size * math.prod(representative_size(f) for f in factors)
    return 1 if name in _BATCH_NAMES or "batch" in name.lower() else SYMBOL_SIZE


#: The names ONNX shape inference gives dims it cannot name ("unk__3"): unknown, not declared.
_INFERRED_NAME = re.compile(r"unk__\d+")


def declared_dims(shape: ir.Shape | None, inferred: bool = False) -> tuple[Dim, ...] | None:
    """A declared shape as sizes, dim_params and None (unknown: unnamed, or a negative dim_value); with
    `inferred`, the names ONNX inference gave (`unk__N`: one name is one size, as inference propagates it) too."""
    if shape is None:
        return None
    dims: list[Dim] = []
    for d in shape:
        if isinstance(d, int):
            dims.append(d if d >= 0 else None)
        else:
            dims.append(d.value if d.value and (inferred or not _INFERRED_NAME.fullmatch(d.value)) else None)
    return tuple(dims)


class _Recovery:
    """Names every unknown dim of a graph, walking its nodes in order (no recursion).

    Where an op's output dim provably equals an input's (`hints`) and both are known under different names,
    the two are unified (union-find, a size winning over a symbol), so that the loaded facts agree with what
    the shape rules derive for the same values (a conflict there would be an illegal merge).
    """

    def __init__(self, table: SymbolTable) -> None:
        self.table = table
        self.dims: dict[str, tuple[Dim, ...]] = {}
        self.values: dict[str, tuple[Dim, ...]] = {}  # integer tensors (rank <= 1) that compute shapes
        self.equal: dict[str, Dim] = {}  # symbol -> a dim it equals (union-find parent)
        self.seen: dict[tuple, ir.Node] = {}  # structural key -> the first node computing it
        self.same: dict[str, str] = {}  # value name -> the name of an earlier value computed the same way

    def find(self, d: Dim) -> Dim:
        while isinstance(d, str) and d in self.equal:
            d = self.equal[d]
        return d

    def unify(self, a: Dim, b: Dim) -> None:
        a, b = self.find(a), self.find(b)
        if a is None or b is None or a == b:
            return
        if self.rank(a) < self.rank(b):
            a, b = b, a
        if isinstance(b, str):
            self.equal[b] = a  # a size, else a declared name, else a product of known factors represents

    def rank(self, d: Dim) -> int:
        if isinstance(d, int):
            return 3
        return 2 if d in self.table.declared else 1 if PRODUCT in str(d) else 0

    def no_declared_products(self, dims: Sequence[Dim]) -> bool:
        """No dim is a declared dim_param that reads as a product ("2*seq" declared is a name of its own, not
        twice seq: `_symbolic` must neither split it nor compute it)."""
        return not any(isinstance(d, str) and PRODUCT in d and d in self.table.declared for d in dims)

    def named(self, value: ir.Value, hints: Sequence[Dim] = ()) -> None:
        """Record `value`'s dims: declared ones kept (and unified with `hints`, same position), unknown ones
        from `hints` or fresh."""
        dims = declared_dims(value.shape, inferred=True)
        if dims is None or not value.name:
            return
        out: list[Dim] = []
        for axis, d in enumerate(dims):
            if isinstance(d, str) and not _INFERRED_NAME.fullmatch(d):
                self.table.declared.add(d)
            hint = hints[axis] if axis < len(hints) and len(hints) == len(dims) else None
            if d is None:
                d = hint if hint is not None else self.table.fresh(f"{value.name}[{axis}]")
            else:
                self.unify(d, hint)
            out.append(d)
        self.dims[value.name] = tuple(out)

    def resolved(self, table: dict[str, tuple[Dim, ...]]) -> dict[str, tuple[Dim, ...]]:
        return {name: tuple(self.find(d) for d in dims) for name, dims in table.items()}

    def of(self, value: ir.Value | None) -> tuple[Dim, ...] | None:
        dims = self.dims.get(value.name) if value is not None and value.name else None
        return None if dims is None else tuple(self.find(d) for d in dims)

    def value(self, value: ir.Value | None) -> tuple[Dim, ...] | None:
        """The elements of an integer tensor of rank <= 1: a constant, or a shape computation evaluated."""
        if value is None or not value.name:
            return None
        if value.const_value is not None:
            array = value.const_value.numpy()
            small = array.dtype.kind in "iu" and array.ndim <= 1 and array.size <= MAX_SHAPE_VALUE
            return tuple(int(v) for v in array.reshape(-1)) if small else None
        items = self.values.get(value.name)
        return None if items is None else tuple(self.find(d) for d in items)

    def node(self, node: ir.Node) -> None:
        self.record(node)
        twin = self.twin(node)
        if twin is not None:  # the e-graph hash-conses the two nodes into one: their outputs share dims
            for a, b in zip(twin.outputs, node.outputs):
                if (
                    a.name
                    and b.name
                    and a.name in self.dims
                    and b.name in self.dims
                    and len(self.dims[a.name]) == len(self.dims[b.name])
                ):
                    for x, y in zip(self.dims[a.name], self.dims[b.name]):
                        self.unify(x, y)

    def twin(self, node: ir.Node) -> ir.Node | None:
        """An earlier node with the same op, attributes and inputs (None if none, or if it has subgraphs)."""
        if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
            return None
        key = (
            node.domain,
            node.op_type,
            tuple(sorted((k, str(a.value)) for k, a in node.attributes.items())),
            tuple(self.key(v) for v in node.inputs),
        )
        twin = self.seen.setdefault(key, node)
        if twin is node:
            return None
        for a, b in zip(twin.outputs, node.outputs):
            if a.name and b.name:
                self.same[b.name] = self.same.get(a.name, a.name)
        return twin

    def key(self, value: ir.Value | None) -> object:
        """What identifies a value to the e-graph: a small constant by its content, else its (first) name."""
        if value is None:
            return None
        if value.const_value is not None and value.const_value.size <= MAX_SHAPE_VALUE:
            array = value.const_value.numpy()
            return (array.dtype.str, array.shape, array.tobytes())
        name = value.name or ""
        return self.same.get(name, name)

    def record(self, node: ir.Node) -> None:
        if node.domain in ("", "ai.onnx") and len(node.outputs) == 1 and node.outputs[0].name:
            items = self.evaluate(node)
            shape = node.outputs[0].shape
            if items is not None and (shape is None or len(shape) <= 1):  # axis 0 is then the elements' order
                self.values[node.outputs[0].name] = items
        if node.op_type == "Split" and node.domain in ("", "ai.onnx"):
            for out, hints in zip(node.outputs, self.split(node)):
                self.named(out, hints)
            return
        hints = self.hints(node)
        for k, out in enumerate(node.outputs):
            self.named(out, hints if k == 0 else ())

    def split(self, node: ir.Node) -> list[tuple[Dim, ...]]:
        """Each Split output's dims: x's, the split axis excepted (its size when the sizes are constant)."""
        x = self.of(node.inputs[0]) if node.inputs else None
        if x is None:
            return []
        axis = _int(node, "axis") % len(x) if x else 0
        given = self.value(node.inputs[1]) if len(node.inputs) > 1 else None
        sizes = given if given is not None else _ints(node, "split")
        outs = []
        for k in range(len(node.outputs)):
            size = sizes[k] if sizes is not None and k < len(sizes) else None
            outs.append(tuple(size if a == axis else d for a, d in enumerate(x)))
        return outs

    def evaluate(self, node: ir.Node) -> tuple[Dim, ...] | None:
        """A shape computation's output elements (sizes and symbols), or None when it is not one: Shape,
        Gather along axis 0 with constant indices, Concat, Slice along axis 0 with step 1, Cast to an integer
        type, Identity, Squeeze/Unsqueeze of one element, a Reshape that keeps the elements (`_flattened`),
        Add/Sub/Mul/Div of sizes, and Mul/Div of symbols (`_symbolic`)."""
        op, ins = node.op_type, node.inputs
        first = self.value(ins[0]) if ins else None
        if op == "Shape":
            dims = self.of(ins[0]) if ins else None
            if dims is None or any(d is None for d in dims):
                return None
            start, end = _int(node, "start"), node.attributes.get("end")
            return dims[start : int(end.value) if end is not None else len(dims)]
        if op == "Identity" or (op == "Cast" and attr_data_type(node.attributes.get("to")) in _INT_TYPES):
            return first
        if op in ("Squeeze", "Unsqueeze"):
            return first if first is not None and len(first) == 1 else None
        if op == "Reshape" and first is not None and len(ins) > 1:
            return first if _flattened(len(first), self.value(ins[1])) else None
        if op == "Gather" and _int(node, "axis") == 0 and first is not None and len(ins) > 1:
            index = self.value(ins[1])
            n = len(first)
            if index is None or not all(isinstance(i, int) and -n <= i < n for i in index):
                return None
            return tuple(first[i] for i in index)  # type: ignore[index]
        if op == "Concat" and _int(node, "axis") in (0, -1):
            parts = [self.value(v) for v in ins]
            return None if any(p is None for p in parts) else tuple(d for p in parts for d in p)  # type: ignore[union-attr]
        if op == "Slice" and first is not None:
            starts, ends, axes, steps = (self.value(ins[k]) if k < len(ins) else None for k in (1, 2, 3, 4))
            plain = (
                starts is not None
                and ends is not None
                and len(starts) == len(ends) == 1
                and axes in (None, (0,), (-1,))
                and steps in (None, (1,))
            )
            return first[slice(starts[0], ends[0])] if plain else None  # type: ignore[arg-type,index]  # plain: ints
        if op in ARITHMETIC and first is not None and len(ins) == 2:
            other = self.value(ins[1])
            if other is None or len(other) != len(first):
                return None
            if not all(isinstance(d, int) for d in first + other):
                items = _symbolic(op, first, other)
                return items if items is not None and self.no_declared_products(first + other + items) else None
            if op == "Div" and 0 in other:
                return None
            return tuple(_arithmetic(op, a, b) for a, b in zip(first, other))  # type: ignore[arg-type]
        return None

    def hints(self, node: ir.Node) -> tuple[Dim, ...]:
        """What output 0's dims are known to equal, position by position (None: nothing known)."""
        ins = [self.of(v) for v in node.inputs]
        out = node.outputs[0] if node.outputs else None
        rank = len(out.shape) if out is not None and out.shape is not None else None
        if rank is None or node.domain not in ("", "ai.onnx") or not ins:
            return ()
        op = node.op_type
        x = ins[0]
        if op in SAME_SHAPE and x is not None and len(x) == rank:
            return x
        if op in BROADCASTING:
            return _broadcast([s for s in ins if s is not None], rank) if all(s is not None for s in ins) else ()
        if op == "Transpose" and x is not None and len(x) == rank:
            perm = _ints(node, "perm") or list(reversed(range(rank)))
            return tuple(x[p] for p in perm) if sorted(perm) == list(range(rank)) else ()
        if op in MATMULS and len(ins) >= 2:
            return _matmul(ins[0], ins[3] if op == "QLinearMatMul" and len(ins) > 3 else ins[1], rank)
        if op == "Gemm" and len(ins) >= 2 and rank == 2 and ins[0] is not None and ins[1] is not None:
            a, b = ins[0], ins[1]
            return (a[1] if _int(node, "transA") else a[0], b[0] if _int(node, "transB") else b[1])
        if op in WINDOWED and x is not None and len(x) == rank:
            return (x[0], None, *self.windowed(node, x))
        if op in GLOBAL_POOLS and x is not None and len(x) == rank:
            return (x[0], x[1])
        if op in REDUCTIONS and x is not None:
            return self.reduced(node, x, rank)
        target = self.value(node.inputs[1]) if len(node.inputs) > 1 else None
        if op == "Reshape" and target is not None and len(target) == rank:
            dims = _reshaped(x, target, copy_zeros=not _int(node, "allowzero"))
            return dims if self.no_declared_products((*(x or ()), *target, *dims)) else ()
        if op == "Expand" and target is not None and x is not None and len(target) == rank:
            return _broadcast([x, target], rank)
        if op == "Concat":
            return self.concat(node, ins, rank)
        if op in ("Unsqueeze", "Squeeze") and x is not None:
            axes = self.value(node.inputs[1]) if len(node.inputs) > 1 else _ints(node, "axes")
            return _unsqueezed(x, axes, rank) if op == "Unsqueeze" else _squeezed(x, axes, rank)
        if op == "Slice" and x is not None and len(x) == rank and len(node.inputs) >= 3:
            return self.sliced(node, x)
        if op == "ConstantOfShape":
            shape = self.value(node.inputs[0])
            return shape if shape is not None and len(shape) == rank else ()
        return ()

    def reduced(self, node: ir.Node, x: tuple[Dim, ...], rank: int) -> tuple[Dim, ...]:
        """A reduction's dims: x's, each reduced axis 1 (keepdims) or dropped; no axes reduce all of them
        (or none, with noop_with_empty_axes); ArgMax/ArgMin reduce their `axis`."""
        if node.op_type in ("ArgMax", "ArgMin"):
            axes: Sequence[Dim] | None = [_int(node, "axis")]
        else:
            given = node.inputs[1] if len(node.inputs) > 1 else None
            axes = self.value(given) if given is not None else _ints(node, "axes")
            if given is not None and axes is None:
                return ()  # axes computed at run time
        if axes is not None and not all(isinstance(a, int) and -len(x) <= a < len(x) for a in axes):
            return ()
        if not axes:
            if _int(node, "noop_with_empty_axes") and node.op_type not in ("ArgMax", "ArgMin"):
                return x if len(x) == rank else ()
            axes = range(len(x))
        gone = {a % len(x) for a in axes}  # type: ignore[operator]
        keep = _int(node, "keepdims") if "keepdims" in node.attributes else 1
        out = tuple(1 if a in gone else d for a, d in enumerate(x)) if keep else _squeezed(x, sorted(gone), rank)
        return out if len(out) == rank else ()

    def concat(self, node: ir.Node, ins: list[tuple[Dim, ...] | None], rank: int) -> tuple[Dim, ...]:
        """A Concat's dims: the inputs agree off the axis (ONNX requires it: their dims are unified), the
        axis is the sum of sizes (unknown when one is a symbol)."""
        if any(s is None or len(s) != rank for s in ins) or rank == 0:
            return ()
        axis = _int(node, "axis") % rank
        out: list[Dim] = []
        for a in range(rank):
            dims = [s[a] for s in ins]  # type: ignore[index]
            if a == axis:
                out.append(sum(dims) if all(isinstance(d, int) for d in dims) else None)  # type: ignore[arg-type]
                continue
            for d in dims[1:]:
                self.unify(dims[0], d)
            out.append(self.find(dims[0]))
        return tuple(out)

    def sliced(self, node: ir.Node, x: tuple[Dim, ...]) -> tuple[Dim, ...]:
        """A Slice's output dims: an axis it does not slice, or slices whole (start 0 or below -dim, end past
        any dim, step 1), keeps x's dim; a static axis gets its length; the rest are unknown."""
        starts, ends, axes, steps = (self.value(node.inputs[k]) if k < len(node.inputs) else None for k in (1, 2, 3, 4))
        if starts is None or ends is None or len(starts) != len(ends):
            return ()
        axes = axes if axes is not None else tuple(range(len(starts)))
        steps = steps if steps is not None else (1,) * len(starts)
        if len(axes) != len(starts) or len(steps) != len(starts) or not all(isinstance(a, int) for a in axes):
            return ()
        out = list(x)
        for start, end, axis, step in zip(starts, ends, axes, steps):
            if not isinstance(start, int) or not isinstance(end, int) or not -len(x) <= axis < len(x):  # type: ignore[operator]
                return ()
            dim = x[axis]  # type: ignore[index]
            whole = step == 1 and (start == 0 or start <= -_HUGE) and end >= _HUGE
            static = isinstance(dim, int) and isinstance(step, int) and step != 0
            out[axis] = dim if whole else len(range(dim)[start:end:step]) if static else None  # type: ignore[arg-type,index]  # static: ints
        return tuple(out)

    def windowed(self, node: ir.Node, x: tuple[Dim, ...]) -> list[Dim]:
        """Spatial output dims as names that encode the window formula over the input's dims."""
        spatial = len(x) - 2
        kernel = _ints(node, "kernel_shape")
        if kernel is None or len(kernel) != spatial:
            return [None] * spatial
        strides = _ints(node, "strides") or [1] * spatial
        dilations = _ints(node, "dilations") or [1] * spatial
        pads = _ints(node, "pads") or [0] * (2 * spatial)
        auto_pad = node.attributes.get("auto_pad")
        mode = auto_pad.value if auto_pad is not None else "NOTSET"
        ceil = _int(node, "ceil_mode")
        return [
            None
            if x[2 + i] is None
            else f"{node.op_type}({x[2 + i]};k{kernel[i]} s{strides[i]} d{dilations[i]} "
            f"p{pads[i]},{pads[i + spatial]} {mode} c{ceil})"
            for i in range(spatial)
        ]


def _arithmetic(op: str, a: int, b: int) -> int:
    """The integer arithmetic a shape computation may do on sizes (ARITHMETIC: Add, Sub, Mul, Div)."""
    return a + b if op == "Add" else a - b if op == "Sub" else a * b if op == "Mul" else a // b


#: Integer dtypes a Cast inside a shape computation may go to.
_INT_TYPES = frozenset({ir.DataType.INT64, ir.DataType.INT32})
#: A Slice bound at least this large is past the end of any dim (exporters write INT64_MAX or INT32_MAX).
_HUGE = 2**31 - 1
#: Largest constant read as a shape computation's operand.
MAX_SHAPE_VALUE = 16


def _flattened(count: int, target: tuple[Dim, ...] | None) -> bool:
    """Whether Reshape(v, target) of a shape computation v of `count` elements (rank <= 1) keeps them in order
    at rank <= 1: a constant target [-1] or [count], or [] (a scalar) of one element. A target of rank 2
    (a [2, 1] view) is no list of elements: its axis 0 holds rows."""
    if target is None or len(target) > 1:
        return False
    return target in ((-1,), (count,)) or (target == () and count == 1)


def _symbolic(op: str, first: tuple[Dim, ...], other: tuple[Dim, ...]) -> tuple[Dim, ...] | None:
    """Mul of sizes and symbols as a product symbol (named by its factors, `_product`, as `_inferred` names
    the dim a Reshape merges), and Div of a product symbol by a size that divides its size factor ("4*time"
    / 4 is time); None for anything else (a sum of symbols, a negative size, a division with a remainder)."""
    if None in first or None in other or any(isinstance(d, int) and d < 0 for d in first + other):
        return None
    out: list[Dim] = []
    for a, b in zip(first, other):
        if op == "Mul":
            size, factors = _factors([a, b])
            out.append(_product(size, factors) if size else 0)  # a size 0 is 0 whatever the symbols
            continue
        size, factors = _factors([a])
        if op != "Div" or not isinstance(b, int) or b == 0 or size % b != 0:
            return None
        out.append(_product(size // b, factors))
    return tuple(out)


def _broadcast(shapes: Sequence[tuple[Dim, ...]], rank: int) -> tuple[Dim, ...]:
    """Per output axis: the one dim other than 1 that every operand agrees on, else None."""
    out: list[Dim] = []
    for axis in range(rank):
        seen = {s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0}
        seen.discard(1)
        out.append(seen.pop() if len(seen) == 1 and None not in seen else None)
    return tuple(out)


def _reshaped(x: tuple[Dim, ...] | None, target: tuple[Dim, ...], copy_zeros: bool) -> tuple[Dim, ...]:
    """A Reshape's output dims from its target: a 0 copies x's dim (unless allowzero), a -1 is what x's
    element count leaves (`_inferred`)."""
    out: list[Dim] = []
    for k, t in enumerate(target):
        if t == 0 and copy_zeros:
            out.append(x[k] if x is not None and k < len(x) else None)
        else:
            out.append(t)
    if out.count(-1) == 1 and x is not None:
        out[out.index(-1)] = _inferred(x, [d for d in out if d != -1])
    return tuple(None if isinstance(d, int) and d < 0 else d for d in out)


def _inferred(x: tuple[Dim, ...], others: list[Dim]) -> Dim:
    """The dim d with prod(x) = d * prod(others), when the symbols say it: others' factors are among x's and
    the sizes divide. A product of several factors is a symbol of its own, named by its factors
    (`_product`), so that merging two axes and splitting them again gives back the same dims."""
    if None in x or None in others or 0 in x or 0 in others:
        return None
    x_size, x_factors = _factors(x)
    size, factors = _factors(others)
    for f in factors:
        if f not in x_factors:
            return None
        x_factors.remove(f)
    return _product(x_size // size, x_factors) if x_size % size == 0 else None


#: Joins the factors of a product symbol ("3*batch"); dim_params rarely hold it, and a declared one that
#: does is merely never split.
PRODUCT = "*"


def _factors(dims: Sequence[Dim]) -> tuple[int, list[str]]:
    """The product of `dims` as a size and the symbols it multiplies (product symbols split up)."""
    size, factors = 1, []
    for d in dims:
        if isinstance(d, int):
            size *= d
        else:
            parts = str(d).split(PRODUCT)
            if len(parts) > 1 and parts[0].isdigit():
                size *= int(parts[0])
                parts = parts[1:]
            factors += parts
    return size, factors


def _product(size: int, factors: list[str]) -> Dim:
    if not factors:
        return size
    if size == 1 and len(factors) == 1:
        return factors[0]
    return PRODUCT.join(([str(size)] if size != 1 else []) + sorted(factors))


def _unsqueezed(x: tuple[Dim, ...], axes: Sequence[Dim] | None, rank: int) -> tuple[Dim, ...]:
    """x's dims with 1 at `axes` (of the output's rank)."""
    if axes is None or not all(isinstance(a, int) and -rank <= a < rank for a in axes) or len(x) + len(axes) != rank:
        return ()
    ones = {a % rank for a in axes}  # type: ignore[operator]
    rest = iter(x)
    return tuple(1 if a in ones else next(rest) for a in range(rank))


def _squeezed(x: tuple[Dim, ...], axes: Sequence[Dim] | None, rank: int) -> tuple[Dim, ...]:
    """x's dims without `axes` (without its 1s when there are none and no dim is unknown)."""
    if axes is None or not axes:
        kept = tuple(d for d in x if d != 1)
        return kept if all(isinstance(d, int) for d in x) and len(kept) == rank else ()
    if not all(isinstance(a, int) and -len(x) <= a < len(x) for a in axes):
        return ()
    gone = {a % len(x) for a in axes}  # type: ignore[operator]
    kept = tuple(d for a, d in enumerate(x) if a not in gone)
    return kept if len(kept) == rank else ()


def _matmul(a: tuple[Dim, ...] | None, b: tuple[Dim, ...] | None, rank: int) -> tuple[Dim, ...]:
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return ()
    batch = _broadcast([a[:-2], b[:-2]], rank - 2) if rank > 2 else ()
    return (*batch, a[-2], b[-1])


def _ints(node: ir.Node, name: str) -> list[int] | None:
    attr = node.attributes.get(name)
    return [int(v) for v in attr.value] if attr is not None else None


def _int(node: ir.Node, name: str) -> int:
    attr = node.attributes.get(name)
    return int(attr.value) if attr is not None else 0


def attr_data_type(attr: ir.Attr | None) -> ir.DataType | None:
    """The data type an attribute names: its code, or its TensorProto name (Cast's `to` is a string before opset
    6, e.g. "INT32"); None when absent or naming no data type."""
    if attr is None:
        return None
    value = attr.value
    if isinstance(value, str):
        return ir.DataType.__members__.get(value)
    try:
        return ir.DataType(int(value))
    except (TypeError, ValueError):
        return None


@dataclasses.dataclass
class ShapeFacts:
    """A graph's shape facts: per value of known rank its shape, per shape computation (an integer tensor of
    rank <= 1 computed from shapes) its elements; sizes >= 0, symbols < 0, named by `table`."""

    shapes: dict[str, tuple[int, ...]]
    values: dict[str, tuple[int | str, ...]]  # elements: integers (-1 included), or symbols by name
    table: SymbolTable

    def named(self, dims: Sequence[int]) -> tuple[int | str, ...]:
        """A shape fact with its symbols by name, comparable with the elements of `values`."""
        names = self.table.names
        return tuple(d if d >= 0 else names[d] for d in dims)


#: `model.meta` key of the ShapeFacts normalization computed on the graph as it left it (nothing changed the graph or
#: its shapes after): the first encoding takes them instead of computing them again (30 ms of rn200's 1.3 s).
SHAPE_FACTS = "eqsat.shape_facts"


def symbolic_shapes(graph: ir.Graph, table: SymbolTable | None = None) -> ShapeFacts:
    """Every value of known rank in `graph` (inputs, initializers, node outputs) as a shape fact, and the
    shape computations evaluated, walking the graph once in order."""
    table = table if table is not None else SymbolTable()
    recovery = _Recovery(table)
    for value in graph.inputs:
        recovery.named(value)
    for value in graph.initializers.values():
        recovery.named(value)
    for node in graph:
        recovery.node(node)

    known = {name: dims for name, dims in recovery.resolved(recovery.dims).items() if None not in dims}
    shapes = {name: tuple(d if isinstance(d, int) else table.id(str(d)) for d in dims) for name, dims in known.items()}
    values = {name: items for name, items in recovery.resolved(recovery.values).items() if None not in items}
    return ShapeFacts(shapes, values, table)  # type: ignore[arg-type]
