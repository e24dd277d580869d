"""Dynamic dims for drawn graphs (`onnx_graphs`): a dim the model leaves open (`Sym`), the names exporters
declare such dims by (`DIM_NAMES`), and the shape computations exporters build over them (`draw_chain`:
Shape, Slice, Gather, Unsqueeze, Concat into run-time Reshape and Expand targets, one target or Shape value
read by several consumers).

A drawn graph with dynamic dims is run at two sizes of every dynamic dim, A (the size it is drawn at) and B
(larger, so constants drawn at A such as slice bounds stay valid), never 1: a size of 1 hides every bug
where a dim was taken for 1. The drawing code computes with sizes at A; a `Sym` is that size as an int, so the
code works unchanged, and carries what it is (its label) and its size at B. A size that would be baked into a
constant (a Reshape target, a weight's shape) is refused (`Baked`): the step is then not taken.
"""

from __future__ import annotations

import functools
import operator
from typing import Any, Callable, Sequence

import numpy as np
import onnx.numpy_helper as onh

#: dim_param names drawn for dynamic dims (batch-like and others, as exporters write them); None is a dim
#: left unnamed (ONNX's unknown dim).
DIM_NAMES = ("batch", "N", "seq", "unk__3", "height", None)
#: (size at A, size at B) a dynamic dim is drawn with.
SIZES = ((2, 3), (2, 4), (3, 5))


class Baked(Exception):
    """A step would write a dynamic dim's size into a constant: it is not taken."""


#: What a Sym's arithmetic computes: sign -> (operation, neutral operand).
_ARITHMETIC: dict[str, tuple[Callable[[int, int], int], int]] = {
    "+": (operator.add, 0),
    "-": (operator.sub, 0),
    "*": (operator.mul, 1),
    "//": (operator.floordiv, 1),
}


def _operators(sign: str) -> tuple[Callable[[Any, Any], Any], Callable[[Any, Any], Any]]:
    """A Sym's `sign` operator and its reflection."""
    return (lambda self, other: self._combine(other, sign, False), lambda self, other: self._combine(other, sign, True))


class Sym(int):
    """A dynamic dim: its size at A as an int, its `label` (a declared name, or an expression of labels) and
    its size at B. Equal only to a Sym of the same label: a static dim of the same size at A, or another
    dim that happens to have it, is a different dim. Arithmetic with ints or Syms gives a Sym."""

    label: str
    b: int
    alias: tuple[str | None] | None  # declared by another name (or unnamed) than its label: (that name,)

    def __new__(cls, a: int, label: str, b: int, alias: tuple[str | None] | None = None) -> "Sym":
        obj = super().__new__(cls, a)
        obj.label, obj.b, obj.alias = label, int(b), alias
        return obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sym) and other.label == self.label

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.label)

    def __repr__(self) -> str:
        return f"{self.label}={int(self)}|{self.b}"

    def _combine(self, other: Any, sign: str, swap: bool) -> Any:
        if not isinstance(other, int):
            return NotImplemented
        op, neutral = _ARITHMETIC[sign]
        if not isinstance(other, Sym) and int(other) == neutral and (not swap or sign in ("+", "*")):
            return self  # x + 0, x - 0, x * 1, x // 1, 0 + x and 1 * x are x
        theirs = (int(other), other.b, other.label) if isinstance(other, Sym) else (int(other), int(other), str(other))
        (la, lb, ll), (ra, rb, rl) = (
            (theirs, (int(self), self.b, self.label)) if swap else ((int(self), self.b, self.label), theirs)
        )
        return Sym(op(la, ra), f"({ll}{sign}{rl})", op(lb, rb))

    __add__, __radd__ = _operators("+")
    __sub__, __rsub__ = _operators("-")
    __mul__, __rmul__ = _operators("*")
    __floordiv__, __rfloordiv__ = _operators("//")


def is_dynamic(dims: Sequence[int]) -> bool:
    return any(isinstance(d, Sym) for d in dims)


def static(values: Sequence[Any]) -> list[int]:
    """`values` as plain ints; Baked when one is a dynamic dim."""
    if any(isinstance(v, Sym) for v in values):
        raise Baked(f"a dynamic dim in a constant: {list(values)}")
    return [int(v) for v in values]


def product(dims: Sequence[int]) -> int:
    """The product of `dims`, a Sym when one of them is (numpy's prod would drop what it is)."""
    return functools.reduce(operator.mul, dims, 1)


