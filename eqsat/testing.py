"""Helpers for rule authors and tests: build small models, run them, check that a rule fires and is sound.

Every rule is tested three ways (STYLE habit 10): start -> goal, negative, numeric.

    >>> import onnx.helper as oh
    >>> from eqsat.testing import assert_rule_does_not_fire, assert_rule_sound, make_model, op_counts, optimize_with_rules
    >>> model = make_model([oh.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 3, 1]),
    ...                     oh.make_node("Relu", ["t"], ["r"]),
    ...                     oh.make_node("Transpose", ["r"], ["y"], perm=[0, 3, 1, 2])],
    ...                    inputs=[("x", "FLOAT", (1, 3, 4, 5))], outputs=["y"])
    >>> cancel = ["transpose-merge", "transpose-identity"]
    >>> result, fired = optimize_with_rules(model, ["transpose-sink-unary", *cancel])
    >>> dict(op_counts(result.model)), fired["transpose-sink-unary"] > 0
    ({'Relu': 1}, True)
    >>> assert_rule_does_not_fire(model, "relu-merge")
    >>> result = assert_rule_sound(model, "transpose-sink-unary", also=cancel)

`assert_rule_sound` checks soundness twice. In the e-graph, every e-node of every e-class is evaluated
on the feeds (one single-node model per e-node, onnxruntime with the reference evaluator as fallback)
and must agree with the other e-nodes of its class and with the class's shape and dtype facts: this
tests every rewrite that fired, whether or not the extractor chooses its result, and the analysis rules
that derived the facts. End to end, the extracted model must compute what the original computes, within
the tolerance of the least exact rule that fired (`eqsat.verify.SOUNDNESS_TOLERANCE`, relative to each
output's scale).

Hypothesis strategies (`shapes`, `perms`, `float_arrays`, `arrays`, `broadcastable_shapes`) and one graph
builder per rule (`PROPERTIES`: rule name -> strategy of `RuleCase`) drive the property tests in
tests/test_rules_*.py and `eqsat check-rules` (`check_rules`). A rule without a builder is reported by
`check_rules` and fails tests/test_rules_registry.py.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, Union

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh

if TYPE_CHECKING:  # heavy imports only where they are used
    import onnx_ir as ir
    from hypothesis.strategies import SearchStrategy

    from eqsat.egraph import EGraph, ENode
    from eqsat.result import Result
    from eqsat.saturate import Limits
    from eqsat.session import Session

__all__ = [
    "PROPERTIES", "GraphCase", "RuleCase", "ValueSpec", "arrays", "assert_egraph_sound",
    "assert_optimization_sound", "assert_rule_does_not_fire",
    "assert_rule_sound", "broadcastable_shapes", "check_rules", "dtype_name", "float_arrays", "inverse",
    "make_model", "op_counts", "optimize_with_rules", "perms", "random_feeds", "random_graphs", "run",
    "saturate_with_rules",
    "shapes", "to_proto",
]

#: (name, element type, shape) of a graph input or output. The element type is a TensorProto enum value,
#: a dtype name ("FLOAT") or a numpy dtype; None dims are symbolic. An output may be given by name alone
#: (or with None type and shape): its type and shape are then inferred.
ValueSpec = Union[str, tuple[str, Any, Union[Sequence[Union[int, str, None]], None]]]

#: Only the named rules run, plus the rules of these families and every rule in the `analysis` ruleset:
#: facts (shapes, dtypes, constants, positivity) that rewrites rely on, never rewrites themselves.
ALWAYS_ON_FAMILIES = ("analysis",)


# --------------------------------------------------------------------------------------------------
# models


def dtype_name(dtype: Any) -> str:
    """"FLOAT", "INT64", ... for a TensorProto enum value, a dtype name or a numpy dtype."""
    if isinstance(dtype, str):
        return dtype.upper()
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        return onnx.TensorProto.DataType.Name(int(dtype))
    return onnx.TensorProto.DataType.Name(oh.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _elem_type(dtype: Any) -> int:
    return int(getattr(onnx.TensorProto, dtype_name(dtype)))


def _np_dtype(dtype: Any) -> np.dtype:
    return np.dtype(oh.tensor_dtype_to_np_dtype(_elem_type(dtype)))


def make_model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[ValueSpec], outputs: Sequence[ValueSpec],
               initializers: Mapping[str, np.ndarray] | None = None, opset: int = 17, *,
               ir_version: int = 10) -> onnx.ModelProto:
    """A model from onnx.helper parts, at an IR version onnxruntime accepts.

    Outputs given by name alone get the type and shape ONNX shape inference finds for them.
    """
    def info(spec: ValueSpec) -> onnx.ValueInfoProto:
        if isinstance(spec, str) or spec[1] is None:
            return oh.make_value_info(spec if isinstance(spec, str) else spec[0], onnx.TypeProto())
        name, dtype, shape = spec
        return oh.make_tensor_value_info(name, _elem_type(dtype), None if shape is None else list(shape))

    graph = oh.make_graph(list(nodes), "test", [info(v) for v in inputs], [info(v) for v in outputs],
                          initializer=[onh.from_array(np.asarray(a), name) for name, a in (initializers or {}).items()])
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=ir_version)
    if any(not o.type.HasField("tensor_type") or not o.type.tensor_type.HasField("shape") for o in graph.output):
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        known = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
        for out in model.graph.output:
            if (not out.type.HasField("tensor_type") or not out.type.tensor_type.HasField("shape")) and out.name in known:
                out.type.CopyFrom(known[out.name].type)
    return model


def to_proto(model: onnx.ModelProto | "ir.Model") -> onnx.ModelProto:
    """A ModelProto for a ModelProto or an onnx_ir Model (what `Result.model` is)."""
    if isinstance(model, onnx.ModelProto):
        return model
    import onnx_ir as ir

    return ir.serde.serialize_model(model)


def op_counts(model: onnx.ModelProto | "ir.Model") -> collections.Counter[str]:
    """How many nodes of each op type the top-level graph has."""
    return collections.Counter(n.op_type for n in to_proto(model).graph.node)


def run(model: onnx.ModelProto | "ir.Model", feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs of `model` on `feeds`: onnxruntime without graph optimizations, else onnx.reference."""
    from eqsat.verify import run as run_model

    outputs, _ = run_model(to_proto(model), dict(feeds))
    return [np.asarray(o) for o in outputs]


