"""Soundness checks: every e-node of every e-class evaluated on the feeds (`assert_egraph_sound`), and
the extracted model against the original (`assert_rule_sound`, `assert_optimization_sound`)."""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.testing.models import numpy_dtype, dtype_name, random_feeds, run, to_proto
from eqsat.testing.runs import _rule_table, saturate_with_rules

if TYPE_CHECKING:  # heavy imports only where they are used
    import onnx_ir as ir

    from eqsat.engine.egraph import EGraph, ENode
    from eqsat.result import Result
    from eqsat.session import Session


# --------------------------------------------------------------------------------------------------
# soundness


def _soundness_tolerance(soundness: str, dtype: np.dtype) -> float:
    from eqsat.check.verify import tolerance_for

    return tolerance_for(np.dtype(dtype), soundness)


def _difference(
    expected: np.ndarray,
    actual: np.ndarray,
    tolerance: float | None,
    soundness: str,
    bound: np.ndarray | None = None,
    floor: float = 1e-3,
) -> tuple[bool, str]:
    """(ok, description) for two arrays: same shape and dtype; floats with NaN/Inf at the same places and
    finite values within `tolerance` (default: the soundness class's, for the dtype) times the expected
    scale (its largest finite magnitude, at least `floor`), or within `bound` element by element (a forward
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
        allowed = tol * max(scale, floor)
        how = f"max |diff| {diff:.3g} (allowed {allowed:.3g} = {tol:g} x scale {scale:.3g})"
        if diff <= allowed or bound is None:
            return diff <= allowed, how + ("" if diff <= allowed else _worst(e64, a64, finite))
        excess = np.abs(e64 - a64) - np.maximum(allowed, np.broadcast_to(bound, e64.shape))
        worst = float(np.max(excess[finite], initial=-1.0))
        return worst <= 0, f"{how}; within the normalization's forward error bound: {worst <= 0}"
    if np.array_equal(expected, actual):
        return True, "equal"
    wrong = int(np.count_nonzero(expected != actual))
    where = tuple(int(i) for i in np.argwhere(expected != actual)[0])
    return False, (
        f"{wrong} of {expected.size} {expected.dtype} values differ (integer and bool values must be "
        f"equal); first at {list(where)}: expected {expected[where]}, got {actual[where]}"
    )


def precision_floor(soundness: str, feeds: Mapping[str, Any]) -> float:
    """The smallest scale a difference is measured against. A precision-changing rule drops a rounding step
    (a float16 round trip) of an intermediate value: its error is relative to that value, which in the small
    graphs checked here is of the inputs' magnitude, not to an output that can be nothing but that rounding
    (`x - Cast16(x)` is 2**-11 |x| or 0). Other soundness classes keep the floor of 1e-3."""
    if soundness != "precision-changing":
        return 1e-3
    magnitudes = [
        float(np.max(np.abs(a[np.isfinite(a)]), initial=0.0))
        for a in (np.asarray(v) for v in feeds.values() if v is not None)
        if a.dtype.kind == "f" and a.size
    ]
    return max([1e-3, *magnitudes])


def _worst(expected: np.ndarray, actual: np.ndarray, finite: np.ndarray) -> str:
    """Where two float arrays differ most: the index, both values."""
    gap = np.where(finite, np.abs(expected - actual), -1.0)
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(gap)), gap.shape))
    return f"; worst at {list(where)}: expected {expected[where]:.6g}, got {actual[where]:.6g}"


#: Normalizations whose output is ill-conditioned on (nearly) constant rows: op -> first normalized axis.
_NORMALIZATIONS = {
    "LayerNormalization": lambda node, rank: int(node.attrs[0]) % rank,
    "InstanceNormalization": lambda node, rank: 2,
}


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
        row = (
            gamma * np.max(np.abs(x64), axis=axes, keepdims=True) / np.sqrt(np.var(x64, axis=axes, keepdims=True) + eps)
        )
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
        from eqsat.check.verify import run as run_model

        feeds = {"x": np.asarray(x), "t": np.asarray(target, dtype=np.int64)}
        graph = oh.make_graph(
            [oh.make_node("Reshape", ["x", "t"], ["y"], allowzero=allowzero)],
            "reshape",
            [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
            [oh.make_value_info("y", onnx.TypeProto())],
        )
        (out,), _ = run_model(
            oh.make_model(graph, opset_imports=[oh.make_opsetid("", max(self.opset, 14))], ir_version=10), feeds
        )
        return np.asarray(out)

    def leaf(self, node: "ENode") -> np.ndarray | None:
        if node.op == "Input":
            return np.asarray(self.feeds[node.attrs[0]])
        if node.op == "Const":
            return np.asarray(self.session.encoding.constants[node.attrs[0]])
        value, dtype, shape = node.attrs
        return np.full(tuple(shape), value, dtype=numpy_dtype(dtype))

    def typed(self, node: "ENode", args: Sequence[np.ndarray | None]) -> np.ndarray:
        from eqsat.engine.lower import onnx_parts
        from eqsat.engine.terms import OPS
        from eqsat.check.verify import CannotRun, run as run_model

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
            [oh.make_node(spec.name, inputs, ["y"], **attrs)],
            "enode",
            [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
            [oh.make_value_info("y", onnx.TypeProto())],
        )
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

        from eqsat.check.verify import CannotRun, run as run_model

        original = self.session.encoding.opaque_nodes.get(node.attrs[0])
        if original is None or any(
            a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in original.attributes.values()
        ):
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
            [proto],
            "opaque",
            [oh.make_tensor_value_info(k, oh.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
            [oh.make_value_info(n, onnx.TypeProto()) for n in names if n],
        )
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


def assert_egraph_sound(
    session: "Session",
    feeds: Mapping[str, np.ndarray],
    *,
    tolerance: float | None = None,
    soundness: str | None = None,
    context: str = "",
) -> int:
    """Evaluate every e-node of `session`'s e-graph on `feeds`; all e-nodes of a class must agree, and
    agree with the class's shape and dtype facts. Returns how many e-nodes were evaluated.

    E-nodes are evaluated in a worklist order (an e-node once every child class has a value), never
    recursively. Opaque nodes run as their original node; one that cannot run alone (a subgraph, an
    unknown domain) leaves the e-nodes that depend only on it unchecked. An e-node that no runtime can
    evaluate (a rewrite that built an ill-typed node) is a problem too.
    """
    egraph = session.egraph
    soundness = soundness or session.soundness
    floor = precision_floor(soundness, feeds)
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
            problems.append(
                f"class c{node.eclass}: {_describe(egraph, node.id)} and {_describe(egraph, first[node.eclass])}: "
                "one is an absent input, the other is not"
            )
        elif value is not None:
            ok, how = _difference(expected, value, tolerance, soundness, floor=floor)
            if not ok:
                bound = _normalization_error_bound(egraph, node.eclass, values)
                ok, how = (
                    (ok, how) if bound is None else _difference(expected, value, tolerance, soundness, bound, floor)
                )
            if not ok:
                problems.append(
                    f"class c{node.eclass}: {_describe(egraph, node.id)} != "
                    f"{_describe(egraph, first[node.eclass])}: {how}"
                )
    symbol_sizes: dict[int, tuple[int, int]] = {}  # symbol -> (size, the class it was first seen in)
    for cid, value in values.items():
        eclass = egraph.eclass(cid)
        if not isinstance(value, np.ndarray) or eclass.sort != "T":
            continue
        if eclass.shape is not None and not _shape_fact_holds(eclass.shape, value.shape, cid, symbol_sizes):
            problems.append(
                f"class c{cid} ({_describe(egraph, first[cid])}): shape fact {tuple(eclass.shape)} "
                f"but its value has shape {value.shape}" + _symbol_clash(eclass.shape, value.shape, symbol_sizes)
            )
        if eclass.dtype is not None and eclass.dtype != dtype_name(value.dtype):
            problems.append(
                f"class c{cid} ({_describe(egraph, first[cid])}): dtype fact {eclass.dtype} "
                f"but its value is {dtype_name(value.dtype)}"
            )
    if problems:
        raise AssertionError(
            f"{context}e-graph unsound ({len(problems)} problem(s)); rules fired: "
            f"{session.saturation.rules_fired}\n  " + "\n  ".join(problems[:10])
        )
    return evaluated


def _shape_fact_holds(
    fact: Sequence[int], shape: Sequence[int], cid: int, symbol_sizes: dict[int, tuple[int, int]]
) -> bool:
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
    clashes = [
        f"symbol {d} is {n} here, {symbol_sizes[d][0]} in class c{symbol_sizes[d][1]}"
        for d, n in zip(fact, shape)
        if d < 0 and d in symbol_sizes and symbol_sizes[d][0] != n
    ]
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


def assert_rule_sound(
    model: onnx.ModelProto | "ir.Model",
    rule: str,
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    tolerance: float | None = None,
    *,
    also: Sequence[str] = (),
    allow: Sequence[str] = (),
    extractor: str = "ilp",
    target: str = "cpu",
    must_fire: bool = True,
) -> "Result":
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
        raise AssertionError(
            f"rule {rule}: egglog failed during saturation: {session.saturation.error}\n{_graph_text(proto)}"
        )
    if must_fire and rule not in fired:
        raise AssertionError(f"rule {rule} did not fire (rules fired: {fired or 'none'}) on\n{_graph_text(proto)}")
    return _check_session(proto, session, feeds, tolerance, f"rule {rule}: ", target, extractor)


def _check_session(
    proto: onnx.ModelProto,
    session: "Session",
    feeds: Mapping[str, np.ndarray],
    tolerance: float | None,
    context: str,
    target: str,
    extractor: str,
) -> "Result":
    """The e-graph check, then the extracted model against `proto`, output by output."""
    assert_egraph_sound(session, feeds, tolerance=tolerance, context=context)
    result = session.extract(target, extractor=extractor, verify=False, breakdown=False)
    optimized = to_proto(result.model)
    expected, actual = run(proto, feeds), run(optimized, feeds)
    floor = precision_floor(session.soundness, feeds)
    for out, ref, got in zip(proto.graph.output, expected, actual):
        ok, how = _difference(ref, got, tolerance, session.soundness, floor=floor)
        if not ok:
            raise AssertionError(
                f"{context}output {out.name!r} of the optimized model differs from the original: "
                f"{how}\noriginal:\n{_graph_text(proto)}\noptimized:\n{_graph_text(optimized)}"
            )
    return result


def assert_optimization_sound(
    model: onnx.ModelProto | "ir.Model",
    feeds: Mapping[str, np.ndarray] | None = None,
    seed: int = 0,
    tolerance: float | None = None,
    *,
    allow: Sequence[str] = (),
    extractor: str = "ilp",
    target: str = "cpu",
) -> "Result":
    """All default rules (plus `allow`ed classes) together: the same two checks as `assert_rule_sound`,
    without requiring any particular rule to fire."""
    from eqsat.session import saturate

    proto = to_proto(model)
    feeds = dict(feeds) if feeds is not None else random_feeds(proto, seed)
    session = saturate(proto, allow=allow)
    if session.saturation.error:
        raise AssertionError(f"egglog failed during saturation: {session.saturation.error}\n{_graph_text(proto)}")
    return _check_session(proto, session, feeds, tolerance, "", target, extractor)


def assert_rule_does_not_fire(
    model: onnx.ModelProto | "ir.Model", rule: str, *, also: Sequence[str] = (), allow: Sequence[str] = ()
) -> None:
    """Saturating `model` with `rule` (and `also`, and the fact rules) never matches `rule`."""
    proto = to_proto(model)
    if rule not in _rule_table():
        raise KeyError(f"unknown rule: {rule}")
    session = saturate_with_rules(proto, [rule, *also], allow=allow)
    fired = session.saturation.rules_fired
    if rule in fired:
        raise AssertionError(
            f"rule {rule} fired ({fired[rule]} matches) where its guard should fail, on\n{_graph_text(proto)}"
        )