def at_b(dims: Sequence[int]) -> tuple[int, ...]:
    """`dims` at size B."""
    return tuple(d.b if isinstance(d, Sym) else int(d) for d in dims)


def same_dim(a: int, b: int) -> bool:
    """The same dim at every size: one label, or both static and equal."""
    return a == b if isinstance(a, Sym) or isinstance(b, Sym) else int(a) == int(b)


def dynamic_shape(draw: Callable, st: Any, shape: Sequence[int]) -> tuple[int, ...]:
    """`shape` with some dims dynamic (the first more often): each named from DIM_NAMES and sized from SIZES;
    dims given one name are one Sym (one size everywhere, as ONNX declares it), unnamed ones each their own."""
    syms: dict[str, Sym] = {}
    out: list[int] = []
    for i, d in enumerate(shape):
        if draw(st.integers(0, 99)) >= (60 if i == 0 else 30):
            out.append(d)
            continue
        name = draw(st.sampled_from(DIM_NAMES))
        label = name if name is not None else f"?{i}"
        if label not in syms:
            a, b = draw(st.sampled_from(SIZES))
            syms[label] = Sym(a, label, b)
        out.append(syms[label])
    return tuple(out)


def aliased(draw: Callable, st: Any, shape: Sequence[int], taken: Sequence[int]) -> tuple[int, ...]:
    """`shape` (a second input's) with some dynamic dims declared by another name, or unnamed: the same size
    wherever the model runs, which eqsat cannot know. A name is never one that `taken` (the first input's dims)
    or another alias gives a different dim."""
    owner = {d.label: d.label for d in taken if isinstance(d, Sym)}
    out = []
    for d in shape:
        if isinstance(d, Sym) and draw(st.integers(0, 99)) < 30:
            name = draw(st.sampled_from([n for n in DIM_NAMES if n is None or owner.get(n, d.label) == d.label]))
            if name is not None:
                owner[name] = d.label
            d = Sym(int(d), d.label, d.b, (name,))
        out.append(d)
    return tuple(out)


def declared(d: int, aliased_labels: set[str] | frozenset[str] = frozenset()) -> int | str | None:
    """How an input or output declares dim `d`: its size, its name, or unnamed (None: an unnamed input dim, a
    dim computed from dynamic ones, or in an output one of `aliased_labels`, which inputs name differently)."""
    if not isinstance(d, Sym):
        return int(d)
    if d.label.startswith(("?", "(")) or d.label in aliased_labels:
        return None
    return d.alias[0] if d.alias is not None else d.label


def reshape_spec(spec: Sequence[int], shape: Sequence[int]) -> list[int]:
    """A Reshape target for the dims `spec` of an input of dims `shape`: a dynamic dim becomes 0 where the input
    has it at the same index, and one other becomes -1; a target that needs more stays dynamic (and is Baked)."""
    out: list[int] = []
    for i, d in enumerate(spec):
        if isinstance(d, Sym) and i < len(shape) and d == shape[i]:
            out.append(0)
        elif isinstance(d, Sym) and -1 not in spec and -1 not in out:
            out.append(-1)
        else:
            out.append(d)
    return out


# --------------------------------------------------------------------------------------------------
# shape-computation chains (the `chains` family of onnx_graphs)


