"""What each consumer accepts of a drawn input: one handler per (op, input position).

A handler is called with the drawing context (`Context`: the concrete shape facts, the constants and the
inputs drawn so far, the seeded generator), the consuming node, the input's position in it, the shape the
value has there, and whether the input's length is ours to choose (a rank-1 input of dynamic size). It
returns what the value may be:

- `Bound(high, low)`: integers in [low, high); `high` may be one bound per position of the last axis
  (GatherND's and ScatterND's index tuples),
- an array: the value itself (shape vectors, repeats, axes, k, pads, slice bounds, scales, ...), reshaped
  by the caller to the input's shape (or, when its length is ours to choose, taken as it is),
- `DEFER`: it needs an input not drawn yet (OneHot's indices need its depth),
- None: the facts it needs are unknown (the caller falls back to small values and redraws if the
  original refuses them).

Sizes a handler chooses stay within `ELEMENT_BUDGET` (eqsat.check.verify_facts) where the data's size is known.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

import numpy as np
import onnx

from eqsat.check.verify_facts import ELEMENT_BUDGET
from eqsat.ops import AXES_REDUCTIONS, WINDOW_FUNCTIONS

DEFER = "defer"


@dataclasses.dataclass
class Bound:
    high: Any  # an int, or a list of ints: one per position of the last axis
    low: int = 0


@dataclasses.dataclass
class Context:
    facts: Mapping[str, tuple]  # concrete shapes (None entries where unknown)
    constants: Mapping[str, np.ndarray]  # small initializers and Constant nodes' values
    drawn: dict[str, Any]  # inputs drawn so far
    rng: np.random.Generator
    joint: dict[str, dict[int, np.ndarray]] = dataclasses.field(default_factory=dict)  # by node: per input
    pending: set[str] = dataclasses.field(default_factory=set)  # inputs still to be drawn
    budget: int = ELEMENT_BUDGET

    def dims(self, name: str) -> tuple[int, ...] | None:
        """The value's shape when every dim is known."""
        if name in self.drawn and isinstance(self.drawn[name], np.ndarray):
            return tuple(self.drawn[name].shape)
        dims = self.facts.get(name)
        return tuple(dims) if dims is not None and all(d is not None for d in dims) else None

    def rank(self, name: str) -> int | None:
        dims = self.facts.get(name)
        if name in self.drawn and isinstance(self.drawn[name], np.ndarray):
            return self.drawn[name].ndim
        return len(dims) if dims is not None else None

    def value(self, name: str) -> np.ndarray | None:
        if name in self.constants:
            return np.asarray(self.constants[name])
        found = self.drawn.get(name)
        return found if isinstance(found, np.ndarray) else None


Handler = Callable[[Context, onnx.NodeProto, int, tuple, bool], Any]


def attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            value = onnx.helper.get_attribute_value(a)
            return value.decode() if isinstance(value, bytes) else value
    return default


def _input(node: onnx.NodeProto, k: int) -> str:
    return node.input[k] if len(node.input) > k else ""


def _axis_dim(ctx: Context, node: onnx.NodeProto, data: str, default_axis: int = 0) -> int | None:
    dims = ctx.dims(data)
    if dims is None or not dims:
        return None
    axis = attr(node, "axis", default_axis)
    return dims[axis] if -len(dims) <= axis < len(dims) else None


def _count(here: tuple, flexible: bool, default: int) -> int:
    return default if flexible else int(np.prod(here, dtype=np.int64)) if here else 1


def _shrink(sizes: list[int], base: int, budget: int, keep: frozenset[int] | set[int] = frozenset()) -> list[int]:
    """`sizes` with chosen entries set back to 1 (from the last) until base * prod(sizes) fits `budget`."""
    sizes = list(sizes)
    for k in reversed(range(len(sizes))):
        if base * int(np.prod(sizes, dtype=np.int64)) <= budget:
            break
        if k not in keep:
            sizes[k] = 1
    return sizes


# ---- indices -------------------------------------------------------------------------------------------