def random_feeds(model: onnx.ModelProto | "ir.Model", seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input, as `eqsat.verify` draws them."""
    from eqsat.verify import make_inputs

    return make_inputs(to_proto(model), seed)


# --------------------------------------------------------------------------------------------------
# running a chosen set of rules


def _rule_table() -> dict[str, Any]:
    from eqsat.rewrites.registry import all_rules

    return {r.name: r for r in all_rules()}


def _disabled(rules: Iterable[str], without: Iterable[str] = ()) -> list[str]:
    """Names to disable so that only `rules` and the fact rules run (minus `without`)."""
    table = _rule_table()
    wanted, removed = set(rules), set(without)
    unknown = (wanted | removed) - set(table)
    if unknown:
        raise KeyError(f"unknown rule(s): {', '.join(sorted(unknown))} (see `eqsat rules`)")
    return [name for name, r in table.items()
            if name in removed or (name not in wanted and r.family not in ALWAYS_ON_FAMILIES
                                   and r.ruleset != "analysis")]


def saturate_with_rules(model: onnx.ModelProto | "ir.Model", rules: Sequence[str], *, allow: Sequence[str] = (),
                        without: Sequence[str] = (), limits: "Limits | None" = None) -> "Session":
    """Saturate `model` with only the named rules (plus the fact rules: the analysis family and the
    analysis ruleset), minus the rules named in `without`."""
    from eqsat.saturate import Limits
    from eqsat.session import saturate

    model = to_proto(model)
    return saturate(model, limits=limits or Limits(), allow=allow, disable=_disabled(rules, without))


def optimize_with_rules(model: onnx.ModelProto | "ir.Model", rules: Sequence[str], *, allow: Sequence[str] = (),
                        without: Sequence[str] = (), target: str = "cpu",
                        extractor: str = "ilp") -> tuple["Result", dict[str, int]]:
    """Saturate with only the named rules (and the fact rules, see `saturate_with_rules`), extract for
    `target` without verification; return the result and `rules_fired` (rule name -> matches)."""
    session = saturate_with_rules(model, rules, allow=allow, without=without)
    result = session.extract(target, extractor=extractor, verify=False)
    return result, session.saturation.rules_fired


# --------------------------------------------------------------------------------------------------
# soundness


def _soundness_tolerance(soundness: str, dtype: np.dtype) -> float:
    from eqsat.verify import tolerance_for

    return tolerance_for(np.dtype(dtype), soundness)


def _difference(expected: np.ndarray, actual: np.ndarray, tolerance: float | None,
                soundness: str, bound: np.ndarray | None = None) -> tuple[bool, str]:
    """(ok, description) for two arrays: same shape and dtype; floats with NaN/Inf at the same places and
    finite values within `tolerance` (default: the soundness class's, for the dtype) times the expected
    scale (its largest finite magnitude, at least 1e-3), or within `bound` element by element (a forward
    error bound of an ill-conditioned computation, `_normalization_error_bound`); integers and bools equal."""
    expected, actual = np.asarray(expected), np.asarray(actual)
    if expected.shape != actual.shape or expected.dtype != actual.dtype:
        return False, f"shape/dtype {actual.shape}/{actual.dtype} != {expected.shape}/{expected.dtype}"
    if not expected.size:
        return True, "empty"
    if expected.dtype.kind in "fc" or expected.dtype.name == "bfloat16":
        e64, a64 = expected.astype(np.float64), actual.astype(np.float64)
        if not np.array_equal(np.isnan(e64), np.isnan(a64)):
            return False, "NaN at different places"
        inf = np.isinf(e64) | np.isinf(a64)
        if not np.array_equal(e64[inf], a64[inf]):
            return False, "Inf at different places"
        finite = np.isfinite(e64) & np.isfinite(a64)
        diff = float(np.max(np.abs(e64[finite] - a64[finite]), initial=0.0))
        scale = float(np.max(np.abs(e64[finite]), initial=0.0))
        tol = _soundness_tolerance(soundness, expected.dtype) if tolerance is None else tolerance
        allowed = tol * max(scale, 1e-3)
        how = f"max |diff| {diff:.3g} (allowed {allowed:.3g} = {tol:g} x scale {scale:.3g})"
        if diff <= allowed or bound is None:
            return diff <= allowed, how
        excess = np.abs(e64 - a64) - np.maximum(allowed, np.broadcast_to(bound, e64.shape))
        worst = float(np.max(excess[finite], initial=-1.0))
        return worst <= 0, f"{how}; within the normalization's forward error bound: {worst <= 0}"
    if np.array_equal(expected, actual):
        return True, "equal"
    wrong = int(np.count_nonzero(expected != actual))
    return False, f"{wrong} of {expected.size} {expected.dtype} values differ (integer and bool values must be equal)"


#: Normalizations whose output is ill-conditioned on (nearly) constant rows: op -> first normalized axis.
_NORMALIZATIONS = {"LayerNormalization": lambda node, rank: int(node.attrs[0]) % rank,
                   "InstanceNormalization": lambda node, rank: 2}


def _normalization_error_bound(egraph: "EGraph", cid: int, values: Mapping[int, Any]) -> np.ndarray | None:
    """Element-wise forward error bound of class `cid` when it holds a normalization N(x, s, b, eps).

    y = (x - mean) / sqrt(var + eps) * s + b. Computing x - mean over n elements errs by up to
    gamma(n + 2) * max|x| (gamma(k) = k u / (1 - k u), u the unit roundoff of the computation: fp32 for
    fp16 LayerNorm with stash_type 1) and the division amplifies that by 1 / sqrt(var + eps): on a row that
    is constant (an Expand), var = 0 and 1 / sqrt(1e-5) turns an ulp of x into 3e-4 of it, so two correct
    implementations (the ONNX function body, a fused kernel) legitimately differ there. Twice that bound,
    times |s|, is what two evaluations of the same class may differ by; it is tight on rows that vary
    (about 6 u |x| / std), so a wrong rewrite still shows. None when the class holds no normalization
    whose inputs have values."""
    for nid in egraph.eclass(cid).nodes:
        node = egraph.node(nid)
        if node.op not in _NORMALIZATIONS:
            continue
        x, s = (values.get(c) for c in node.children[:2])
        if not isinstance(x, np.ndarray) or not isinstance(s, np.ndarray) or x.dtype.kind != "f" or x.ndim < 2:
            continue
        first = _NORMALIZATIONS[node.op](node, x.ndim)
        eps = float(node.attrs[-1] if node.op == "InstanceNormalization" else node.attrs[1])
        axes = tuple(range(first, x.ndim))
        x64 = x.astype(np.float64)
        n = int(np.prod([x.shape[a] for a in axes]))
        stash32 = node.op == "LayerNormalization" and int(node.attrs[2]) == 1
        u = float(np.finfo(np.float32 if stash32 else x.dtype).eps) / 2
        gamma = (n + 2) * u / (1 - (n + 2) * u)
        row = gamma * np.max(np.abs(x64), axis=axes, keepdims=True) / np.sqrt(np.var(x64, axis=axes, keepdims=True) + eps)
        s64 = np.abs(s.astype(np.float64))
        if node.op == "InstanceNormalization":  # s is per channel
            s64 = s64.reshape((1, -1) + (1,) * (x.ndim - 2))
        return 2 * row * s64
    return None


class _CannotEvaluate(Exception):
    pass


class _Evaluator:
    """Evaluates e-nodes one at a time on concrete inputs: single-node models run by onnxruntime, or by
    onnx.reference when onnxruntime lacks a kernel."""

    def __init__(self, session: "Session", feeds: Mapping[str, np.ndarray]) -> None:
        self.session, self.feeds = session, feeds
        self.opset = session.encoding.opset

    def reshape(self, x: np.ndarray, target: np.ndarray, allowzero: int) -> np.ndarray:
        """ONNX Reshape (0 copies a dim unless `allowzero`, -1 is inferred), run as a one-node model."""
        from eqsat.verify import run as run_model

        feeds = {"x": np.asarray(x), "t": np.asarray(target, dtype=np.int64)}
        graph = oh.make_graph([oh.make_node("Reshape", ["x", "t"], ["y"], allowzero=allowzero)], "reshape",
                              [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                               for k, v in feeds.items()], [oh.make_value_info("y", onnx.TypeProto())])
        (out,), _ = run_model(oh.make_model(graph, opset_imports=[oh.make_opsetid("", max(self.opset, 14))],
                                            ir_version=10), feeds)
        return np.asarray(out)

    def leaf(self, node: "ENode") -> np.ndarray | None:
        if node.op == "Input":
            return np.asarray(self.feeds[node.attrs[0]])
        if node.op == "Const":
            return np.asarray(self.session.encoding.constants[node.attrs[0]])
        value, dtype, shape = node.attrs
        return np.full(tuple(shape), value, dtype=_np_dtype(dtype))

    def typed(self, node: "ENode", args: Sequence[np.ndarray | None]) -> np.ndarray:
        from eqsat.lower import onnx_parts
        from eqsat.terms import OPS
        from eqsat.verify import CannotRun, run as run_model

        spec = OPS[node.op]
        x_dtype = next((a.dtype for a in args if a is not None), np.dtype(np.float32))
        static, attrs = onnx_parts(spec, node.attrs, self.opset, x_dtype)
        names: dict[int, str] = {}
        feeds: dict[str, np.ndarray] = {}
        positions = [i for i in range(len(spec.inputs) + len(static)) if i not in static]
        for pos, array in list(zip(positions, args)) + list(static.items()):
            if array is not None:
                names[pos] = f"i{pos}"
                feeds[f"i{pos}"] = np.asarray(array)
        inputs = [names.get(i, "") for i in range(max(names) + 1)] if names else []
        graph = oh.make_graph(
            [oh.make_node(spec.name, inputs, ["y"], **attrs)], "enode",
            [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
            [oh.make_value_info("y", onnx.TypeProto())])
        model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", self.opset)], ir_version=10)
        try:
            (out,), _ = run_model(model, feeds)
        except CannotRun as exc:
            shown = [(a.shape, a.dtype.name) if a is not None else None for a in args]
            raise _CannotEvaluate(f"cannot be evaluated on inputs {shown}: {exc}") from None
        return np.asarray(out)

    def opaque(self, node: "ENode", inputs: Sequence[np.ndarray | None]) -> tuple[np.ndarray | None, ...] | None:
        """All outputs of the original node behind an Opaque e-node, or None when it cannot run alone
        (subgraphs, or no runtime knows its domain): its users then stay unevaluated."""
        import onnx_ir as ir

        from eqsat.verify import CannotRun, run as run_model

        original = self.session.encoding.opaque_nodes.get(node.attrs[0])
        if original is None or any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
                                   for a in original.attributes.values()):
            return None
        proto = ir.serde.serialize_node(original)
        feeds: dict[str, np.ndarray] = {}
        for i, name in enumerate(proto.input):
            if name and i < len(inputs) and inputs[i] is not None:
                proto.input[i] = f"i{i}"
                feeds[f"i{i}"] = np.asarray(inputs[i])
            else:
                proto.input[i] = ""
        names = [f"o{k}" if name else "" for k, name in enumerate(proto.output)]
        proto.output[:] = names
        graph = oh.make_graph(
            [proto], "opaque",
            [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
            [oh.make_value_info(n, onnx.TypeProto()) for n in names if n])
        model = oh.make_model(graph, opset_imports=list(self.session.original.opset_import), ir_version=10)
        try:
            outs, _ = run_model(model, feeds)
        except CannotRun:
            return None
        produced = iter(outs)
        return tuple(np.asarray(next(produced)) if n else None for n in names)


_LEAVES = frozenset({"Input", "Const", "Scalar"})
_UNKNOWN = object()  # the value of an opaque node that cannot run alone


def _describe(egraph: "EGraph", nid: int, depth: int = 3) -> str:
    """A short term for an e-node: children shown through their first e-node, `depth` levels deep."""
    node = egraph.node(nid)
    if node.op == "Input":
        return str(node.attrs[0])
    if node.op == "Scalar":
        return f"{node.attrs[0]:g}:{node.attrs[1]}"
    if node.op == "Const":
        return f"Const<{node.attrs[0][:8]}>"
    args = []
    for child in node.children:
        members = egraph.eclass(child).nodes
        args.append(_describe(egraph, members[0], depth - 1) if depth > 1 and members else f"c{child}")
    args += [repr(a) for a in node.attrs]
    return f"{node.op}({', '.join(args)})"


def assert_egraph_sound(session: "Session", feeds: Mapping[str, np.ndarray], *, tolerance: float | None = None,
                        soundness: str | None = None, context: str = "") -> int:
    """Evaluate every e-node of `session`'s e-graph on `feeds`; all e-nodes of a class must agree, and
    agree with the class's shape and dtype facts. Returns how many e-nodes were evaluated.

    E-nodes are evaluated in a worklist order (an e-node once every child class has a value), never
    recursively. Opaque nodes run as their original node; one that cannot run alone (a subgraph, an
    unknown domain) leaves the e-nodes that depend only on it unchecked. An e-node that no runtime can
    evaluate (a rewrite that built an ill-typed node) is a problem too.
    """
    egraph = session.egraph
    soundness = soundness or session.soundness
    evaluator = _Evaluator(session, feeds)
    values: dict[int, Any] = {}  # class -> array (T), None (absent), tuple (TL list, N outputs), _UNKNOWN
    first: dict[int, int] = {}
    problems: list[str] = []
    parents: dict[int, list[int]] = collections.defaultdict(list)
    waiting: dict[int, int] = {}
    for node in egraph.nodes:
        children = set(node.children)
        waiting[node.id] = len(children)
        for c in children:
            parents[c].append(node.id)
    ready = collections.deque(n.id for n in egraph.nodes if not waiting[n.id])
    evaluated = 0

    def settle(cid: int, value: Any, nid: int) -> None:
        """Give class `cid` its value; its users' waiting counts drop (or they rerun on an upgrade)."""
        upgrade = cid in values
        values[cid], first[cid] = value, nid
        for p in parents[cid]:
            if upgrade:
                if not waiting[p]:
                    ready.append(p)
            else:
                waiting[p] -= 1
                if not waiting[p]:
                    ready.append(p)

    while ready:
        node = egraph.node(ready.popleft())
        args = [values[c] for c in node.children]
        value: Any
        if any(a is _UNKNOWN for a in args):
            value = _UNKNOWN
        elif node.op == "Absent":
            value = None
        elif node.op == "TNil":
            value = ()
        elif node.op == "TCons":
            value = (args[0], *args[1])
        elif node.op == "Opaque":
            value = evaluator.opaque(node, args[0])
            value = _UNKNOWN if value is None else value
        elif node.op == "Concat":
            value = np.concatenate([np.asarray(a) for a in args[0]], axis=int(node.attrs[0]))
        elif node.op == "Split":
            axis, sizes = int(node.attrs[0]), [int(v) for v in node.attrs[1]]
            value = tuple(np.split(np.asarray(args[0]), np.cumsum(sizes)[:-1].tolist(), axis=axis))
        elif node.op == "ReshapeDyn":
            value = evaluator.reshape(args[0], args[1], int(node.attrs[0]))
        elif node.op == "Out":
            outs, k = args[0], node.attrs[0]
            value = outs[k] if k < len(outs) and outs[k] is not None else _UNKNOWN
        elif node.op in _LEAVES:
            value = evaluator.leaf(node)
        else:
            try:
                value = evaluator.typed(node, args)
            except _CannotEvaluate as exc:
                problems.append(f"class c{node.eclass}: {_describe(egraph, node.id)}: {exc}")
                value = _UNKNOWN
        evaluated += value is not _UNKNOWN
        expected = values.get(node.eclass, _UNKNOWN)
        if expected is _UNKNOWN:
            if value is not _UNKNOWN or node.eclass not in values:
                settle(node.eclass, value, node.id)
            continue
        if value is _UNKNOWN or egraph.eclass(node.eclass).sort != "T":
            continue
        if (expected is None) != (value is None):
            problems.append(f"class c{node.eclass}: {_describe(egraph, node.id)} and {_describe(egraph, first[node.eclass])}: "
                            "one is an absent input, the other is not")
        elif value is not None:
            ok, how = _difference(expected, value, tolerance, soundness)
            if not ok:
                bound = _normalization_error_bound(egraph, node.eclass, values)
                ok, how = (ok, how) if bound is None else _difference(expected, value, tolerance, soundness, bound)
            if not ok:
                problems.append(f"class c{node.eclass}: {_describe(egraph, node.id)} != "
                                f"{_describe(egraph, first[node.eclass])}: {how}")
    symbol_sizes: dict[int, tuple[int, int]] = {}  # symbol -> (size, the class it was first seen in)
    for cid, value in values.items():
        eclass = egraph.eclass(cid)
        if not isinstance(value, np.ndarray) or eclass.sort != "T":
            continue
        if eclass.shape is not None and not _shape_fact_holds(eclass.shape, value.shape, cid, symbol_sizes):
            problems.append(f"class c{cid} ({_describe(egraph, first[cid])}): shape fact {tuple(eclass.shape)} "
                            f"but its value has shape {value.shape}"
                            + _symbol_clash(eclass.shape, value.shape, symbol_sizes))
        if eclass.dtype is not None and eclass.dtype != dtype_name(value.dtype):
            problems.append(f"class c{cid} ({_describe(egraph, first[cid])}): dtype fact {eclass.dtype} "
                            f"but its value is {dtype_name(value.dtype)}")
    if problems:
        raise AssertionError(f"{context}e-graph unsound ({len(problems)} problem(s)); rules fired: "
                             f"{session.saturation.rules_fired}\n  " + "\n  ".join(problems[:10]))
    return evaluated


def _shape_fact_holds(fact: Sequence[int], shape: Sequence[int], cid: int,
                      symbol_sizes: dict[int, tuple[int, int]]) -> bool:
    """A shape fact matches a value's shape: same rank, equal sizes, and each symbol (< 0) one size
    throughout the e-graph (`symbol_sizes` records the first size seen)."""
    if len(fact) != len(shape):
        return False
    ok = True
    for d, n in zip(fact, shape):
        if d >= 0:
            ok = ok and d == n
        else:
            ok = ok and symbol_sizes.setdefault(d, (n, cid))[0] == n
    return ok


def _symbol_clash(fact: Sequence[int], shape: Sequence[int], symbol_sizes: Mapping[int, tuple[int, int]]) -> str:
    clashes = [f"symbol {d} is {n} here, {symbol_sizes[d][0]} in class c{symbol_sizes[d][1]}"
               for d, n in zip(fact, shape) if d < 0 and d in symbol_sizes and symbol_sizes[d][0] != n]
    return f" ({'; '.join(clashes)})" if clashes else ""


def symbolized(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with every dim but 1s of its graph inputs and outputs declared symbolic (`d<size>`: equal sizes share
    a name, so the declared equalities hold for any feeds of the drawn sizes): the rules see symbols where
    they saw sizes, and any rule that computes with a symbol shows up as a wrong shape fact or value."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for value in [*out.graph.input, *out.graph.output]:
        if not value.type.HasField("tensor_type") or not value.type.tensor_type.HasField("shape"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_value") and dim.dim_value != 1:  # exporters keep 1s static
                size = dim.dim_value
                dim.Clear()
                dim.dim_param = f"d{size}"
    del out.graph.value_info[:]
    return out


def _graph_text(model: onnx.ModelProto) -> str:
    try:
        return onnx.printer.to_text(model.graph)
    except Exception:  # pragma: no cover - the printer is best effort
        return ", ".join(n.op_type for n in model.graph.node)


def assert_rule_sound(model: onnx.ModelProto | "ir.Model", rule: str, feeds: Mapping[str, np.ndarray] | None = None,
                      seed: int = 0, tolerance: float | None = None, *, also: Sequence[str] = (),
                      allow: Sequence[str] = (), extractor: str = "ilp", target: str = "cpu",
                      must_fire: bool = True) -> "Result":
    """`rule` fires on `model` (unless not `must_fire`), and the result computes what `model` computes.

    Only `rule`, the rules in `also` (e.g. transpose-merge to cancel what a sinking rule exposes) and the
    fact rules run. Checked on `feeds` (default: seeded random inputs): every e-class of the
    saturated e-graph (see `assert_egraph_sound`), then the extracted model (verification off, `target`)
    against `model`, output by output, within `tolerance` relative to the output's scale (default: the
    soundness tolerance of the least exact rule that fired). Returns the optimization result.
    """
    proto = to_proto(model)
    feeds = dict(feeds) if feeds is not None else random_feeds(proto, seed)
    session = saturate_with_rules(proto, [rule, *also], allow=allow)
    fired = session.saturation.rules_fired
    if session.saturation.error:
        raise AssertionError(f"rule {rule}: egglog failed during saturation: {session.saturation.error}\n"
                             f"{_graph_text(proto)}")
    if must_fire and rule not in fired:
        raise AssertionError(f"rule {rule} did not fire (rules fired: {fired or 'none'}) on\n{_graph_text(proto)}")
    return _check_session(proto, session, feeds, tolerance, f"rule {rule}: ", target, extractor)


def _check_session(proto: onnx.ModelProto, session: "Session", feeds: Mapping[str, np.ndarray],
                   tolerance: float | None, context: str, target: str, extractor: str) -> "Result":
    """The e-graph check, then the extracted model against `proto`, output by output."""
    assert_egraph_sound(session, feeds, tolerance=tolerance, context=context)
    result = session.extract(target, extractor=extractor, verify=False)
    optimized = to_proto(result.model)
    expected, actual = run(proto, feeds), run(optimized, feeds)
    for out, ref, got in zip(proto.graph.output, expected, actual):
        ok, how = _difference(ref, got, tolerance, session.soundness)
        if not ok:
            raise AssertionError(f"{context}output {out.name!r} of the optimized model differs from the original: "
                                 f"{how}\noriginal:\n{_graph_text(proto)}\noptimized:\n{_graph_text(optimized)}")
    return result


def assert_optimization_sound(model: onnx.ModelProto | "ir.Model", feeds: Mapping[str, np.ndarray] | None = None,
                              seed: int = 0, tolerance: float | None = None, *, allow: Sequence[str] = (),
                              extractor: str = "ilp", target: str = "cpu") -> "Result":
    """All default rules (plus `allow`ed classes) together: the same two checks as `assert_rule_sound`,
    without requiring any particular rule to fire."""
    from eqsat.session import saturate

    proto = to_proto(model)
    feeds = dict(feeds) if feeds is not None else random_feeds(proto, seed)
    session = saturate(proto, allow=allow)
    if session.saturation.error:
        raise AssertionError(f"egglog failed during saturation: {session.saturation.error}\n{_graph_text(proto)}")
    return _check_session(proto, session, feeds, tolerance, "", target, extractor)


def assert_rule_does_not_fire(model: onnx.ModelProto | "ir.Model", rule: str, *, also: Sequence[str] = (),
                              allow: Sequence[str] = ()) -> None:
    """Saturating `model` with `rule` (and `also`, and the fact rules) never matches `rule`."""
    proto = to_proto(model)
    if rule not in _rule_table():
        raise KeyError(f"unknown rule: {rule}")
    session = saturate_with_rules(proto, [rule, *also], allow=allow)
    fired = session.saturation.rules_fired
    if rule in fired:
        raise AssertionError(f"rule {rule} fired ({fired[rule]} matches) where its guard should fail, on\n"
                             f"{_graph_text(proto)}")


# --------------------------------------------------------------------------------------------------
# hypothesis strategies


def _st() -> Any:
    try:
        from hypothesis import strategies
    except ImportError as exc:  # pragma: no cover - hypothesis is a test dependency
        raise ImportError("eqsat.testing strategies need hypothesis: pip install 'eqsat[test]'") from exc
    return strategies


def shapes(min_rank: int = 1, max_rank: int = 4, max_dim: int = 3, min_dim: int = 1) -> "SearchStrategy[tuple[int, ...]]":
    """Static shapes with rank in [min_rank, max_rank] and every dim in [min_dim, max_dim]."""
    st = _st()
    return st.lists(st.integers(min_dim, max_dim), min_size=min_rank, max_size=max_rank).map(tuple)


def perms(rank: int) -> "SearchStrategy[tuple[int, ...]]":
    """Permutations of range(rank)."""
    return _st().permutations(list(range(rank))).map(tuple)


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    """The inverse permutation: inverse(p)[p[i]] = i."""
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def broadcastable_shapes(shape: Sequence[int], *, same_rank: bool = False) -> "SearchStrategy[tuple[int, ...]]":
    """Shapes that broadcast to `shape` without enlarging it: a suffix of it (the full rank when
    `same_rank`), with any dims replaced by 1."""
    st = _st()
    rank = len(shape)

    @st.composite
    def draw_shape(draw: Callable) -> tuple[int, ...]:
        k = rank if same_rank else draw(st.integers(0, rank))
        dims = tuple(shape[rank - k:])
        ones = draw(st.lists(st.booleans(), min_size=k, max_size=k))
        return tuple(1 if one else d for d, one in zip(dims, ones))

    return draw_shape()


def _range_of(dtype: np.dtype, low: float, high: float) -> tuple[float, float]:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return max(low, info.min), min(high, info.max)
    return low, high


def arrays(dtype: Any, shape: Sequence[int], low: float = -8.0, high: float = 8.0, *,
           integers: bool = False) -> "SearchStrategy[np.ndarray]":
    """Arrays of `dtype` and `shape` with values in [low, high] (clipped to the dtype's range).

    Values come from a numpy generator seeded by hypothesis (so every element differs, which layout
    bugs need; shrinking acts on the seed), with a few exact 0, 1 and -1 mixed in; `integers` makes
    float values integral (comparisons then see equal elements).
    """
    st = _st()
    np_dtype = _np_dtype(dtype)

    def build(args: tuple[int, int]) -> np.ndarray:
        seed, special = args
        rng = np.random.default_rng(seed)
        size = int(np.prod(shape, dtype=np.int64))
        if np_dtype == np.bool_:
            return (rng.random(size) < 0.5).reshape(shape)
        lo, hi = _range_of(np_dtype, low, high)
        if np_dtype.kind in "iu" or integers:
            data = rng.integers(int(np.ceil(lo)), int(np.floor(hi)) + 1, size=size).astype(np.float64)
        else:
            data = rng.uniform(lo, hi, size=size)
        if special and size:
            picks = rng.integers(0, size, size=max(1, size // 4))
            data[picks] = np.clip(rng.choice([0.0, 1.0, -1.0], size=picks.size), lo, hi)
        return data.astype(np_dtype).reshape(shape)

    return st.tuples(st.integers(0, 2**32 - 1), st.booleans()).map(build)


def float_arrays(shape: Sequence[int], dtype: Any = np.float32, low: float = -8.0,
                 high: float = 8.0) -> "SearchStrategy[np.ndarray]":
    """Finite float arrays of moderate magnitude (|x| <= 8 by default); see `arrays`."""
    return arrays(dtype, shape, low, high)


# --------------------------------------------------------------------------------------------------
# one property (graph builder) per rule


@dataclasses.dataclass(frozen=True)
class RuleCase:
    """A drawn graph where `rule` must fire, its inputs, and how to run it."""

    rule: str
    model: onnx.ModelProto
    feeds: Mapping[str, np.ndarray]
    also: tuple[str, ...] = ()       # rules run alongside (cancel what `rule` exposes)
    allow: tuple[str, ...] = ()      # soundness classes to admit (precision-changing)
    symbolic: bool = False           # also check the graph with symbolic dims (`symbolized`)

    def check(self) -> "Result":
        """`assert_rule_sound` on this case; when `symbolic`, also on the graph with its input and output
        dims made symbolic, where the rule need not fire but the e-graph and the result must stay sound."""
        result = assert_rule_sound(self.model, self.rule, self.feeds, also=self.also, allow=self.allow)
        if self.symbolic:
            assert_rule_sound(symbolized(self.model), self.rule, self.feeds, also=self.also, allow=self.allow,
                              must_fire=False)
        return result

    def __repr__(self) -> str:
        feeds = ", ".join(f"{k}: {v.dtype.name}{list(v.shape)} = {np.array2string(v.reshape(-1)[:8], precision=4)}"
                          for k, v in self.feeds.items())
        return (f"RuleCase(rule={self.rule!r}, also={self.also}, allow={self.allow}, symbolic={self.symbolic}, opset="
                f"{self.model.opset_import[0].version},\n{_graph_text(self.model)}\nfeeds: {feeds})")


_SANDWICH = ("transpose-merge", "transpose-identity")
#: Elementwise ops drawn by the properties (float inputs; IsNaN gives BOOL, comparisons too).
_FLOAT_UNARY = ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Log", "Sqrt", "Erf", "Reciprocal", "Floor",
                "Ceil", "Sign", "Softplus", "Softsign", "Sin", "Cos", "Round", "IsNaN")
_FLOAT_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "PRelu")
_COMPARE = ("Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual")
_LOGICAL = ("And", "Or", "Xor")
#: Cast targets drawn by layout properties (values are in [-8, 8]: in range for every signed type).
_CAST_TARGETS = ("FLOAT16", "DOUBLE", "INT8", "INT32", "INT64", "BOOL")


def _transpose_node(x: str, y: str, perm: Sequence[int]) -> onnx.NodeProto:
    return oh.make_node("Transpose", [x], [y], perm=list(perm))


@dataclasses.dataclass
class _Graph:
    """Accumulates nodes, inputs, initializers and feeds for a drawn case."""

    nodes: list[onnx.NodeProto] = dataclasses.field(default_factory=list)
    inputs: list[ValueSpec] = dataclasses.field(default_factory=list)
    inits: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    feeds: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def input(self, name: str, value: np.ndarray) -> str:
        self.inputs.append((name, value.dtype, value.shape))
        self.feeds[name] = value
        return name

    def node(self, op: str, inputs: Sequence[str], output: str, **attrs: Any) -> str:
        self.nodes.append(oh.make_node(op, list(inputs), [output], **attrs))
        return output

    def case(self, rule: str, outputs: Sequence[str], *, also: Sequence[str] = (), allow: Sequence[str] = (),
             opset: int = 17) -> RuleCase:
        model = make_model(self.nodes, self.inputs, list(outputs), self.inits, opset)
        return RuleCase(rule, model, self.feeds, tuple(also), tuple(allow))


def _draw_unary(draw: Callable, g: _Graph, x: str, y: str, st: Any) -> str:
    """Apply a drawn unary elementwise op (plain or with parameters) to float `x`."""
    kind = draw(st.sampled_from(("plain", "plain", "LeakyRelu", "Elu", "HardSigmoid", "Clip", "Cast")))
    if kind == "plain":
        return g.node(draw(st.sampled_from(_FLOAT_UNARY)), [x], y)
    if kind in ("LeakyRelu", "Elu"):
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.01, 0.2, 1.0, 1.5))))
    if kind == "HardSigmoid":
        return g.node(kind, [x], y, alpha=draw(st.sampled_from((0.2, 0.5))), beta=draw(st.sampled_from((0.5, 0.1))))
    if kind == "Clip":
        lo = draw(st.sampled_from((-1.0, 0.0, -6.0)))
        g.inits[f"{y}_min"] = np.array(lo, np.float32)
        g.inits[f"{y}_max"] = np.array(lo + draw(st.sampled_from((1.0, 6.0))), np.float32)
        return g.node("Clip", [x, f"{y}_min", f"{y}_max"], y)
    return g.node("Cast", [x], y, to=_elem_type(draw(st.sampled_from(_CAST_TARGETS))))


