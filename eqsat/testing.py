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
    from eqsat.pipeline import Result
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
    from rewrites.registry import all_rules

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
                soundness: str) -> tuple[bool, str]:
    """(ok, description) for two arrays: same shape and dtype; floats with NaN/Inf at the same places and
    finite values within `tolerance` (default: the soundness class's, for the dtype) times the expected
    scale (its largest finite magnitude, at least 1e-3); integers and bools equal."""
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
        return diff <= allowed, f"max |diff| {diff:.3g} (allowed {allowed:.3g} = {tol:g} x scale {scale:.3g})"
    if np.array_equal(expected, actual):
        return True, "equal"
    wrong = int(np.count_nonzero(expected != actual))
    return False, f"{wrong} of {expected.size} {expected.dtype} values differ (integer and bool values must be equal)"


class _CannotEvaluate(Exception):
    pass


class _Evaluator:
    """Evaluates e-nodes one at a time on concrete inputs: single-node models run by onnxruntime, or by
    onnx.reference when onnxruntime lacks a kernel."""

    def __init__(self, session: "Session", feeds: Mapping[str, np.ndarray]) -> None:
        self.session, self.feeds = session, feeds
        self.opset = session.encoding.opset

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
                problems.append(f"class c{node.eclass}: {_describe(egraph, node.id)} != "
                                f"{_describe(egraph, first[node.eclass])}: {how}")
    for cid, value in values.items():
        eclass = egraph.eclass(cid)
        if not isinstance(value, np.ndarray) or eclass.sort != "T":
            continue
        if eclass.shape is not None and tuple(eclass.shape) != tuple(value.shape):
            problems.append(f"class c{cid} ({_describe(egraph, first[cid])}): shape fact {tuple(eclass.shape)} "
                            f"but its value has shape {value.shape}")
        if eclass.dtype is not None and eclass.dtype != dtype_name(value.dtype):
            problems.append(f"class c{cid} ({_describe(egraph, first[cid])}): dtype fact {eclass.dtype} "
                            f"but its value is {dtype_name(value.dtype)}")
    if problems:
        raise AssertionError(f"{context}e-graph unsound ({len(problems)} problem(s)); rules fired: "
                             f"{session.saturation.rules_fired}\n  " + "\n  ".join(problems[:10]))
    return evaluated


def _graph_text(model: onnx.ModelProto) -> str:
    try:
        return onnx.printer.to_text(model.graph)
    except Exception:  # pragma: no cover - the printer is best effort
        return ", ".join(n.op_type for n in model.graph.node)


def assert_rule_sound(model: onnx.ModelProto | "ir.Model", rule: str, feeds: Mapping[str, np.ndarray] | None = None,
                      seed: int = 0, tolerance: float | None = None, *, also: Sequence[str] = (),
                      allow: Sequence[str] = (), extractor: str = "ilp", target: str = "cpu") -> "Result":
    """`rule` fires on `model`, and the result computes what `model` computes.

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
    if rule not in fired:
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

    def check(self) -> "Result":
        """`assert_rule_sound` on this case."""
        return assert_rule_sound(self.model, self.rule, self.feeds, also=self.also, allow=self.allow)

    def __repr__(self) -> str:
        feeds = ", ".join(f"{k}: {v.dtype.name}{list(v.shape)} = {np.array2string(v.reshape(-1)[:8], precision=4)}"
                          for k, v in self.feeds.items())
        return (f"RuleCase(rule={self.rule!r}, also={self.also}, allow={self.allow}, opset="
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
        g = _Graph()
        x = g.input("x", draw(arrays(draw(st.sampled_from(("FLOAT", "INT32", "BOOL"))), shape)))
        g.nodes.append(_transpose_node(x, "t", range(len(shape))))
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


def _cast_chain_lossless() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        d, t1 = draw(st.sampled_from(_lossless_pairs()))
        t2 = draw(st.sampled_from([t for t in _CAST_OUT if t != t1]))
        shape = draw(shapes(0, 3, 3))
        g = _Graph()
        x = g.input("x", _cast_values(draw, st, d, t1, t2, shape))
        g.node("Cast", [x], "c1", to=_elem_type(t1))
        g.node("Cast", ["c1"], "y", to=_elem_type(t2))
        return g.case("cast-chain-lossless", ["y"], also=("cast-noop",))

    return build()


def _cast_noop() -> "SearchStrategy[RuleCase]":
    st = _st()

    @st.composite
    def build(draw: Callable) -> RuleCase:
        d, t1 = draw(st.sampled_from(_lossless_pairs()))
        shape = draw(shapes(0, 3, 3))
        g = _Graph()
        x = g.input("x", _cast_values(draw, st, d, t1, d, shape))
        g.node("Cast", [x], "c1", to=_elem_type(t1))
        g.node("Cast", ["c1"], "y", to=_elem_type(d))
        return g.case("cast-noop", ["y"], also=("cast-chain-lossless",))

    return build()


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


def _neutral_element(rule: str, op: str, value: float) -> Callable[[], "SearchStrategy[RuleCase]"]:
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
            g.node(op, ["k", x] if draw(st.booleans()) else [x, "k"], "y")
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