def _indices(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Gather, GatherElements: within the indexed axis."""
    d = _axis_dim(ctx, node, node.input[0])
    return Bound(d) if d else None


def _scatter_elements(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Within the indexed axis, and distinct along it (a repeated index makes the result depend on order)."""
    data = ctx.dims(node.input[0])
    if data is None or not here or len(here) != len(data):
        return _indices(ctx, node, k, here, flexible)
    axis = attr(node, "axis", 0) % len(data)
    d = data[axis]
    if here[axis] > d:
        return Bound(d) if d else None
    moved = (*here[:axis], *here[axis + 1 :], d)
    order = np.argsort(ctx.rng.random(moved), axis=-1)[..., : here[axis]]
    return np.moveaxis(order, -1, axis)


def _index_tuples(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """GatherND, ScatterND: each index tuple within the dims it indexes (distinct for ScatterND)."""
    data = ctx.dims(node.input[0])
    if data is None or not here:
        return None
    batch = attr(node, "batch_dims", 0)
    bounds = list(data[batch : batch + here[-1]])
    if len(bounds) != here[-1] or not all(bounds):
        return None
    count = int(np.prod(here[:-1], dtype=np.int64))
    total = int(np.prod(bounds, dtype=np.int64))
    if node.op_type == "ScatterND" and count <= total and not batch:
        flat = ctx.rng.choice(total, size=count, replace=False)
        return np.stack(np.unravel_index(flat, bounds), axis=-1).reshape(here)
    return Bound(bounds)


def _one_hot_indices(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    depth = ctx.value(_input(node, 1))
    if depth is None:
        return DEFER if _input(node, 1) in ctx.pending else None
    return Bound(max(1, int(np.asarray(depth).reshape(-1)[0])))


def _one_hot_depth(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    indices = ctx.dims(node.input[0])
    size = int(np.prod(indices, dtype=np.int64)) if indices is not None else 1
    depth = int(ctx.rng.integers(2, 11))
    depth = max(1, min(depth, ctx.budget // max(size, 1)))
    return np.full(here or (), depth)


def _class_target(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss: a class of input (N, C, ...)."""
    dims = ctx.dims(node.input[0])
    return Bound(dims[1]) if dims is not None and len(dims) > 1 and dims[1] else None


def _batch_index(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    dims = ctx.dims(node.input[0])
    return Bound(dims[0]) if dims else None


def _sequence_lengths(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    dims = ctx.dims(node.input[0])
    axis = attr(node, "time_axis", 0)
    return Bound(dims[axis] + 1, 1) if dims and dims[axis] else None


def _flat_output_index(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """MaxUnpool: a flat index into the output."""
    out = ctx.dims(node.output[0])
    return Bound(int(np.prod(out, dtype=np.int64))) if out else None


def _last_axis(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    dims = ctx.dims(node.input[0])
    return Bound(dims[-1]) if dims and dims[-1] else None


def _sequence_position(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    sequence = ctx.drawn.get(node.input[0])
    length = len(sequence) if isinstance(sequence, list) else None
    if length is None:
        return None
    return Bound(length + (1 if node.op_type == "SequenceInsert" else 0))


# ---- axes ----------------------------------------------------------------------------------------------


def _axis(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """CumSum, CumProd: one axis within the rank."""
    rank = ctx.rank(node.input[0])
    return Bound(rank) if rank else None


def _axes(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Reduce*, Squeeze, Unsqueeze: distinct axes within the rank (Squeeze: of size 1;
    Unsqueeze: of the output)."""
    rank = ctx.rank(node.input[0])
    if rank is None:
        return None
    n = _count(here, flexible, 1)
    if node.op_type == "Squeeze":
        dims = ctx.facts.get(node.input[0]) or ()
        pool = [a for a, d in enumerate(dims) if d == 1]
    else:
        pool = list(range(rank + n if node.op_type == "Unsqueeze" else rank))
    if n > len(pool):
        return None
    return np.array(sorted(ctx.rng.choice(pool, size=n, replace=False)) if n else [], np.int64)


# ---- shapes and sizes ----------------------------------------------------------------------------------


def _reshape_shape(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """A target shape for the data: its dims merged into n groups (or padded with 1s), one of them -1."""
    dims = ctx.dims(node.input[0])
    if dims is None:
        return None
    rank = len(dims)
    n = _count(here, flexible, max(1, rank + int(ctx.rng.integers(-1, 2))))
    if n == 0:
        return np.zeros(0, np.int64) if int(np.prod(dims, dtype=np.int64)) == 1 else None
    if n <= rank:
        cuts = sorted(ctx.rng.choice(np.arange(1, rank), size=n - 1, replace=False)) if n > 1 else []
        edges = [0, *cuts, rank]
        target = [int(np.prod(dims[a:b], dtype=np.int64)) for a, b in zip(edges, edges[1:])]
    else:
        target = list(dims)
        for _ in range(n - rank):
            target.insert(int(ctx.rng.integers(0, len(target) + 1)), 1)
    if int(np.prod(dims, dtype=np.int64)) > 0:
        target[int(ctx.rng.integers(0, n))] = -1
    return np.array(target, np.int64)


def _expand_shape(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """A shape the data broadcasts to: its dims of size 1 (and new leading dims) grown to 2 or 3 while the
    output fits the budget, its other dims kept (or 1)."""
    dims = ctx.dims(node.input[0])
    if dims is None:
        return None
    n = _count(here, flexible, len(dims))
    target, grown = [], []
    for i in range(n):
        j = i - (n - len(dims))
        d = dims[j] if j >= 0 else 1
        if d != 1:
            target.append(d if ctx.rng.random() < 0.8 else 1)
        else:
            target.append(int(ctx.rng.integers(1, 4)))
            grown.append(i)

    def size(t: list[int]) -> int:
        m = max(n, len(dims))
        return int(
            np.prod([max(a, b) for a, b in zip([1] * (m - n) + t, [1] * (m - len(dims)) + list(dims))], dtype=np.int64)
        )

    for i in reversed(grown):
        if size(target) <= ctx.budget:
            break
        target[i] = 1
    return np.array(target, np.int64)


def _new_shape(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """ConstantOfShape: small dims, 1 to 5 each."""
    n = _count(here, flexible, 2)
    sizes = _shrink([int(ctx.rng.integers(1, 6)) for _ in range(n)], 1, ctx.budget)
    return np.array(sizes, np.int64)


def _repeats(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Tile: one repeat per axis, 1 to 3, the output within the budget."""
    rank = ctx.rank(node.input[0])
    n = _count(here, flexible, rank or 1)
    if rank is not None and n != rank:
        return None
    dims = ctx.dims(node.input[0])
    size = int(np.prod(dims, dtype=np.int64)) if dims is not None else ctx.budget // 64
    repeats = _shrink([int(ctx.rng.integers(1, 4)) for _ in range(n)], max(size, 1), ctx.budget)
    return np.array(repeats, np.int64)


def _resize(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Resize's scales or sizes (Upsample's scales): the spatial axes doubled within the budget (the first
    two of a rank >= 3 input kept: linear and cubic modes scale only those); scales empty when the node
    has sizes."""
    scales_at = 1 if node.op_type == "Upsample" else 2
    if k == scales_at and node.op_type == "Resize" and _input(node, 3):
        return np.zeros(0, np.float32)
    dims = ctx.dims(node.input[0])
    if dims is None:
        return None
    axes = [a % len(dims) for a in attr(node, "axes", list(range(len(dims))))]
    grow = [a >= 2 or len(dims) < 3 for a in axes]
    factors = _shrink([2 if g else 1 for g in grow], max(1, int(np.prod(dims, dtype=np.int64))), ctx.budget)
    if _count(here, flexible, len(axes)) != len(axes):
        return None
    if k == scales_at:
        return np.array(factors, np.float32)
    return np.array([dims[a] * f for a, f in zip(axes, factors)], np.int64)


def _col2im(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Col2Im's image_shape and block_shape for input (N, C * prod(block), L): a block (1, ..., 1, b) with b
    dividing the channels, an image (1, ..., 1, w) whose last axis holds exactly L blocks."""
    key = node.name or str(id(node))
    joint = ctx.joint.get(key)
    if joint is None:
        dims = ctx.dims(node.input[0])
        if dims is None or len(dims) != 3:
            return None
        n = _count(here, flexible, 2)
        pads = attr(node, "pads", [0] * 2 * n)
        strides = attr(node, "strides", [1] * n)
        dilations = attr(node, "dilations", [1] * n)
        channels, blocks = dims[1], dims[2]
        b = next((b for b in range(min(channels, 5), 0, -1) if channels % b == 0), 1)
        image, block = [], [1] * (n - 1) + [b]
        for i in range(n):
            pb, pe, s, d = pads[i], pads[i + n], strides[i], dilations[i]
            if i < n - 1:
                if pb + pe >= s:
                    return None
                image.append(1)
            else:
                image.append((blocks - 1) * s + d * (block[i] - 1) + 1 - pb - pe)
        if min(image) < 1:
            return None
        joint = {1: np.array(image, np.int64), 2: np.array(block, np.int64)}
        ctx.joint[key] = joint
    return joint[k]


def _top_k(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    d = _axis_dim(ctx, node, node.input[0], -1)
    if not d:
        return None
    return np.full(here or (1,), int(ctx.rng.integers(1, d + 1)), np.int64)


def _joint(ctx: Context, node: onnx.NodeProto, here: tuple = (), flexible: bool = True) -> dict[int, np.ndarray] | None:
    """Pad's pads and axes, Slice's starts, ends, axes and steps: drawn together for the data's shape."""
    key = node.name or str(id(node))
    if key in ctx.joint:
        return ctx.joint[key]
    dims = ctx.dims(node.input[0])
    if dims is None:
        return None
    axes_at = 3
    given_axes = ctx.value(_input(node, axes_at)) if _input(node, axes_at) else None
    if node.op_type == "Pad":
        axes = (
            [int(a) % len(dims) for a in given_axes.reshape(-1)] if given_axes is not None else list(range(len(dims)))
        )
        mode = attr(node, "mode", "constant")
        most = [min(2, d - 1) if mode == "reflect" else min(2, d) if mode == "wrap" else 2 for d in dims]
        pads = [int(ctx.rng.integers(0, max(most[a], 0) + 1)) for a in axes for _ in range(2)]
        pads = pads[0::2] + pads[1::2]
        joint = {1: np.array(pads, np.int64), 3: np.array(axes, np.int64)}
    else:
        n = len(dims) if flexible else _count(here, False, 1)
        if given_axes is not None:
            axes = [int(a) % len(dims) for a in given_axes.reshape(-1)]
            n = len(axes)
        elif n <= len(dims):
            axes = sorted(int(a) for a in ctx.rng.choice(len(dims), size=n, replace=False))
        else:
            return None
        lo = [int(ctx.rng.integers(0, dims[a] // 2 + 1)) for a in axes]
        hi = [int(ctx.rng.integers(dims[a] // 2 + 1, dims[a] + 1)) if dims[a] else 0 for a in axes]
        joint = {
            1: np.array(lo, np.int64),
            2: np.array(hi, np.int64),
            3: np.array(axes, np.int64),
            4: np.ones(len(axes), np.int64),
        }
    ctx.joint[key] = joint
    return joint


def _pad_or_slice(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    joint = _joint(ctx, node, here, flexible)
    if joint is None or k not in joint:
        return None
    return joint[k]


def _split(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Split's sizes (one per output) or SplitToSequence's (a chunk size when scalar): summing to the axis."""
    d = _axis_dim(ctx, node, node.input[0])
    if d is None:
        return None
    if node.op_type == "SplitToSequence" and not here and not flexible:
        return np.array(int(ctx.rng.integers(1, d + 1)) if d else 1, np.int64)
    parts = len(node.output) if node.op_type == "Split" else _count(here, flexible, 2)
    if d >= parts > 0:
        cuts = sorted(ctx.rng.choice(np.arange(1, d), size=parts - 1, replace=False)) if parts > 1 else []
    else:
        cuts = sorted(ctx.rng.integers(0, d + 1, size=max(parts - 1, 0)))
    edges = [0, *cuts, d]
    return np.array([b - a for a, b in zip(edges, edges[1:])], np.int64)


def _range(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Range's start, limit and delta, drawn together: 1 to 16 elements."""
    key = node.name or str(id(node))
    if key not in ctx.joint:
        start, delta = int(ctx.rng.integers(0, 4)), int(ctx.rng.integers(1, 4))
        ctx.joint[key] = {
            0: np.array(start),
            1: np.array(start + delta * int(ctx.rng.integers(1, 17))),
            2: np.array(delta),
        }
    return ctx.joint[key][k]


def _positive(high: int) -> Handler:
    def handler(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
        return Bound(high, 1)

    return handler


def _dft_axis(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """DFT's axis: any but the last (it holds the real and imaginary parts)."""
    rank = ctx.rank(node.input[0])
    return Bound(rank - 1) if rank and rank > 1 else None


def _trip_count(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    return Bound(4, 1)


def _divisor(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    return Bound(100, 1)  # an integer divisor is never 0


def _shift(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    return Bound(8)


def _frame_length(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    window = ctx.dims(_input(node, 2)) if _input(node, 2) else None
    if window:
        return np.full(here, window[0], np.int64)
    signal = ctx.dims(node.input[0])
    return Bound(min(signal[1], 16) + 1, 1) if signal and len(signal) > 1 and signal[1] else None


def _crop_shape(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    dims = ctx.dims(node.input[0])
    if dims is None:
        return None
    axes = [a % len(dims) for a in attr(node, "axes", list(range(len(dims))))]
    return np.array([int(ctx.rng.integers(1, 2 * dims[a] + 1)) for a in axes], np.int64)


def _grid_size(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    theta = ctx.dims(node.input[0])
    if theta is None or len(theta) != 3:
        return None
    spatial = theta[1]
    return np.array([theta[0], int(ctx.rng.integers(1, 4)), *ctx.rng.integers(2, 9, size=spatial)], np.int64)


def _probability(ctx: Context, node: onnx.NodeProto, k: int, here: tuple, flexible: bool) -> Any:
    """Dropout's ratio, Bernoulli's probabilities: in [0, 1) (a ratio below 0.5)."""
    return np.asarray(ctx.rng.random(here) * (0.5 if node.op_type == "Dropout" else 1.0))


#: Reductions whose axes are input 1 (from opset 18; ReduceSum from 13).
REDUCE_OPS = AXES_REDUCTIONS

#: Integer inputs: (op, input position) -> handler.
INTEGER: dict[tuple[str, int], Handler] = {
    ("Gather", 1): _indices,
    ("GatherElements", 1): _indices,
    ("GatherND", 1): _index_tuples,
    ("ScatterElements", 1): _scatter_elements,
    ("Scatter", 1): _scatter_elements,
    ("ScatterND", 1): _index_tuples,
    ("OneHot", 0): _one_hot_indices,
    ("OneHot", 1): _one_hot_depth,
    ("NegativeLogLikelihoodLoss", 1): _class_target,
    ("SoftmaxCrossEntropyLoss", 1): _class_target,
    ("RoiAlign", 2): _batch_index,
    ("ReverseSequence", 1): _sequence_lengths,
    ("MaxUnpool", 1): _flat_output_index,
    ("ArrayFeatureExtractor", 1): _last_axis,
    ("SequenceAt", 1): _sequence_position,
    ("SequenceErase", 1): _sequence_position,
    ("SequenceInsert", 2): _sequence_position,
    ("CumSum", 1): _axis,
    ("CumProd", 1): _axis,
    ("Squeeze", 1): _axes,
    ("Unsqueeze", 1): _axes,
    **{(op, 1): _axes for op in REDUCE_OPS},
    ("Reshape", 1): _reshape_shape,
    ("Expand", 1): _expand_shape,
    ("ConstantOfShape", 0): _new_shape,
    ("Tile", 1): _repeats,
    ("Resize", 3): _resize,
    ("Col2Im", 1): _col2im,
    ("Col2Im", 2): _col2im,
    ("TopK", 1): _top_k,
    ("Pad", 1): _pad_or_slice,
    ("Pad", 3): _pad_or_slice,
    **{("Slice", k): _pad_or_slice for k in (1, 2, 3, 4)},
    ("Split", 1): _split,
    ("SplitToSequence", 1): _split,
    **{("Range", k): _range for k in (0, 1, 2)},
    ("Div", 1): _divisor,
    ("Mod", 1): _divisor,
    ("BitShift", 1): _shift,
    ("Loop", 0): _trip_count,
    ("STFT", 1): _positive(9),
    ("STFT", 3): _frame_length,
    ("DFT", 1): _positive(17),
    ("DFT", 2): _dft_axis,
    **{(op, 0): _positive(33) for op in WINDOW_FUNCTIONS},
    ("CenterCropPad", 1): _crop_shape,
    ("AffineGrid", 1): _grid_size,
}

#: Floating-point inputs with a meaning: (op, input position) -> handler.
FLOAT: dict[tuple[str, int], Handler] = {
    ("Resize", 2): _resize,
    ("Upsample", 1): _resize,
    ("Dropout", 1): _probability,
    ("Bernoulli", 0): _probability,
    **{("Range", k): _range for k in (0, 1, 2)},
}