def _transpose_merge() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 5, 3))
        p = draw(perms(len(shape)))
        q = draw(st.one_of(st.just(inverse(p)), perms(len(shape))))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
        g.nodes += [_transpose_node(x, "t", p), _transpose_node("t", "y", q)]
        return g.case("transpose-merge", ["y"])

    return build()


def _transpose_identity() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 6, 3))
        perm: Sequence[int] = range(len(shape))
        if draw(st.booleans()):  # a single-element tensor: any perm
            shape = (1,) * len(shape)
            perm = draw(perms(len(shape)))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "BOOL"))), shape)))
        g.nodes.append(_transpose_node(x, "t", perm))
        if draw(st.booleans()):
            return g.case("transpose-identity", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])
        return g.case("transpose-identity", ["t"])

    return build()


def _transpose_sink_unary() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        g = _Graph()
        if draw(st.integers(0, 9)) == 0:
            x = g.input("x", draw(arrays("BOOL", shape)))
            g.nodes.append(_transpose_node(x, "t", p))
            g.node("Not", ["t"], "u")
        else:
            x = g.input("x", draw(float_arrays(shape)))
            g.nodes.append(_transpose_node(x, "t", p))
            _draw_unary(draw, g, "t", "u", st)
        back = draw(st.sampled_from((inverse(p), inverse(p), None)))
        if back is None:
            return g.case("transpose-sink-unary", ["u"], also=_SANDWICH)
        g.nodes.append(_transpose_node("u", "y", back))
        return g.case("transpose-sink-unary", ["y"], also=_SANDWICH)

    return build()