def draw_chain(fz: Any, x: Any, max_elements: int) -> Any:
    """A run-time Reshape or Expand target computed from shapes (Shape of `x` or of another value with the
    same dim, Slice/Gather/Unsqueeze pieces, constants, Concat) and applied to `x`; the same target, or Shape
    value, often feeds a second consumer (a Reshape and an Expand, as tf2onnx's LayerNorm broadcasting does).
    `fz` is the graph drawer of onnx_graphs. Returns the new value, or None when `x` does not suit."""
    rank, dims = len(x.shape), x.shape
    if rank == 0:
        return None
    kind = fz.pick(("insert-one", "merge-tail", "merge-pair", "swap", "split-last", "expand", "expand", "like"))
    if kind == "expand":
        return _expand(fz, x, max_elements)
    if kind == "like":  # torch's ones_like / full_like: ConstantOfShape(Shape(x)) combined with x
        fill = fz.pick((0.0, 1.0, 0.5))
        const = fz.node("ConstantOfShape", [_shape(fz, x)], value=onh.from_array(np.array([fill], np.float32)))
        return fz.add(fz.node(fz.pick(("Add", "Mul", "Max")), [x.name, const]), dims, False)
    i = fz.draw(fz.st.integers(0, rank - 1))
    if kind == "insert-one":
        plan: list[Any] = [(0, i), [1], (i, rank)]
        new = [*dims[:i], 1, *dims[i:]]
    elif kind == "merge-tail":
        plan, new = [(0, i), [-1]], [*dims[:i], product(dims[i:])]
    elif kind == "merge-pair" and i + 1 < rank:
        merged = product(dims[i : i + 2])
        middle = ("mul", i) if fz.chance(0.4) else [-1] if isinstance(merged, Sym) else [int(merged)]
        plan, new = [(0, i), middle, (i + 2, rank)], [*dims[:i], merged, *dims[i + 2 :]]
    elif kind == "swap" and rank >= 2:  # Reshape to the dims in another order: the same element count
        j = fz.pick([k for k in range(rank) if k != i])
        order = list(range(rank))
        order[i], order[j] = j, i
        plan, new = [("gather", order)], [dims[k] for k in order]
    elif kind == "split-last" and dims[-1] % 2 == 0 and at_b(dims[-1:])[0] % 2 == 0:  # heads: [..., 2, d / 2]
        half: Any = ("half", rank - 1) if isinstance(dims[-1], Sym) or fz.chance(0.4) else [dims[-1] // 2]
        plan, new = [(0, rank - 1), [2], half], [*dims[:-1], 2, dims[-1] // 2]
    else:
        return None
    target = _target(fz, x, plan)
    out = fz.add(fz.node("Reshape", [x.name, target]), new, x.exact)
    twins = [v for v in fz.pool if v is not x and len(v.shape) == rank and all(map(same_dim, v.shape, dims))]
    if twins and fz.chance(0.3):  # the target read by a Reshape of another value of x's dims
        twin = fz.add(fz.node("Reshape", [fz.pick(twins).name, target]), new, False)
        out = fz.add(fz.node("Sub", [out.name, twin.name]), new, False)
    if [-1] not in plan and fz.chance(0.5):  # the target read by an Expand: of `out`, or of a value broadcasting to it
        partners = [v for v in fz.pool if _broadcasts(v.shape, new)]
        y = fz.pick(partners) if partners and fz.chance(0.5) else out
        expanded = fz.add(fz.node("Expand", [y.name, target]), new, y.exact)
        if fz.chance(0.5):  # both consumers live
            return fz.add(fz.node(fz.pick(("Add", "Max")), [out.name, expanded.name]), new, False)
        return expanded
    return out


def _expand(fz: Any, x: Any, max_elements: int) -> Any:
    """Expand(x, target): each dim of x kept ([1] or its own dim read from a shape) or, where x has a static 1,
    broadcast to a constant or to a dynamic dim of another value; a leading dim may be added."""
    dims = list(x.shape)
    lead = fz.draw(fz.st.integers(0, 1))
    pieces: list[Any] = []
    new: list[int] = []
    for k in range(-lead, len(dims)):
        d = dims[k] if k >= 0 else 1
        others = [(v, j) for v in fz.pool for j, e in enumerate(v.shape) if isinstance(e, Sym)]
        if d == 1 and not isinstance(d, Sym) and others and fz.chance(0.4):
            v, j = fz.pick(others)
            pieces.append(("of", v, j, j + 1))
            new.append(v.shape[j])
        elif d == 1 and not isinstance(d, Sym):
            size = fz.pick((1, 2, 3))
            pieces.append([size])
            new.append(size)
        elif fz.chance(0.5):
            pieces.append([1])
            new.append(d)
        else:
            pieces.append(("of", x, k, k + 1))
            new.append(d)
    if product(new) > max_elements or product(at_b(new)) > 2 * max_elements:
        return None
    target = _concat(fz, [_piece(fz, p) for p in pieces])
    out = fz.add(fz.node("Expand", [x.name, target]), new, x.exact)
    if fz.chance(0.3):  # the Shape of the result read again: a second Expand of x to it
        again = fz.add(fz.node("Expand", [x.name, _shape(fz, out)]), new, x.exact)
        return fz.add(fz.node("Add", [out.name, again.name]), new, False)
    return out


def _target(fz: Any, x: Any, plan: Sequence[Any]) -> str:
    """The 1-D int64 target a plan describes: (lo, hi) is x's dims lo:hi, ("gather", order) x's dims in
    that order, a list a constant."""
    names = []
    for p in plan:
        if isinstance(p, tuple) and p[0] == "gather":
            names.append(fz.node("Gather", [_shape(fz, x), fz.ints(p[1])], axis=0))
        elif isinstance(p, tuple) and p[0] == "mul":  # a merged dim computed: dim i times dim i + 1
            i = p[1]
            names.append(fz.node("Mul", [_piece(fz, ("of", x, i, i + 1)), _piece(fz, ("of", x, i + 1, i + 2))]))
        elif isinstance(p, tuple) and p[0] == "half":  # a dim split in two: dim i / 2
            names.append(fz.node("Div", [_piece(fz, ("of", x, p[1], p[1] + 1)), fz.ints([2])]))
        elif isinstance(p, tuple) and p[0] < p[1]:  # one piece, or one per dim
            ranges = [(k, k + 1) for k in range(*p)] if fz.chance(0.3) else [p]
            names.extend(_piece(fz, ("of", x, lo, hi)) for lo, hi in ranges)
        elif isinstance(p, tuple):
            continue  # an empty range
        else:
            names.append(_piece(fz, p))
    return _concat(fz, names)


def _piece(fz: Any, p: Any) -> str:
    """A 1-D int64 tensor: a constant (a list), or ("of", v, lo, hi), v's dims lo:hi, read from the Shape of
    v or (one dynamic dim) of another value that has the same dim; sometimes through a Reshape to [-1], or a
    Cast to int32 and back."""
    if isinstance(p, list):
        return fz.ints(static(p))
    read = _read(fz, p)
    if fz.chance(0.15):  # flattened again, as exporters do: Reshape(piece, [-1]) keeps its elements
        read = fz.node("Reshape", [read, fz.ints([-1])])
    if fz.chance(0.1):
        return fz.node("Cast", [fz.node("Cast", [read], to=6)], to=7)  # INT32, INT64
    return read


def _read(fz: Any, p: Any) -> str:
    """`_piece`'s ("of", v, lo, hi), read by a Slice, a Gather (1-D index, or scalar and Unsqueeze), or Shape's
    start and end (opset 15)."""
    _, v, lo, hi = p
    if hi == lo + 1:
        same = [(w, j) for w in fz.pool for j, e in enumerate(w.shape) if isinstance(e, Sym) and e == v.shape[lo]]
        if same and fz.chance(0.4):
            v, lo = fz.pick(same)
            hi = lo + 1
        if not isinstance(v.shape[lo], Sym) and fz.chance(0.3):
            return fz.ints([int(v.shape[lo])])
    rank = len(v.shape)
    kind = fz.pick(("slice", "gather", "shape-range") if hi == lo + 1 else ("slice", "gathers", "shape-range"))
    if kind == "shape-range" and fz.opset >= 15:
        return fz.node("Shape", [v.name], start=lo, **({"end": hi} if hi < rank or fz.chance(0.5) else {}))
    if kind == "gather":
        if fz.chance(0.5):
            scalar = fz.node("Gather", [_shape(fz, v), fz.const("i", np.array(lo, np.int64))], axis=0)
            return fz.axes_node("Unsqueeze", scalar, [0], 13)
        return fz.node("Gather", [_shape(fz, v), fz.ints([lo if fz.chance() else lo - rank])], axis=0)
    if kind == "gathers":
        return fz.node("Gather", [_shape(fz, v), fz.ints(list(range(lo, hi)))], axis=0)
    end = hi if hi < rank or fz.chance(0.5) else 2**62
    if end < rank and fz.chance(0.3):
        end -= rank
    return fz.node("Slice", [_shape(fz, v), fz.ints([lo if fz.chance(0.7) else lo - rank]), fz.ints([end])])


def _shape(fz: Any, v: Any) -> str:
    """Shape(v): the one already drawn for v most of the time, so one Shape value feeds several readers."""
    known = fz.shapes.get(v.name)
    if known is not None and fz.chance(0.7):
        return known
    fz.shapes[v.name] = name = fz.node("Shape", [v.name])
    return name


def _concat(fz: Any, names: Sequence[str]) -> str:
    if len(names) == 1 and fz.chance(0.5):
        return names[0]
    return fz.node("Concat", list(names), axis=0)


def _broadcasts(shape: Sequence[int], target: Sequence[int]) -> bool:
    """`shape` broadcasts to exactly `target` at every size."""
    if len(shape) > len(target):
        return False
    return all((not isinstance(d, Sym) and d == 1) or same_dim(d, t) for d, t in zip(reversed(shape), reversed(target)))
