"""Seeded values for verification: every graph input gets a value its consumers accept.

Float inputs are standard normal, bool inputs fair coins, string inputs short words. Integer inputs named
*mask* are ones, *token_type* and *segment* zeros, *position* an arange, a scalar sample rate (sr,
sample_rate) 16000. Every other integer input (and a float input with a meaning: Resize's scales, a Dropout
ratio, ...) is drawn from what consumes it, followed through the ops that keep its elements (Cast, Identity,
Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Expand, Tile, Slice, Gather's data, Where's branches): indices within
the indexed axis, axes within the rank,
shapes, repeats and sizes valid for the data they apply to and within the element budget, k within the
axis, pads and slice bounds in range (eqsat.check.verify_consumers has one handler per op and input). The shapes
they need come from shape inference at the candidate's sizes (eqsat.check.verify_facts); an input that another
drawn input decides (OneHot's indices, its depth) waits for it. Integer inputs no consumer constrains are
in [0, 100). Where the facts a consumer needs are unknown the value is kept small (below 16, then below 4,
then 0 on the seeded redraws, `FALLBACK_BOUNDS`) and the draw is marked uncertain.

Sequence inputs are lists of 2 tensors of one shape, optional inputs their element, maps dicts of 3 entries
(onnxruntime takes lists, values and dicts for them).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Mapping

import numpy as np
import onnx

from eqsat.check.verify_consumers import DEFER, FLOAT, INTEGER, Bound, Context
from eqsat.check.verify_facts import SMALL, ShapeFacts
from eqsat.check.verify_inputs import SAMPLE_RATE, SAMPLE_RATE_NAMES, Shape, candidate_shapes
from eqsat.frontend.model_inputs import graph_inputs, input_dims, static_size
from eqsat.ops import FOLLOW  # ops whose output holds elements of their inputs at these positions

FALLBACK_BOUNDS = (16, 4, 1)  # for an index whose axis size is unknown: the draw, then the redraws
REDRAWS = len(FALLBACK_BOUNDS)
DEFAULT_HIGH = 100
WORDS = ("a", "an", "the", "cat", "dog", "tree", "blue", "run", "onnx", "graph")


@dataclasses.dataclass
class Draw:
    feeds: dict[str, Any]  # by input name
    uncertain: bool  # a consumer's facts were unknown: a redraw may run where this does not
    constants: dict[str, np.ndarray]  # small drawn arrays that size things (for shape inference)
    facts: dict[str, tuple]  # shapes inferred at the candidate's sizes, before the draw


Use = tuple[onnx.NodeProto, int, str]  # consuming node, input position, the value it reads there


class Plan:
    """What drawing needs to know of a model, computed once: its inputs, the consumers of each (through
    ops that keep the elements), its shape facts."""

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.inputs = graph_inputs(model)
        self.facts = ShapeFacts(model)
        consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = collections.defaultdict(list)
        for node in model.graph.node:
            for k, name in enumerate(node.input):
                if name:
                    consumers[name].append((node, k))
        self.uses = {v.name: _uses(v.name, consumers) for v in self.inputs}
        self.needs_facts = any(self.uses.values())

    def draw(
        self, shapes: Mapping[str, Shape], arrays: Mapping[str, Any] = {}, seed: int = 0, attempt: int = 0
    ) -> Draw:
        """Values for every input: `arrays` as given, the others drawn at `shapes` (attempt > 0: a redraw
        with other seeds and smaller fallbacks)."""
        rng = np.random.default_rng(seed if attempt == 0 else [seed, attempt])
        facts = self.facts.infer(shapes) if self.needs_facts else {}
        feeds: dict[str, Any] = {k: v for k, v in arrays.items()}
        todo = [v for v in self.inputs if v.name not in feeds]
        ctx = Context(facts, self.facts.constants, feeds, rng, pending={v.name for v in todo})
        uncertain = False
        for round_ in range(3):
            waiting = []
            for value in todo:
                drawn, unsure = self._value(value, shapes, ctx, final=round_ == 2, attempt=attempt)
                if drawn is DEFER:
                    waiting.append(value)
                    continue
                if value.type.HasField("tensor_type"):
                    drawn = np.asarray(drawn)  # 0-d too: onnxruntime takes arrays, not numpy scalars
                feeds[value.name], uncertain = drawn, uncertain or unsure
                ctx.pending.discard(value.name)
            if not waiting:
                break
            todo = waiting
            ctx.facts = self.facts.infer(_shapes(feeds, shapes), _constants(feeds, self.uses))
        ordered = {v.name: feeds[v.name] for v in self.inputs if v.name in feeds}
        return Draw(ordered, uncertain, _constants(ordered, self.uses), facts)

    def _value(
        self, value: onnx.ValueInfoProto, shapes: Mapping[str, Shape], ctx: Context, final: bool, attempt: int
    ) -> tuple[Any, bool]:
        """The drawn value of one input (or DEFER), and whether a consumer's facts were unknown."""
        if not value.type.HasField("tensor_type"):
            return _typed(value.type, ctx.rng), False
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type))
        shape = (
            tuple(shapes[value.name]) if value.name in shapes else tuple(static_size(d) or 2 for d in input_dims(value))
        )
        dims = input_dims(value)
        flexible = len(dims) == 1 and static_size(dims[0]) is None
        uses = self.uses[value.name]
        if dtype == np.bool_:
            return ctx.rng.random(shape) < 0.5, False
        if dtype.kind in "OUS":
            return np.array(ctx.rng.choice(WORDS, size=shape), dtype=object), False
        integer = np.issubdtype(dtype, np.integer)
        named = _by_name(value.name, shape, dtype) if integer else None
        if named is not None:
            return named, False
        handlers = INTEGER if integer else FLOAT
        wants = []
        for node, k, reached in uses:
            handler = handlers.get((node.op_type, k))
            if handler is not None:
                here = shape if reached == value.name else (ctx.dims(reached) or shape)
                wants.append(handler(ctx, node, k, tuple(here), flexible and reached == value.name))
        if any(w is DEFER for w in wants) and not final:
            return DEFER, False
        unsure = any(w is None or w is DEFER for w in wants)
        for want in wants:
            if isinstance(want, np.ndarray) and (flexible or want.size == int(np.prod(shape, dtype=np.int64))):
                return want.astype(dtype).reshape(want.shape if flexible else shape), unsure
            unsure = unsure or isinstance(want, np.ndarray)
        if not integer:
            return _float(dtype, shape, ctx.rng), unsure
        bounds = [w for w in wants if isinstance(w, Bound)]
        if not wants:
            return ctx.rng.integers(0, min(DEFAULT_HIGH, _most(dtype) + 1), size=shape).astype(dtype), False
        low = max((b.low for b in bounds), default=0)
        high: Any = min([b.high for b in bounds if not isinstance(b.high, list)] + [min(_most(dtype), 2**62) + 1])
        if unsure:
            high = min(high, max(FALLBACK_BOUNDS[min(attempt, REDRAWS - 1)], low + 1))
        tuples = [b.high for b in bounds if isinstance(b.high, list)]
        if tuples and shape and shape[-1] == len(tuples[0]):
            high = np.minimum(np.array(tuples[0]), high)
        elif tuples:
            high = min(high, *(min(t) for t in tuples))
        high = np.maximum(high, low + 1)
        return ctx.rng.integers(low, high, size=shape).astype(dtype), unsure