def _binary_operands(draw: Callable, st: Any, shape: tuple[int, ...]) -> tuple[str, str, np.ndarray, np.ndarray]:
    """A drawn binary op and operands of the same rank that broadcast to at most `shape`."""
    family = draw(st.sampled_from(("float", "float", "compare", "logical", "mod")))
    b_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "float":
        op = draw(st.sampled_from(_FLOAT_BINARY))
        a_shape = shape if op == "PRelu" else draw(broadcastable_shapes(shape, same_rank=True))
        return op, "FLOAT", draw(float_arrays(a_shape)), draw(float_arrays(b_shape))
    a_shape = draw(broadcastable_shapes(shape, same_rank=True))
    if family == "compare":
        return (draw(st.sampled_from(_COMPARE)), "FLOAT", draw(arrays("FLOAT", a_shape, -3, 3, integers=True)),
                draw(arrays("FLOAT", b_shape, -3, 3, integers=True)))
    if family == "logical":
        return draw(st.sampled_from(_LOGICAL)), "BOOL", draw(arrays("BOOL", a_shape)), draw(arrays("BOOL", b_shape))
    return "Mod", "INT32", draw(arrays("INT32", a_shape, -20, 20)), draw(arrays("INT32", b_shape, 1, 5))


def _transpose_sink_binary() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        op, _, a, b = _binary_operands(draw, st, shape)
        g = _Graph()
        g.input("a", a)
        g.input("b", b)
        g.nodes += [_transpose_node("a", "ta", p), _transpose_node("b", "tb", p)]
        g.node(op, ["ta", "tb"], "m")
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-binary", ["m"], also=_SANDWICH)
        g.nodes.append(_transpose_node("m", "y", inverse(p)))
        return g.case("transpose-sink-binary", ["y"], also=_SANDWICH)

    return build()


def _binary_const(draw: Callable, st: Any, g: _Graph, a: str, shape: tuple[int, ...], out: str) -> str:
    """`out` = B(a, c) or B(c, a) for a drawn float binary op and a constant c that broadcasts to `shape`
    without enlarging it (possibly of lower rank)."""
    op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div", "Pow", "PRelu", *_COMPARE)))
    c_shape = draw(broadcastable_shapes(shape))
    integers = op in _COMPARE
    low = 0.5 if op in ("Div", "Pow") else -4.0
    g.inits[f"{out}_c"] = draw(arrays("FLOAT", c_shape, low, 4.0 if op != "Pow" else 2.0, integers=integers))
    value = g.inits[f"{out}_c"]
    if op == "Pow":
        value[...] = np.round(value)  # integral exponents: negative bases stay real
    const_first = op != "PRelu" and draw(st.booleans())
    return g.node(op, [f"{out}_c", a] if const_first else [a, f"{out}_c"], out)


def _transpose_sink_binary_const() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        p = draw(perms(len(shape)))
        g = _Graph()
        integers = draw(st.booleans())
        x = g.input("x", draw(arrays("FLOAT", shape, -4, 4, integers=integers)))
        g.nodes.append(_transpose_node(x, "t", p))
        _binary_const(draw, st, g, "t", tuple(shape[i] for i in p), "m")
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-binary-const", ["m"], also=_SANDWICH)
        g.nodes.append(_transpose_node("m", "y", inverse(p)))
        return g.case("transpose-sink-binary-const", ["y"], also=_SANDWICH)

    return build()


def _transpose_sink_pad() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3, min_dim=2))
        rank = len(shape)
        p = draw(perms(rank))
        t_shape = [shape[i] for i in p]
        mode = draw(st.sampled_from(("constant", "constant", "reflect", "edge")))
        limit = [d - 1 if mode == "reflect" else 2 for d in t_shape]
        pads = [draw(st.integers(0, limit[i % rank])) for i in range(2 * rank)]
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        g.nodes.append(_transpose_node(x, "t", p))
        g.inits["pads"] = np.array(pads, np.int64)
        inputs = ["t", "pads"]
        if mode == "constant" and draw(st.booleans()):
            g.inits["value"] = np.array(draw(st.sampled_from((0.0, 1.5, -2.0))), np.float32)
            inputs.append("value")
        g.node("Pad", inputs, "pd", mode=mode)
        if draw(st.integers(0, 3)) == 0:
            return g.case("transpose-sink-pad", ["pd"], also=_SANDWICH)
        g.nodes.append(_transpose_node("pd", "y", inverse(p)))
        return g.case("transpose-sink-pad", ["y"], also=_SANDWICH)

    return build()


def _axes_op(g: _Graph, op: str, x: str, y: str, axes: Sequence[int], opset: int, since: int, **attrs: Any) -> str:
    """`op` with `axes` as an attribute before opset `since`, as an input from it on."""
    if opset >= since:
        g.inits[f"{y}_axes"] = np.array(list(axes), np.int64)
        return g.node(op, [x, f"{y}_axes"], y, **attrs)
    return g.node(op, [x], y, axes=list(axes), **attrs)


_REDUCE_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare")


def _transpose_sink_reduce() -> "SearchStrategy[RuleCase]":
    from eqsat.rewrites.layout import MAX_REDUCE_AXES

    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 5, 3))
        rank = len(shape)
        p = draw(perms(rank))
        op = draw(st.sampled_from(_REDUCE_OPS))
        kind = draw(st.sampled_from(("some", "some", "some", "all", "empty")))
        if kind == "some" and rank > 1:
            axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=min(MAX_REDUCE_AXES, rank - 1))))
        elif kind == "all" or rank == 1:
            axes = list(range(rank))
        else:
            axes = []
        if draw(st.booleans()):  # negative axes: normalized at load
            axes = [a - rank if draw(st.booleans()) else a for a in axes]
        keepdims = draw(st.sampled_from((0, 1)))
        opset = draw(st.sampled_from((13, 18)))
        g = _Graph()
        low, high = (0.5, 1.5) if op == "ReduceProd" else (-4.0, 4.0)  # products stay in range
        x = g.input("x", draw(float_arrays(shape, np.float32, low, high)))
        g.nodes.append(_transpose_node(x, "t", p))
        if axes:
            r = _axes_op(g, op, "t", "r", axes, opset, 13 if op == "ReduceSum" else 18, keepdims=keepdims)
        else:
            r = g.node(op, ["t"], "r", keepdims=keepdims)
        if keepdims and kind == "some" and draw(st.booleans()):  # the inverse transpose cancels
            g.nodes.append(_transpose_node(r, "y", inverse(p)))
            return g.case("transpose-sink-reduce", ["y"], also=_SANDWICH, opset=opset)
        return g.case("transpose-sink-reduce", [r], also=_SANDWICH, opset=opset)

    return build()


def _transpose_to_reshape() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        rank = draw(st.integers(2, 6))
        shape = list(draw(shapes(rank, rank, 3)))
        ones = draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank - 1))
        for i in range(rank):  # some dim > 1: an all-ones tensor is transpose-identity's
            shape[i] = 1 if i in ones else max(shape[i], 2)
        # a perm that moves no data: any order of the size-1 axes among the others, which keep their order
        q = list(draw(perms(rank)))
        big = [a for a in range(rank) if shape[a] != 1]
        slots = [i for i, a in enumerate(q) if shape[a] != 1]
        for i, a in zip(slots, big):
            q[i] = a
        if q == list(range(rank)):  # identity: swap two size-1 axes or a size-1 axis with its neighbour
            one = sorted(ones)[0]
            other = one + 1 if one + 1 < rank else one - 1
            q[one], q[other] = q[other], q[one]
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), tuple(shape))))
        g.nodes.append(_transpose_node(x, "t", q))
        if draw(st.booleans()):
            return g.case("transpose-to-reshape", ["t"])
        return g.case("transpose-to-reshape", [g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", ["t"], "y")])

    return build()


def _reshape_transpose_reshape() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        """x -> Reshape [x0*x1, x2...] -> Transpose keeping axis 0 (moving others) -> Reshape [x0, x1, ...]."""
        shape = draw(shapes(4, 5, 3, min_dim=2))
        tail = draw(perms(len(shape) - 2).filter(lambda q: list(q) != sorted(q)))
        p = (0, *(1 + q for q in tail))
        merged = (shape[0] * shape[1], *shape[2:])
        split = (shape[0], shape[1], *(merged[k] for k in p[1:]))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64"))), shape)))
        g.inits["m"] = np.array(merged, np.int64)
        g.inits["s"] = np.array(split, np.int64)
        g.nodes += [oh.make_node("Reshape", [x, "m"], ["r"]), _transpose_node("r", "t", p),
                    oh.make_node("Reshape", ["t", "s"], ["y"])]
        return g.case("reshape-transpose-reshape", ["y"])

    return build()


def _squeeze_unsqueeze_cancel() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        opset = draw(st.sampled_from((11, 13, 17)))
        g = _Graph()
        if draw(st.booleans()):  # Squeeze(Unsqueeze(x, a), a)
            shape = draw(shapes(0, 4, 3))
            out_rank = len(shape) + draw(st.integers(1, 2))
            axes = sorted(draw(st.sets(st.integers(0, out_rank - 1), min_size=out_rank - len(shape),
                                       max_size=out_rank - len(shape))))
            x = g.input("x", draw(arrays("FLOAT", shape)))
            u = _axes_op(g, "Unsqueeze", x, "u", [a - out_rank if draw(st.booleans()) else a for a in axes], opset, 13)
            _axes_op(g, "Squeeze", u, "y", axes, opset, 13)
        else:  # Unsqueeze(Squeeze(x, a), a): x has size-1 dims at a
            shape = list(draw(shapes(1, 5, 3)))
            axes = sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape))))
            for a in axes:
                shape[a] = 1
            x = g.input("x", draw(arrays("FLOAT", tuple(shape))))
            sq = _axes_op(g, "Squeeze", x, "s", axes, opset, 13)
            _axes_op(g, "Unsqueeze", sq, "y", axes, opset, 13)
        return g.case("squeeze-unsqueeze-cancel", [g.node("Relu", ["y"], "out")], opset=opset)

    return build()


#: dtypes whose values tests can feed and read back through onnxruntime.
_FEEDABLE = ("BOOL", "UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "INT64", "FLOAT16", "FLOAT", "DOUBLE")
_CAST_OUT = (*_FEEDABLE, "UINT64")


def _lossless_pairs() -> list[tuple[str, str]]:
    from eqsat.terms import LOSSLESS_CASTS

    return [(a, b) for a, b in LOSSLESS_CASTS if a in _FEEDABLE]


def _cast_values(draw: Callable, st: Any, d: str, t1: str, t2: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of dtype `d` for Cast(Cast(x, t1), t2): floats in [-8, 8], integers over most of their
    range; in range of t2 when a float is cast to the integer t2 (out of range, ONNX leaves that cast
    undefined, so the original graph has no defined result to compare with)."""
    floats = ("FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE")
    low, high = (-8.0, 8.0) if d in floats else (-1e9, 1e9)
    if (d in floats or t1 in floats) and t2 not in floats and t2 != "BOOL":
        low, high = _range_of(_np_dtype(t2), low, high)
    return draw(arrays(d, shape, low, high))


def _cast_pair(rule: str, also: str, back_to_source: bool) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x (dtype d) -> Cast(t1) -> Cast(t2) with d -> t1 lossless; t2 = d when `back_to_source` (a no-op pair)."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            d, t1 = draw(st.sampled_from(_lossless_pairs()))
            t2 = d if back_to_source else draw(st.sampled_from([t for t in _CAST_OUT if t != t1]))
            shape = draw(shapes(0, 3, 3))
            g = _Graph()
            x = g.input("x", _cast_values(draw, st, d, t1, t2, shape))
            g.node("Cast", [x], "c1", to=_elem_type(t1))
            g.node("Cast", ["c1"], "y", to=_elem_type(t2))
            return g.case(rule, ["y"], also=(also,))

        return build()

    return strategy


_cast_chain_lossless = _cast_pair("cast-chain-lossless", "cast-noop", back_to_source=False)
_cast_noop = _cast_pair("cast-noop", "cast-chain-lossless", back_to_source=True)


def _cast_fp16_roundtrip() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape, np.float32, -100, 100)))
        g.node("Cast", [x], "h", to=_elem_type(draw(st.sampled_from(("FLOAT16", "FLOAT16", "BFLOAT16")))))
        g.node("Cast", ["h"], "f", to=onnx.TensorProto.FLOAT)
        out = g.node("Relu", ["f"], "y") if draw(st.booleans()) else "f"
        return g.case("cast-fp16-roundtrip", [out], allow=("precision-changing",))

    return build()


def _relu_merge() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        prev = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "FLOAT16", "DOUBLE", "INT32"))), shape)))
        for k in range(draw(st.integers(2, 3))):
            prev = g.node("Relu", [prev], f"r{k}")
        return g.case("relu-merge", [prev])

    return build()


def _neutral_element(rule: str, op: str, value: float, *,
                     commutative: bool = True) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """x op k for k filled with the neutral `value` (on either side when `commutative`), -0.0 included."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(0, 4, 3))
            dtype = draw(st.sampled_from(("FLOAT", "DOUBLE", "FLOAT16", "INT32", "INT64")))
            g = _Graph()
            x = g.input("x", draw(arrays(dtype, shape)))
            if draw(st.booleans()):
                x = g.node("Abs", [x], "ax")
            k = draw(st.integers(0, len(shape)))
            neutral = -0.0 if value == 0.0 and dtype in ("FLOAT", "DOUBLE") and draw(st.booleans()) else value
            g.inits["k"] = np.full((1,) * k, neutral, _np_dtype(dtype))
            g.node(op, ["k", x] if commutative and draw(st.booleans()) else [x, "k"], "y")
            return g.case(rule, ["y"])

        return build()

    return strategy


def _identity_remove() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(0, 4, 3))
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT64", "BOOL"))), shape)))
        if draw(st.booleans()):  # an output that is an input, under another name
            return g.case("identity-remove", [g.node("Identity", [x], "y")])
        r = g.node("Not" if g.feeds[x].dtype == np.bool_ else "Abs", [x], "r")
        return g.case("identity-remove", [r, g.node("Identity", [r], "y")])

    return build()


def _dropout_remove() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        shape = draw(shapes(1, 4, 3))
        g = _Graph()
        x = g.input("x", draw(float_arrays(shape)))
        if draw(st.booleans()):
            x = g.node("Relu", [x], "r")
        g.node("Dropout", [x], "y")
        return g.case("dropout-remove", ["y"], opset=draw(st.sampled_from((7, 10, 11))))

    return build()


def _analysis_case(rule: str, kind: str) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """Graphs where a rewrite needs a fact that only the analysis rule `rule` derives (see the docs of
    tests/test_rules_analysis.py): a sunk unary (shape-unary), a sunk binary (shape-binary), a transposed
    constant created by a rewrite (shape-transpose, constant-terms)."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()

        @st.composite
        def build(draw: Callable) -> RuleCase:
            shape = draw(shapes(1, 4, 3))
            p = draw(perms(len(shape)))
            t_shape = tuple(shape[i] for i in p)
            g = _Graph()
            also: tuple[str, ...] = ("transpose-sink-binary-const", *_SANDWICH)
            back = inverse(p)
            if kind == "unary":
                x = g.input("x", draw(float_arrays(shape)))
                g.nodes.append(_transpose_node(x, "t", p))
                _draw_unary(draw, g, "t", "u", st)
                if g.nodes[-1].op_type == "Cast" or g.nodes[-1].op_type == "IsNaN":
                    g.nodes[-1] = oh.make_node("Relu", ["t"], ["u"])
                _binary_const(draw, st, g, "u", t_shape, "m")
                also += ("transpose-sink-unary",)
            elif kind == "binary":
                op = draw(st.sampled_from(("Add", "Sub", "Mul", "Div")))  # shape-binary needs equal shapes
                g.input("a", draw(float_arrays(shape)))
                g.input("b", draw(float_arrays(shape, low=0.5) if op == "Div" else float_arrays(shape)))
                g.nodes += [_transpose_node("a", "ta", p), _transpose_node("b", "tb", p)]
                g.node(op, ["ta", "tb"], "u")
                _binary_const(draw, st, g, "u", t_shape, "m")
                also += ("transpose-sink-binary",)
            else:  # a constant transposed by one sinking step is sunk again through a second transpose
                q = draw(perms(len(shape)))
                x = g.input("x", draw(float_arrays(shape)))
                g.nodes += [_transpose_node(x, "t0", q), _transpose_node("t0", "t", p)]
                qp_shape = tuple(shape[q[i]] for i in p)
                _binary_const(draw, st, g, "t", qp_shape, "m")
                also = ("transpose-sink-binary-const",)
                back = inverse(tuple(q[i] for i in p))
            g.nodes.append(_transpose_node("m", "y", back))
            return g.case(rule, ["y"], also=also)

        return build()

    return strategy


@dataclasses.dataclass(frozen=True)
class GraphCase:
    """A drawn graph and its inputs, for checks of all rules together."""

    model: onnx.ModelProto
    feeds: Mapping[str, np.ndarray]
    allow: tuple[str, ...] = ()

    def check(self) -> "Result":
        """`assert_optimization_sound` on this case."""
        return assert_optimization_sound(self.model, self.feeds, allow=self.allow)

    def __repr__(self) -> str:
        return repr(RuleCase("(all)", self.model, self.feeds, allow=self.allow))


def random_graphs(max_steps: int = 8, allow: Sequence[str] = ()) -> "SearchStrategy[GraphCase]":
    """Small float graphs mixing the ops the rules know (transposes and their inverses, unary and binary
    elementwise ops, constants incl. neutral ones, pads, cast round trips, Identity, Relu chains), with
    shared values and one or two outputs: rule interactions show up here."""
    st = _st()

    @st.composite
    def build(draw: Callable) -> GraphCase:
        shape = draw(shapes(2, 4, 3))
        g = _Graph()
        values: list[tuple[str, tuple[int, ...], tuple[int, ...] | None]] = []  # (name, shape, perm that made it)
        for name in ("a", "b")[: draw(st.integers(1, 2))]:
            values.append((g.input(name, draw(float_arrays(shape))), tuple(shape), None))
        for k in range(draw(st.integers(1, max_steps))):
            x, x_shape, made_by = values[draw(st.integers(0, len(values) - 1))] if draw(st.booleans()) else values[-1]
            rank, out = len(x_shape), f"v{k}"
            kind = draw(st.sampled_from(("transpose", "transpose", "unary", "binary", "const", "neutral", "pad",
                                         "cast", "identity", "relu2")))
            if kind == "transpose":
                perm = inverse(made_by) if made_by is not None and draw(st.booleans()) else draw(perms(rank))
                g.nodes.append(_transpose_node(x, out, perm))
                values.append((out, tuple(x_shape[i] for i in perm), tuple(perm)))
                continue
            if kind == "unary":
                _draw_unary(draw, g, x, out, st)
                if g.nodes[-1].op_type in ("Cast", "IsNaN"):
                    g.nodes[-1] = oh.make_node("Relu", [x], [out])
            elif kind == "binary":
                same = [v for v in values if v[1] == x_shape]
                y = draw(st.sampled_from(same))[0]
                g.node(draw(st.sampled_from(("Add", "Sub", "Mul", "Max", "Min"))), [x, y], out)
            elif kind == "const":
                _binary_const(draw, st, g, x, x_shape, out)
                if g.nodes[-1].op_type in _COMPARE:
                    g.nodes[-1] = oh.make_node("Add", list(g.nodes[-1].input), [out])
            elif kind == "neutral":
                op, value = draw(st.sampled_from((("Mul", 1.0), ("Add", 0.0))))
                g.inits[f"{out}_k"] = np.full((1,) * draw(st.integers(0, rank)), value, np.float32)
                g.node(op, [x, f"{out}_k"], out)
            elif kind == "pad":
                g.inits[f"{out}_pads"] = np.array([draw(st.integers(0, 1)) for _ in range(2 * rank)], np.int64)
                g.node("Pad", [x, f"{out}_pads"], out)
                pads = g.inits[f"{out}_pads"]
                values.append((out, tuple(d + int(pads[i] + pads[i + rank]) for i, d in enumerate(x_shape)), None))
                continue
            elif kind == "cast":
                g.node("Cast", [x], f"{out}_c", to=_elem_type(draw(st.sampled_from(("DOUBLE", "FLOAT16")))))
                g.node("Cast", [f"{out}_c"], out, to=onnx.TensorProto.FLOAT)
            elif kind == "identity":
                g.node("Identity", [x], out)
            else:
                g.node("Relu", [g.node("Relu", [x], f"{out}_r")], out)
            values.append((out, x_shape, None))
        outputs = [values[-1][0]]
        extra = values[draw(st.integers(0, len(values) - 1))][0]
        if draw(st.booleans()) and extra not in outputs and extra not in g.feeds:
            outputs.append(extra)
        model = make_model(g.nodes, g.inputs, outputs, g.inits)
        return GraphCase(model, g.feeds, tuple(allow))

    return build()


#: rule name -> strategy of graphs where the rule fires (one per registered rule).
PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "transpose-merge": _transpose_merge,
    "transpose-identity": _transpose_identity,
    "transpose-sink-unary": _transpose_sink_unary,
    "transpose-sink-binary": _transpose_sink_binary,
    "transpose-sink-binary-const": _transpose_sink_binary_const,
    "transpose-sink-pad": _transpose_sink_pad,
    "transpose-sink-reduce": _transpose_sink_reduce,
    "transpose-to-reshape": _transpose_to_reshape,
    "reshape-transpose-reshape": _reshape_transpose_reshape,
    "squeeze-unsqueeze-cancel": _squeeze_unsqueeze_cancel,
    "cast-noop": _cast_noop,
    "cast-chain-lossless": _cast_chain_lossless,
    "cast-fp16-roundtrip": _cast_fp16_roundtrip,
    "relu-merge": _relu_merge,
    "mul-one": _neutral_element("mul-one", "Mul", 1.0),
    "add-zero": _neutral_element("add-zero", "Add", 0.0),
    "identity-remove": _identity_remove,
    "dropout-remove": _dropout_remove,
    "shape-unary": _analysis_case("shape-unary", "unary"),
    "shape-binary": _analysis_case("shape-binary", "binary"),
    "shape-transpose": _analysis_case("shape-transpose", "transposed-constant"),
    "constant-terms": _analysis_case("constant-terms", "transposed-constant"),
}


def check_rules(examples: int = 100, rules: Sequence[str] | None = None, *, shrink: bool = True,
                progress: Callable[[str], None] | None = None) -> list[str]:
    """Run each rule's property (`PROPERTIES`) on `examples` drawn graphs (derandomized: the same graphs
    every run); return the failures, one message per failing rule, with hypothesis's counterexample
    (shrunk unless `shrink` is False). A registered rule without a property is a failure too.
    `progress` is called with each rule name before it runs."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.reporting import with_reporter

    names = list(rules) if rules is not None else list(_rule_table())
    unknown = set(names) - set(_rule_table())
    if unknown:
        raise KeyError(f"unknown rule(s): {', '.join(sorted(unknown))}")
    failures: list[str] = []
    for name in names:
        if progress is not None:
            progress(name)
        strategy = PROPERTIES.get(name)
        if strategy is None:
            failures.append(f"{name}: no property in eqsat.testing.PROPERTIES")
            continue

        phases = [p for p in Phase if shrink or p not in (Phase.shrink, Phase.explain)]

        @settings(max_examples=examples, deadline=None, database=None, derandomize=True, print_blob=False,
                  suppress_health_check=list(HealthCheck), phases=phases)
        @given(strategy())
        def prop(case: RuleCase) -> None:
            case.check()

        report: list[str] = []
        try:
            with with_reporter(report.append):
                prop()
        except Exception as exc:  # a failed property: hypothesis re-raises the shrunk example's error
            detail = "\n".join(str(r) for r in report if r)
            failures.append(f"{name}: {type(exc).__name__}: {exc}" + (f"\n{detail}" if detail else ""))
    return failures