def _uses(name: str, consumers: Mapping[str, list[tuple[onnx.NodeProto, int]]]) -> list[Use]:
    """Where a handler knows what `name` may be: the consumers of it and of the values that hold its
    elements (FOLLOW)."""
    found: list[Use] = []
    frontier, seen = [name], {name}
    while frontier:
        value = frontier.pop()
        for node, k in consumers.get(value, ()):
            if node.domain not in ("", "ai.onnx", "ai.onnx.ml"):
                continue
            if (node.op_type, k) in INTEGER or (node.op_type, k) in FLOAT:
                found.append((node, k, value))
            if k in FOLLOW.get(node.op_type, ()) and node.output and node.output[0] not in seen:
                seen.add(node.output[0])
                frontier.append(node.output[0])
    return found


def _by_name(name: str, shape: Shape, dtype: np.dtype) -> np.ndarray | None:
    """Integer inputs whose name says what they hold: masks, token types, positions, a sample rate."""
    lname = name.lower()
    if "mask" in lname:
        return np.ones(shape, dtype)
    if "token_type" in lname or "segment" in lname:
        return np.zeros(shape, dtype)
    if "position" in lname and shape:
        return np.broadcast_to(np.arange(shape[-1], dtype=dtype), shape).copy()
    if lname in SAMPLE_RATE_NAMES and int(np.prod(shape)) == 1:
        return np.full(shape, SAMPLE_RATE, dtype)
    return None