# The rule catalogue families' builders live in their own module (it builds on the helpers above).
from eqsat.testing_catalogue import PROPERTIES as _CATALOGUE_PROPERTIES  # noqa: E402

PROPERTIES.update(_CATALOGUE_PROPERTIES)

# The conv, linear and reduce families' builders (eqsat/testing_folds.py).
from eqsat.testing_folds import PROPERTIES as _FOLD_PROPERTIES  # noqa: E402

PROPERTIES.update(_FOLD_PROPERTIES)


def _drawing_symbolic(builder: Callable[[], "SearchStrategy[RuleCase]"]) -> Callable[[], "SearchStrategy[RuleCase]"]:
    """`builder`'s cases, one in four also checked with symbolic dims (`RuleCase.symbolic`)."""
    def strategy() -> "SearchStrategy[RuleCase]":
        st = _st()
        return st.tuples(builder(), st.integers(0, 3)).map(
            lambda drawn: dataclasses.replace(drawn[0], symbolic=drawn[1] == 0))

    return strategy


for _name, _builder in list(PROPERTIES.items()):
    PROPERTIES[_name] = _drawing_symbolic(_builder)


# --------------------------------------------------------------------------------------------------
# random ONNX graphs over the supported ops (fuzzing: tests/test_fuzz.py, benchmarks/fuzz.py)

#: What `onnx_graphs` draws from, by family (pass a subset as `families`):
#: layout (Transpose with inverses, Reshape, Flatten, Squeeze/Unsqueeze, Pad, Slice, Expand),
#: elementwise (unary ops, binary ops between values and with broadcast constants, neutral constants),
#: cast (round trips through DOUBLE, FLOAT16 and, on exactly computed values, integers),
#: quant (QuantizeLinear/DequantizeLinear pairs, per tensor and per channel, layout ops in between,
#: DQ'd conv weights), conv (Conv with pads, strides, groups, biases; BatchNormalization; scale/bias/
#: activation chains), linear (MatMul, Gemm, MatMul+Add, scaled MatMul), reduce (ReduceSum/Mean/Max,
#: sum-times-1/N, GlobalAveragePool, pools), normalization (decomposed LayerNorm/InstanceNorm,
#: LayerNormalization), activation (Gelu decompositions, Clip chains, Max(x, a*x), Softmax),
#: opaque (Concat, Split: ops no rule models, kept intact), share (diamonds: two branches of one value
#: joined again).
GRAPH_FAMILIES = ("layout", "elementwise", "cast", "quant", "conv", "linear", "reduce", "normalization",
                  "activation", "opaque", "share")
#: Largest tensor (elements) `onnx_graphs` creates: small graphs run fast and still show layout bugs.
GRAPH_MAX_ELEMENTS = 512


@dataclasses.dataclass(frozen=True)
class _FuzzValue:
    name: str
    shape: tuple[int, ...]
    exact: bool                             # computed bit-exactly under every rewrite (see _GraphFuzzer)
    perm: tuple[int, ...] | None = None     # the Transpose that produced it (an inverse may follow)


class _GraphFuzzer:
    """Draws one graph step by step over a pool of float32 values.

    A value is `exact` when only ops whose results no rule changes by even one ulp computed it (layout
    ops, Relu, Abs, Neg, Max/Min, Clip, Q/DQ): discontinuous ops (Floor, Round, integer casts, Quantize)
    are applied only to exact values, so a legitimate fp-reassoc rewrite upstream (a folded BatchNorm)
    can never move a value across a rounding boundary and look like a bug.
    """

    def __init__(self, draw: Callable, st: Any, families: Sequence[str], opset: int, lossy: bool = False) -> None:
        self.draw, self.st, self.opset = draw, st, opset
        self.lossy = lossy  # precision-changing rules admitted: no Q -> DQ of computed values then
        self.families = tuple(families)
        self.g = _Graph()
        self.pool: list[_FuzzValue] = []
        self.rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        self.k = 0

    # ---- helpers ----
    def fresh(self, base: str) -> str:
        self.k += 1
        return f"{base}{self.k}"

    def pick(self, options: Sequence[Any]) -> Any:
        return self.draw(self.st.sampled_from(list(options)))

    def chance(self, p: float = 0.5) -> bool:
        return self.draw(self.st.integers(0, 99)) < int(p * 100)

    def const(self, base: str, array: np.ndarray) -> str:
        name = self.fresh(base)
        self.g.inits[name] = np.asarray(array)
        return name

    def floats(self, shape: Sequence[int], low: float = -2.0, high: float = 2.0) -> np.ndarray:
        return self.rng.uniform(low, high, size=tuple(shape)).astype(np.float32)

    def ints(self, values: Sequence[int]) -> str:
        return self.const("i", np.array(list(values), np.int64))

    def node(self, op: str, inputs: Sequence[str], **attrs: Any) -> str:
        out = self.fresh(op[:3].lower())
        self.g.nodes.append(oh.make_node(op, list(inputs), [out], name=f"n_{out}", **attrs))
        return out

    def add(self, name: str, shape: Sequence[int], exact: bool, perm: tuple[int, ...] | None = None) -> _FuzzValue:
        value = _FuzzValue(name, tuple(int(d) for d in shape), exact, perm)
        self.pool.append(value)
        return value

    def axes_node(self, op: str, x: str, axes: Sequence[int], since: int, **attrs: Any) -> str:
        """`op` with `axes` as an attribute before opset `since`, as an input from it on."""
        if self.opset >= since:
            return self.node(op, [x, self.ints(axes)], **attrs)
        return self.node(op, [x], axes=list(axes), **attrs)

    def reduce(self, op: str, x: str, axes: Sequence[int], keepdims: int) -> str:
        return self.axes_node(op, x, axes, 13 if op == "ReduceSum" else 18, keepdims=keepdims)

    def scalar(self, value: float) -> str:
        return self.const("s", np.array(value, np.float32))

    def channel_const(self, x: _FuzzValue, low: float, high: float) -> str:
        """A constant that broadcasts against `x` without enlarging it: per channel, per last axis,
        a scalar or full size."""
        rank, shape = len(x.shape), x.shape
        options: list[tuple[int, ...]] = [(), (1,), (shape[-1],)] if rank else [()]
        if rank >= 3:
            options += [(shape[1],) + (1,) * (rank - 2), (1, shape[1]) + (1,) * (rank - 2)]
        options.append(shape)
        return self.const("c", self.floats(self.pick(options), low, high))

    # ---- the steps: each returns the new value, or None when `x` does not suit it ----
    def step(self, x: _FuzzValue) -> _FuzzValue | None:
        family = self.pick(self.families)
        return getattr(self, f"_{family}")(x)

    def _layout(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        kind = self.pick(("transpose", "transpose", "sandwich", "sandwich", "reshape", "flatten", "unsqueeze",
                          "squeeze", "pad", "slice", "expand"))
        if kind == "sandwich" and rank >= 2:  # Transpose(p) -> elementwise or pad -> Transpose(p^-1)
            perm = self.draw(perms(rank))
            t = self.add(self.node("Transpose", [x.name], perm=list(perm)), [shape[i] for i in perm], x.exact,
                         tuple(perm))
            inner = self.pick((self._elementwise, self._elementwise, self._activation, self._layout))(t) or t
            if len(inner.shape) != rank:
                return inner
            back = inverse(perm)
            out = self.node("Transpose", [inner.name], perm=list(back))
            return self.add(out, [inner.shape[i] for i in back], inner.exact, back)
        if kind == "transpose" and rank >= 2:
            perm = inverse(x.perm) if x.perm is not None and self.chance(0.6) else self.draw(perms(rank))
            out = self.node("Transpose", [x.name], perm=list(perm))
            return self.add(out, [shape[i] for i in perm], x.exact, tuple(perm))
        if kind == "reshape" and rank >= 1:
            if rank >= 2 and self.chance():  # merge two neighbouring axes
                i = self.draw(self.st.integers(0, rank - 2))
                new = [*shape[:i], shape[i] * shape[i + 1], *shape[i + 2:]]
            else:
                new = list(shape)
                new.insert(self.draw(self.st.integers(0, rank)), 1)
            spec = list(new)
            if self.chance(0.3):
                spec[self.draw(self.st.integers(0, len(spec) - 1))] = -1
            elif self.chance(0.3):  # 0 copies the input's dim at the same index
                same = [i for i in range(min(rank, len(spec))) if spec[i] == shape[i]]
                if same:
                    spec[self.pick(same)] = 0
            out = self.node("Reshape", [x.name, self.ints(spec)])
            return self.add(out, new, x.exact)
        if kind == "flatten" and rank >= 1:
            axis = self.draw(self.st.integers(0, rank))
            out = self.node("Flatten", [x.name], axis=axis)
            return self.add(out, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))], x.exact)
        if kind == "unsqueeze" and rank <= 4:
            axis = self.draw(self.st.integers(0, rank))
            out = self.axes_node("Unsqueeze", x.name, [axis if self.chance() else axis - rank - 1], 13)
            return self.add(out, [*shape[:axis], 1, *shape[axis:]], x.exact)
        if kind == "squeeze" and 1 in shape and rank >= 2:
            axis = self.pick([i for i, d in enumerate(shape) if d == 1])
            out = self.axes_node("Squeeze", x.name, [axis], 13)
            return self.add(out, [d for i, d in enumerate(shape) if i != axis], x.exact)
        if kind == "pad" and rank >= 1:
            pads = [self.draw(self.st.integers(0, 1)) for _ in range(2 * rank)]
            new = [d + pads[i] + pads[i + rank] for i, d in enumerate(shape)]
            if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
                return None
            inputs = [x.name, self.ints(pads)]
            if self.chance(0.3):
                inputs.append(self.scalar(self.pick((0.0, 1.5))))
            out = self.node("Pad", inputs)
            return self.add(out, new, x.exact)
        if kind == "slice" and rank >= 1:
            explicit_axes = self.chance(0.7)  # without axes, starts/ends apply to axis 0
            axis = self.draw(self.st.integers(0, rank - 1)) if explicit_axes else 0
            dim = shape[axis]
            start = self.draw(self.st.integers(0, dim - 1))
            end = self.draw(self.st.integers(start + 1, dim))
            inputs = [x.name, self.ints([start]), self.ints([end if end < dim or self.chance() else 2**62])]
            if explicit_axes:
                inputs.append(self.ints([axis if self.chance() else axis - rank]))
                if self.chance(0.3):
                    inputs.append(self.ints([1]))
            out = self.node("Slice", inputs)
            return self.add(out, [end - start if i == axis else d for i, d in enumerate(shape)], x.exact)
        if kind == "expand" and rank >= 1:
            ones = [i for i, d in enumerate(shape) if d == 1]
            new = list(shape)
            if ones and self.chance():
                new[self.pick(ones)] = self.draw(self.st.integers(1, 3))
            if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
                return None
            out = self.node("Expand", [x.name, self.ints(new)])
            return self.add(out, new, x.exact)
        return None

    _CONTINUOUS = ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Softsign", "Erf", "Sin", "Cos", "Softplus",
                   "Identity", "Exp")
    _PRESERVES_EXACT = ("Relu", "Abs", "Neg", "Identity")

    def _elementwise(self, x: _FuzzValue) -> _FuzzValue | None:
        kind = self.pick(("unary", "unary", "binary", "const", "const", "neutral", "discontinuous"))
        if kind == "unary":
            op = self.pick(self._CONTINUOUS)
            if op == "Exp":  # bounded first: Exp(Tanh(x)) stays in [1/e, e]
                x = self.add(self.node("Tanh", [x.name]), x.shape, False)
            out = self.node(op, [x.name])
            return self.add(out, x.shape, x.exact and op in self._PRESERVES_EXACT)
        if kind == "discontinuous":
            if not x.exact:
                return None
            op = self.pick(("Floor", "Ceil", "Round", "Sign"))
            return self.add(self.node(op, [x.name]), x.shape, True)
        if kind == "binary":
            partners = [v for v in self.pool if _broadcasts_to(v.shape, x.shape)]
            y = self.pick(partners)
            op = self.pick(("Add", "Sub", "Mul", "Max", "Min"))
            a, b = (x.name, y.name) if self.chance() else (y.name, x.name)
            return self.add(self.node(op, [a, b]), x.shape, x.exact and y.exact and op in ("Max", "Min"))
        if kind == "const":
            op = self.pick(("Add", "Sub", "Mul", "Div", "Pow"))
            if op == "Pow":
                return self.add(self.node("Pow", [x.name, self.scalar(self.pick((2.0, 1.0)))]), x.shape, False)
            c = self.channel_const(x, 0.5, 2.0) if op == "Div" else self.channel_const(x, -2.0, 2.0)
            inputs = [c, x.name] if op != "Div" and self.chance(0.3) else [x.name, c]
            return self.add(self.node(op, inputs), x.shape, False)
        op, value = self.pick((("Mul", 1.0), ("Add", 0.0), ("Sub", 0.0), ("Div", 1.0)))
        rank = len(x.shape)
        c = self.const("k", np.full((1,) * self.draw(self.st.integers(0, rank)), value, np.float32))
        inputs = [c, x.name] if op in ("Mul", "Add") and self.chance() else [x.name, c]
        return self.add(self.node(op, inputs), x.shape, x.exact)

    def _cast(self, x: _FuzzValue) -> _FuzzValue | None:
        options = ["DOUBLE", "FLOAT16"] + (["INT32", "INT64", "BOOL"] if x.exact else [])
        via = self.pick(options)
        mid = self.node("Cast", [x.name], to=_elem_type(via))
        if via == "DOUBLE" and self.chance(0.3):  # a step in double precision
            mid = self.node("Relu" if self.chance() else "Neg", [mid])
        out = self.node("Cast", [mid], to=onnx.TensorProto.FLOAT)
        return self.add(out, x.shape, x.exact and via in ("DOUBLE", "INT32", "INT64", "BOOL"))

    def _qparams(self, channels: int | None) -> tuple[str, str, str]:
        """(scale, zero point, elem type name) per tensor (channels None) or per channel."""
        qtype = self.pick(("INT8", "UINT8"))
        shape = () if channels is None else (channels,)
        scale = self.rng.uniform(0.01, 0.05, size=shape).astype(np.float32)
        if qtype == "INT8":
            zp = self.rng.integers(-5, 6, size=shape).astype(np.int8)
        else:
            zp = self.rng.integers(120, 136, size=shape).astype(np.uint8)
        return self.const("qs", scale), self.const("qz", zp), qtype

    def _quant(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        # Q -> DQ of a computed value only where no precision-changing rule may drop it (dq-q-drop also
        # drops Quantize's clamp) and on exact values (Quantize rounds: see the class doc)
        if x.exact and not self.lossy:
            per_channel = rank >= 2 and self.chance(0.3)
            scale, zp, _ = self._qparams(shape[1] if per_channel else None)
            attrs = {"axis": 1} if per_channel else {}
            q = self.node("QuantizeLinear", [x.name, scale, zp], **attrs)
            q_shape = list(shape)
            if not per_channel and rank >= 2 and self.chance(0.4):  # layout on the quantized tensor
                perm = self.draw(perms(rank))
                q = self.node("Transpose", [q], perm=list(perm))
                q_shape = [shape[i] for i in perm]
            dq = self.node("DequantizeLinear", [q, scale, zp] if self.chance(0.8) else [q, scale], **attrs)
            if self.chance(0.3) and rank >= 2:  # DQ -> Transpose -> Q -> DQ: a pattern the sinking rules move
                perm = self.draw(perms(rank))
                t = self.node("Transpose", [dq], perm=list(perm))
                q2 = self.node("QuantizeLinear", [t, scale, zp]) if not per_channel else None
                if q2 is not None:
                    dq = self.node("DequantizeLinear", [q2, scale, zp])
                    return self.add(dq, [q_shape[i] for i in perm], True)
                return self.add(t, [q_shape[i] for i in perm], True, tuple(perm))
            return self.add(dq, q_shape, True)
        if rank == 4:
            return self._conv(x, quantized_weights=True)
        return None

    def _conv(self, x: _FuzzValue, quantized_weights: bool = False) -> _FuzzValue | None:
        if len(x.shape) != 4:
            return self._batchnorm_or_scale(x) if len(x.shape) in (3, 4) and self.chance() else None
        n, c, h, w = x.shape
        kind = self.pick(("conv", "conv", "conv", "bn", "pad-conv"))
        if kind == "bn":
            return self._batchnorm_or_scale(x)
        depthwise = c > 1 and self.chance(0.25)
        group = c if depthwise else 1
        cout = c if depthwise else self.draw(self.st.integers(1, 4))
        k = self.pick((1, 3)) if min(h, w) >= 3 else 1
        stride = self.pick((1, 1, 2))
        pads = [self.draw(self.st.integers(0, k // 2 + (1 if k == 1 else 0))) for _ in range(4)]
        src = x.name
        if kind == "pad-conv":  # an explicit Pad of the spatial axes, merged into the conv by a rule
            explicit = [0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]]
            src = self.node("Pad", [x.name, self.ints(explicit)])
            h, w = h + pads[0] + pads[2], w + pads[1] + pads[3]
            pads = [0, 0, 0, 0]
        oh_, ow = (h + pads[0] + pads[2] - k) // stride + 1, (w + pads[1] + pads[3] - k) // stride + 1
        if oh_ < 1 or ow < 1 or n * cout * oh_ * ow > GRAPH_MAX_ELEMENTS:
            return None
        fan_in = (c // group) * k * k
        weights = self.floats((cout, c // group, k, k), -1.0, 1.0) / np.float32(np.sqrt(fan_in))
        if quantized_weights:
            wq = np.clip(np.round(weights / 0.02), -127, 127).astype(np.int8)
            w_name = self.node("DequantizeLinear", [self.const("wq", wq), self.const("ws", np.array(0.02, np.float32))])
        else:
            w_name = self.const("w", weights.astype(np.float32))
        inputs = [src, w_name]
        if self.chance(0.6):
            inputs.append(self.const("b", np.zeros(cout, np.float32) if self.chance(0.2) else self.floats((cout,))))
        attrs: dict[str, Any] = {"group": group} if group > 1 or self.chance(0.2) else {}
        if self.chance(0.7):
            attrs["kernel_shape"] = [k, k]
        if any(pads):
            attrs["pads"] = pads
        if stride > 1 or self.chance(0.2):
            attrs["strides"] = [stride, stride]
        out = self.add(self.node("Conv", inputs, **attrs), (n, cout, oh_, ow), False)
        # a chain the conv family folds: BN, per-channel scale and shift, an activation
        for link in self.draw(self.st.lists(self.st.sampled_from(("bn", "mul", "add", "div", "act")), max_size=3)):
            if link == "bn":
                out = self._batchnorm(out)
            elif link in ("mul", "add", "div"):
                shape = self.pick(((cout, 1, 1), (1, cout, 1, 1), ()))
                low, high = (0.5, 2.0) if link != "add" else (-1.0, 1.0)
                if link == "mul" and self.chance(0.3):
                    low, high = (-2.0, -0.5)
                op = {"mul": "Mul", "add": "Add", "div": "Div"}[link]
                c_name = self.const("c", self.floats(shape, low, high))
                inputs = [c_name, out.name] if link != "div" and self.chance(0.3) else [out.name, c_name]
                out = self.add(self.node(op, inputs), out.shape, False)
            else:
                out = self._activation(out, only=("Relu", "LeakyRelu", "Clip"))
        return out

    def _batchnorm(self, x: _FuzzValue) -> _FuzzValue:
        c = x.shape[1]
        names = [self.const("bs", self.floats((c,), 0.5, 1.5)), self.const("bb", self.floats((c,))),
                 self.const("bm", self.floats((c,), -0.5, 0.5)), self.const("bv", self.floats((c,), 0.5, 2.0))]
        out = self.node("BatchNormalization", [x.name, *names], epsilon=self.pick((1e-5, 1e-3)))
        return self.add(out, x.shape, False)

    def _batchnorm_or_scale(self, x: _FuzzValue) -> _FuzzValue | None:
        if len(x.shape) >= 3:
            return self._batchnorm(x)
        return None

    def _linear(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        k, m = shape[-1], self.draw(self.st.integers(1, 5))
        new = (*shape[:-1], m)
        if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
            return None
        weights = self.floats((k, m), -1.0, 1.0) / np.float32(np.sqrt(k))
        if rank == 2 and self.chance(0.3):
            trans_b = self.chance()
            b = self.const("gw", weights.T.copy() if trans_b else weights)
            inputs = [x.name, b]
            if self.chance(0.7):
                inputs.append(self.const("gc", self.floats(self.pick(((m,), (1, m), ())))))
            attrs = {"transB": 1} if trans_b else {}
            if self.chance(0.3):
                attrs["alpha"] = self.pick((0.5, 2.0))
            if len(inputs) == 3 and self.chance(0.3):
                attrs["beta"] = self.pick((0.5, 2.0))
            return self.add(self.node("Gemm", inputs, **attrs), new, False)
        out = self.add(self.node("MatMul", [x.name, self.const("mw", weights)]), new, False)
        if self.chance(0.5):
            bias = self.const("mb", self.floats((m,)))
            out = self.add(self.node("Add", [out.name, bias] if self.chance() else [bias, out.name]), new, False)
        if self.chance(0.3):
            out = self.add(self.node("Mul", [out.name, self.scalar(self.pick((0.5, 2.0, -1.5)))]), new, False)
        return out

    def _reduce(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        kind = self.pick(("reduce", "reduce", "sum-mean", "global", "pool"))
        if kind in ("global", "pool") and (rank != 4 or min(shape[2:]) < 2 and kind == "pool"):
            kind = "reduce"
        if kind == "global":
            if self.chance():
                return self.add(self.node("GlobalAveragePool", [x.name]), (*shape[:2], 1, 1), False)
            out = self.reduce("ReduceMean", x.name, [2, 3] if self.chance() else [-2, -1], 1)
            return self.add(out, (*shape[:2], 1, 1), False)
        if kind == "pool":
            op = self.pick(("MaxPool", "AveragePool"))
            out = self.node(op, [x.name], kernel_shape=[2, 2], strides=[2, 2])
            return self.add(out, (*shape[:2], shape[2] // 2, shape[3] // 2), x.exact and op == "MaxPool")
        axes = sorted(self.draw(self.st.sets(self.st.integers(0, rank - 1), min_size=1, max_size=rank)))
        keepdims = self.pick((0, 1))
        new = [1 if i in axes else d for i, d in enumerate(shape)] if keepdims else \
            [d for i, d in enumerate(shape) if i not in axes]
        shown = [a - rank if self.chance(0.3) else a for a in axes]
        if kind == "sum-mean":
            n = int(np.prod([shape[a] for a in axes]))
            total = self.reduce("ReduceSum", x.name, shown, keepdims)
            scaled = self.node("Mul", [total, self.scalar(np.float32(1.0 / n))]) if self.chance() else \
                self.node("Div", [total, self.scalar(float(n))])
            return self.add(scaled, new, False)
        op = self.pick(("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"))
        return self.add(self.reduce(op, x.name, shown, keepdims), new, x.exact and op in ("ReduceMax", "ReduceMin"))

    def _normalization(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 2:
            return None
        if rank == 4 and self.chance(0.3):
            axes, affine_shape = [2, 3], (shape[1], 1, 1)  # instance norm, decomposed
        else:
            axes, affine_shape = [rank - 1], (shape[-1],)
            if self.opset >= 17 and self.chance(0.3):
                inputs = [x.name, self.const("lg", self.floats(affine_shape, 0.5, 1.5))]
                if self.chance():
                    inputs.append(self.const("lb", self.floats(affine_shape)))
                return self.add(self.node("LayerNormalization", inputs, axis=-1, epsilon=1e-5), shape, False)
        shown = axes if self.chance() else [a - rank for a in axes]
        mean = self.reduce("ReduceMean", x.name, shown, 1)
        d = self.node("Sub", [x.name, mean])
        sq = self.node("Pow", [d, self.scalar(2.0)]) if self.chance() else self.node("Mul", [d, d])
        var = self.reduce("ReduceMean", sq, shown, 1)
        std = self.node("Sqrt", [self.node("Add", [var, self.scalar(self.pick((1e-5, 1e-6, 1e-3)))])])
        out = self.node("Div", [d, std])
        if self.chance(0.7):
            out = self.node("Mul", [out, self.const("ng", self.floats(affine_shape, 0.5, 1.5))])
            if self.chance(0.7):
                out = self.node("Add", [out, self.const("nb", self.floats(affine_shape))])
        return self.add(out, shape, False)

    def _activation(self, x: _FuzzValue, only: Sequence[str] | None = None) -> _FuzzValue | None:
        kind = self.pick(only or ("LeakyRelu", "Elu", "HardSigmoid", "Clip", "Clip", "gelu", "gelu-tanh",
                                  "max-leaky", "Softmax", "Relu"))
        if kind == "Relu":
            return self.add(self.node("Relu", [x.name]), x.shape, x.exact)
        if kind in ("LeakyRelu", "Elu"):
            return self.add(self.node(kind, [x.name], alpha=self.pick((0.01, 0.1, 0.2, 1.0))), x.shape, False)
        if kind == "HardSigmoid":
            return self.add(self.node(kind, [x.name], alpha=0.2, beta=0.5), x.shape, False)
        if kind == "Clip":
            out = x.name
            if self.chance(0.3):
                out = self.node("Relu", [out])
            for _ in range(self.draw(self.st.integers(1, 2))):
                lo = self.pick((0.0, -1.0, -6.0, None))
                hi = self.pick((6.0, 1.0, None)) if lo is not None else self.pick((6.0, 1.0))
                inputs = [out, self.scalar(lo) if lo is not None else ""]
                if hi is not None:
                    inputs.append(self.scalar(hi))
                out = self.node("Clip", inputs)
            return self.add(out, x.shape, x.exact)
        if kind == "max-leaky":
            alpha = self.pick((0.01, 0.1, 0.3))
            scaled = self.node("Mul", [x.name, self.scalar(alpha)] if self.chance() else [self.scalar(alpha), x.name])
            return self.add(self.node("Max", [x.name, scaled] if self.chance() else [scaled, x.name]), x.shape, False)
        if kind == "Softmax":
            if not x.shape:
                return None
            axis = self.draw(self.st.integers(-len(x.shape), len(x.shape) - 1))
            return self.add(self.node("Softmax", [x.name], axis=axis), x.shape, False)
        if kind == "gelu" and self.opset >= 20 and self.chance(0.3):
            return self.add(self.node("Gelu", [x.name]), x.shape, False)
        if kind == "gelu":
            inner = self.node("Div", [x.name, self.scalar(1.4142135381698608)]) if self.chance() else \
                self.node("Mul", [x.name, self.scalar(0.7071067690849304)])
            p = self.node("Add", [self.node("Erf", [inner]), self.scalar(1.0)])
        else:  # tanh approximation
            cube = self.node("Pow", [x.name, self.scalar(3.0)]) if self.chance() else \
                self.node("Mul", [x.name, self.node("Mul", [x.name, x.name])])
            s = self.node("Add", [x.name, self.node("Mul", [cube, self.scalar(0.044714998453855515)])])
            p = self.node("Add", [self.node("Tanh", [self.node("Mul", [s, self.scalar(0.7978845834732056)])]),
                                  self.scalar(1.0)])
        if self.chance():
            out = self.node("Mul", [self.node("Mul", [x.name, self.scalar(0.5)]), p])
        else:
            out = self.node("Mul", [self.node("Mul", [x.name, p]), self.scalar(0.5)])
        return self.add(out, x.shape, False)

    def _opaque(self, x: _FuzzValue) -> _FuzzValue | None:
        rank, shape = len(x.shape), x.shape
        if rank < 1:
            return None
        axis = self.draw(self.st.integers(0, rank - 1))
        if shape[axis] % 2 == 0 and self.chance():
            half = shape[axis] // 2
            a, b = self.fresh("spl"), self.fresh("spl")
            self.g.nodes.append(oh.make_node("Split", [x.name, self.ints([half, half])], [a, b], axis=axis,
                                             name=f"n_{a}"))
            new = [half if i == axis else d for i, d in enumerate(shape)]
            self.add(a, new, x.exact)
            return self.add(b, new, x.exact)
        partners = [v for v in self.pool if len(v.shape) == rank and
                    all(d == e for i, (d, e) in enumerate(zip(v.shape, shape)) if i != axis)]
        y = self.pick(partners)
        new = [d + y.shape[axis] if i == axis else d for i, d in enumerate(shape)]
        if int(np.prod(new)) > GRAPH_MAX_ELEMENTS:
            return None
        return self.add(self.node("Concat", [x.name, y.name], axis=axis), new, x.exact and y.exact)

    def _share(self, x: _FuzzValue) -> _FuzzValue | None:
        """A diamond: two branches of `x` (shape-preserving) joined by a binary op."""
        branches = []
        for _ in range(2):
            op = self.pick(("Relu", "Neg", "Sigmoid", "transpose-pair", "scale", "Identity"))
            if op == "transpose-pair" and len(x.shape) >= 2:
                perm = self.draw(perms(len(x.shape)))
                t = self.node("Transpose", [x.name], perm=list(perm))
                branches.append(self.node("Transpose", [self.node("Relu", [t])], perm=list(inverse(perm))))
            elif op == "scale":
                branches.append(self.node("Mul", [x.name, self.channel_const(x, 0.5, 2.0)]))
            else:
                branches.append(self.node(op if op != "transpose-pair" else "Relu", [x.name]))
        join = self.pick(("Add", "Mul", "Max", "Sub"))
        return self.add(self.node(join, branches), x.shape, False)


def _broadcasts_to(shape: Sequence[int], target: Sequence[int]) -> bool:
    """`shape` broadcasts to exactly `target` (numpy rules)."""
    if len(shape) > len(target):
        return False
    return all(d in (1, t) for d, t in zip(reversed(shape), reversed(target)))


def onnx_graphs(max_nodes: int = 10, *, families: Sequence[str] = GRAPH_FAMILIES, allow: Sequence[str] = (),
                opsets: Sequence[int] = (13, 17, 18, 20), symbolic: bool = True) -> "SearchStrategy[GraphCase]":
    """Random valid small ONNX graphs over the ops eqsat models (and a few it keeps opaque), with inputs.

    A graph has one or two float32 inputs (rank 1-4; 4-D NCHW when the conv family can use them, the
    second one of the same or a broadcastable shape), then up to `max_nodes` steps, each drawn from
    `families` (see GRAPH_FAMILIES) and applied to the last value or, half of the time, to any earlier
    one, so sub-graphs are shared; constants are random, scaled so values stay of moderate magnitude;
    one to three outputs (distinct values, never a graph input). With `symbolic`, the batch dimension is
    sometimes declared symbolic ("N"). The opset is drawn from `opsets` (attributes vs inputs follow
    it). Every drawn model passes the full ONNX checker (a failure here is a bug of the strategy).
    `allow` is passed on to the GraphCase (soundness classes admitted when checking it).

        @given(onnx_graphs())
        def test_sound(case):
            case.check()       # assert_optimization_sound(case.model, case.feeds, allow=case.allow)
    """
    st = _st()
    unknown = set(families) - set(GRAPH_FAMILIES)
    if unknown or not families:
        raise ValueError(f"unknown graph families {sorted(unknown)}; choose from {GRAPH_FAMILIES}")

    @st.composite
    def build(draw: Callable) -> GraphCase:
        opset = draw(st.sampled_from(list(opsets)))
        fz = _GraphFuzzer(draw, st, families, opset, lossy="precision-changing" in allow)
        four_d = any(f in families for f in ("conv", "quant")) and draw(st.booleans())
        if four_d:
            shape = (draw(st.integers(1, 2)), draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(1, 5)))
        else:
            shape = draw(shapes(1, 4, 4))
        inputs = [("x", shape)]
        if draw(st.booleans()):
            inputs.append(("x2", draw(st.sampled_from([shape, draw(broadcastable_shapes(shape))]))))
        dynamic = symbolic and draw(st.integers(0, 9)) == 0
        for name, in_shape in inputs:
            value = draw(float_arrays(in_shape, np.float32, -4.0, 4.0))
            declared: list[Any] = list(in_shape)
            if dynamic and declared:
                declared[0] = f"N_{name}"
            fz.g.inputs.append((name, "FLOAT", declared))
            fz.g.feeds[name] = value
            fz.add(name, in_shape, True)
        steps = draw(st.integers(1, max_nodes))
        for _ in range(steps):
            x = fz.pool[-1] if draw(st.booleans()) else draw(st.sampled_from(fz.pool))
            made = fz.step(x)
            if made is None:  # the family did not suit this value: a plain unary op instead
                fz.add(fz.node(draw(st.sampled_from(("Relu", "Neg", "Tanh"))), [x.name]), x.shape, x.exact)
        graph_inputs = {name for name, _ in inputs}
        candidates = [v.name for v in fz.pool if v.name not in graph_inputs]
        outputs = [candidates[-1]]
        for _ in range(draw(st.integers(0, 2))):
            extra = draw(st.sampled_from(candidates))
            if extra not in outputs:
                outputs.append(extra)
        model = make_model(fz.g.nodes, fz.g.inputs, outputs, fz.g.inits, opset)
        try:
            onnx.checker.check_model(model, full_check=True)
        except Exception as exc:  # pragma: no cover - a bug of this strategy, not of eqsat
            raise AssertionError(f"onnx_graphs drew an invalid model ({exc}):\n{_graph_text(model)}") from exc
        return GraphCase(model, fz.g.feeds, tuple(allow))

    return build()


__all__ += ["GRAPH_FAMILIES", "GRAPH_MAX_ELEMENTS", "onnx_graphs"]

# The tensor family's and the MatMul merges' builders (eqsat/testing_tensor.py).
from eqsat.testing_tensor import PROPERTIES as _TENSOR_PROPERTIES  # noqa: E402

PROPERTIES.update(_TENSOR_PROPERTIES)