def _most(dtype: np.dtype) -> int:
    try:
        return int(np.iinfo(dtype).max)
    except ValueError:  # 4-bit and other types numpy does not know
        return 7


def _float(dtype: np.dtype, shape: Shape, rng: np.random.Generator) -> np.ndarray:
    values = rng.standard_normal(shape)
    if dtype.kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return np.asarray(values).astype(dtype)


def _typed(t: onnx.TypeProto, rng: np.random.Generator) -> Any:
    """A value of a sequence, optional or map type (tensors in them sized 2 where dynamic)."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        shape = tuple(static_size(d) or 2 for d in t.tensor_type.shape.dim)
        if dtype == np.bool_:
            return np.asarray(rng.random(shape) < 0.5)
        if dtype.kind in "OUS":
            return np.array(rng.choice(WORDS, size=shape), dtype=object)
        if np.issubdtype(dtype, np.integer):
            return np.asarray(rng.integers(0, min(DEFAULT_HIGH, _most(dtype) + 1), size=shape).astype(dtype))
        return _float(dtype, shape, rng)
    if kind == "sequence_type":
        first = _typed(t.sequence_type.elem_type, rng)
        second = _typed(t.sequence_type.elem_type, rng)
        return [first, second]
    if kind == "optional_type":
        return _typed(t.optional_type.elem_type, rng)
    if kind == "map_type":
        string_keys = t.map_type.key_type == onnx.TensorProto.STRING
        keys = ["a", "b", "c"] if string_keys else [0, 1, 2]
        return {k: np.asarray(_typed(t.map_type.value_type, rng)).reshape(-1)[0].item() for k in keys}
    return None


def _shapes(feeds: Mapping[str, Any], shapes: Mapping[str, Shape]) -> dict[str, Shape]:
    return {**shapes, **{k: tuple(v.shape) for k, v in feeds.items() if isinstance(v, np.ndarray)}}


def _constants(feeds: Mapping[str, Any], uses: Mapping[str, list[Use]]) -> dict[str, np.ndarray]:
    """The drawn arrays that shape inference should see as constants: small ones a handler chose."""
    return {
        k: v
        for k, v in feeds.items()
        if isinstance(v, np.ndarray) and uses.get(k) and v.size <= SMALL and v.dtype.kind in "iuf"
    }


def feed_shapes(feeds: Mapping[str, Any]) -> dict[str, Shape]:
    """The shapes of the tensor feeds (sequences, optionals and maps left out)."""
    return {k: tuple(v.shape) for k, v in feeds.items() if isinstance(v, np.ndarray)}


def make_inputs(
    model: onnx.ModelProto,
    seed: int = 0,
    shapes: Mapping[str, Shape] | None = None,
    arrays: Mapping[str, np.ndarray] = {},
) -> dict[str, Any]:
    """Seeded inputs for every graph input that is not an initializer: `arrays` as given, the others drawn
    at `shapes` (by default the first of `eqsat.check.verify_inputs.candidate_shapes`)."""
    shapes = dict(shapes) if shapes is not None else next(candidate_shapes(model, {}, arrays))
    return Plan(model).draw(shapes, arrays, seed).feeds
