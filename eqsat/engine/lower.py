"""Chosen e-nodes -> ONNX graph -> IR.

Each chosen class is emitted once (sharing preserved), in topological order, without recursion.
Constant-only classes are evaluated here (numpy for the common ops, onnx.reference for the rest) in at
least float32 and rounded once to their dtype, then stored as initializers. Opaque nodes are the
original NodeProtos with their inputs renamed, so attributes, subgraphs and domains pass through intact.
Graph inputs, outputs (names, order, types), opsets and model metadata are kept. Every emitted node
records in its metadata (`eqsat.from`) the original nodes its class stands for.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import helper, numpy_helper

from eqsat.engine.egraph import EGraph, ENode
from eqsat.engine.encode import Encoding
from eqsat.errors import FoldOverflowError, InternalError
from eqsat.metadata import PROVENANCE_KEY, RULES_KEY
from eqsat.frontend import weights
from eqsat.frontend.names import fresh_name, unique_node_names
from eqsat.engine.terms import OPS, OpSpec
from eqsat.ops import BROADCASTING, NUMPY_KERNELS, NUMPY_OWN, UNARY

_FLOAT_UPCAST = {np.dtype(np.float16): np.float32}
#: A data type attribute (Cast's `to`) is written as its code from this opset on, as its TensorProto name before.
DTYPE_CODES_SINCE = 6


class LoweringError(InternalError):
    pass


def _dim_names(graph: onnx.GraphProto) -> set[str]:
    """The symbolic dim names `graph` and its bodies use in inputs, outputs and value_info."""
    from eqsat.frontend.io import all_graphs

    values = (v for g in all_graphs(graph) for v in (*g.input, *g.output, *g.value_info))
    return {d.dim_param for v in values for d in v.type.tensor_type.shape.dim if d.dim_param}


def _body_names(graph: onnx.GraphProto) -> set[str]:
    """Names defined inside the bodies (If/Loop/Scan, at any depth) of `graph`'s nodes: a value named at the top
    level must not shadow one (ONNX names are unique in the whole model)."""
    from eqsat.frontend.io import all_graphs

    bodies = all_graphs(graph)[1:]
    return {
        *(v.name for g in bodies for v in g.input),
        *(t.name for g in bodies for t in g.initializer),
        *(o for g in bodies for n in g.node for o in n.output if o),
    }


@functools.lru_cache(maxsize=None)
def _np_dtype(name: str | None) -> np.dtype | None:
    if name is None:
        return None
    return np.dtype(ir.DataType[name].numpy())


class _Lowerer:
    def __init__(
        self,
        egraph: EGraph,
        choice: Mapping[int, int],
        enc: Encoding,
        source: onnx.ModelProto,
        hold: Callable[[str], bool] | None = None,
        fresh_dims: bool = False,
    ):
        self.g, self.choice, self.enc, self.source, self.hold = egraph, choice, enc, source, hold
        #: with `fresh_dims`, the dim names the model uses: a fresh one is never among them
        self.taken_dims: set[str] | None = _dim_names(source.graph) if fresh_dims else None
        self.dims_minted = 0
        self.opset = enc.opset
        self.nodes: list[onnx.NodeProto] = []
        self.kept_nodes: set[int] = set()  # indices in `nodes` of the input's nodes kept (opaque): names they keep
        self.initializers: list[tuple[str, np.ndarray]] = []  # made protos only in the model (one copy)
        self.value_info: list[onnx.ValueInfoProto] = []
        self._parents: dict[int, set[int]] | None = None
        self.names: dict[int, str] = {}  # class -> emitted value name ("" = absent)
        self.reserved: dict[int, str] = {}  # output class -> its graph output name
        self.used: set[str] = _body_names(source.graph)  # names that bodies define: never minted at the top
        self.consts: dict[int, tuple[np.ndarray, str]] = {}  # class -> (value in compute precision, dtype)
        self.graph_inputs = {v.name for v in source.graph.input}
        self.outputs = {v.name for v in source.graph.output}
        self.ref_names = {rid: name for name, rid in enc.refs.items()}
        self.class_refs: dict[int, list[int]] = {}
        self.unbroadcast: set[int] = set()  # constant classes written without leading 1-dims
        self.aliased: set[str] = set()  # names written by an alias Identity (a captured value, a graph output)
        self.overflowed: dict[int, str] = {}  # constant class -> its dtype, where storing it made a finite value inf
        self.absorbed: dict[int, set[str]] = {}  # written class -> original nodes it absorbed
        self.earlier = {
            n.name: set(p.value.split(","))
            for n in source.graph.node
            for p in n.metadata_props
            if p.key == PROVENANCE_KEY and p.value
        }  # history an earlier eqsat run recorded
        for rid, cid in egraph.refs.items():
            self.class_refs.setdefault(cid, []).append(rid)
        for refs in self.class_refs.values():
            refs.sort()
        #: per class, the original nodes that produced its handles (those that have any)
        self.class_producers = {
            cid: {enc.producers[r] for r in refs if r in enc.producers} for cid, refs in self.class_refs.items()
        }
        self._origins: dict[int, set[str]] | None = None  # built on first use (_nearest_origins)

    # ---- naming and provenance ----
    def fresh(self, base: str) -> str:
        return fresh_name(base, self.used)

    def preferred_name(self, cid: int) -> str:
        for rid in self.class_refs.get(cid, ()):
            name = self.ref_names.get(rid)
            if name and name not in self.used:
                return self.fresh(name)
        origins = self.origins(cid)
        return self.fresh(f"{origins[0]}_eqsat" if origins else f"eqsat_{cid}")

    def origins(self, cid: int) -> list[str]:
        """Original nodes a class stands for; a class that rewrites created inherits from the nearest classes
        that use it and stand for original nodes (breadth first over readers, iteratively). Found once per class."""
        if self._origins is None:
            self._origins = self._nearest_origins()
        return sorted(self._origins.get(cid, ()))

    def _nearest_origins(self) -> dict[int, set[str]]:
        """Per class, the original nodes of the nearest classes (fewest reader steps) that stand for some: one
        breadth-first pass from all those classes at once, down to the classes they read."""
        names = {c: set(found) for c, found in self.class_producers.items() if found}
        read: dict[int, list[int]] = {}  # class -> the classes its readers' classes read it from (the reverse)
        for child, readers in self.parents().items():
            for p in readers:
                read.setdefault(p, []).append(child)
        depth = dict.fromkeys(names, 0)
        frontier = list(names)
        while frontier:
            level = []
            for p in frontier:
                below = depth[p] + 1
                for c in read.get(p, ()):
                    d = depth.get(c)
                    if d is None:
                        depth[c] = below
                        names[c] = set(names[p])
                        level.append(c)
                    elif d == below:
                        names[c] |= names[p]
            frontier = level
        return names

    def history(self, cid: int) -> list[str]:
        """The original node names a written node stands for: its class's own origins, the nodes it
        absorbed (`_absorbed_nodes`), each expanded through the history an earlier eqsat run recorded."""
        names: set[str] = set()
        for name in {*self.origins(cid), *self.absorbed.get(cid, ())}:
            names |= self.earlier.get(name, {name})
        return sorted(names)

    def _absorbed_nodes(self, order: Sequence[int]) -> dict[int, set[str]]:
        """Per class written as a node, the original nodes whose values the output no longer computes,
        attributed to the first written classes downstream of them in the original graph (a Conv and a
        BatchNormalization folded into the class of the Relu they fed; a cancelled Transpose pair)."""
        written = {
            cid
            for cid in order
            if not self.g.eclass(cid).constant
            and self.g.node(self.choice[cid]).op not in ("Input", "Absent", "TNil", "TCons")
        }
        class_of = {name: self.g.refs.get(rid) for name, rid in self.enc.refs.items()}
        nodes = list(self.source.graph.node)
        consumers: dict[str, list[int]] = {}
        for k, n in enumerate(nodes):
            for value in set(n.input):
                consumers.setdefault(value, []).append(k)
        targets: dict[int, set[int]] = {}
        absorbed: dict[int, set[str]] = {}
        for i in reversed(range(len(nodes))):  # the source is topologically sorted: consumers come first
            targets[i] = {c for o in nodes[i].output if (c := class_of.get(o)) in written}
            if targets[i]:
                continue
            targets[i] = set().union(*(targets.get(k, set()) for o in nodes[i].output for k in consumers.get(o, ())))
            for cid in targets[i]:
                if nodes[i].name:
                    absorbed.setdefault(cid, set()).add(nodes[i].name)
        return absorbed

    def rules_of(self, cid: int) -> list[str]:
        rules = set(self.g.eclass(cid).rules)
        if not self.class_refs.get(cid):
            for parent in self.parents().get(cid, ()):
                rules |= set(self.g.eclass(parent).rules)
        return sorted(rules)

    def parents(self) -> dict[int, set[int]]:
        """Per class, the classes of the e-nodes that read it (itself excluded)."""
        if self._parents is None:
            self._parents = {c: {n.eclass for n in ns if n.eclass != c} for c, ns in self.g.parents.items()}
        return self._parents

    # ---- traversal ----
    def order(self, roots: Sequence[int]) -> list[int]:
        done: set[int] = set()
        out: list[int] = []
        for root in roots:
            stack = [(root, False)]
            while stack:
                cid, expanded = stack.pop()
                if cid in done:
                    continue
                if expanded:
                    done.add(cid)
                    out.append(cid)
                    continue
                stack.append((cid, True))
                node = self.g.node(self.choice[cid])
                stack.extend((c, False) for c in reversed(node.children) if c not in done)
        return out

    def run(self) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
        roots = [self.g.refs[r] for r in self.enc.outputs]
        out_names = [v.name for v in self.source.graph.output]
        self.used |= self.graph_inputs
        reserved = self.reserved
        for cid, name in zip(roots, out_names):  # outputs keep their names when a class can carry one
            if cid not in reserved and not self._is_input_class(cid) and not self.g.eclass(cid).constant:
                reserved[cid] = name
                self.used.add(name)
        order = self.order(roots)
        self.unbroadcast = self._unbroadcast_constants(order, roots)
        self.absorbed = self._absorbed_nodes(order)
        with np.errstate(all="ignore"):  # constants folded here: 1/0 or exp of a large one is the value (inf)
            for cid in order:
                self.emit(cid, reserved.get(cid))
        self._alias_outputs(roots, out_names)
        unique_node_names(self.nodes, self.kept_nodes)  # onnxruntime refuses two nodes of one name
        live = dict(self.live_initializers())
        self._refuse_overflowed_folds(live)
        return self.model(), live

    def _alias_outputs(self, roots: Sequence[int], out_names: Sequence[str]) -> None:
        """An Identity for each graph output its class's value is not named: once per name, as a graph may list
        one value among its outputs twice (a value is assigned once)."""
        for cid, name in zip(roots, out_names):
            if self.names[cid] != name and name not in self.aliased:  # a body's capture may have written it
                alias = helper.make_node("Identity", [self.names[cid]], [name], name=f"{name}_identity")
                self._provenance(alias, cid)
                self.nodes.append(alias)
                self.used.add(name)
                self.aliased.add(name)

    def _refuse_overflowed_folds(self, live: Mapping[str, np.ndarray]) -> None:
        """Raise FoldOverflowError when a written constant that rules made overflowed its dtype when stored
        (a scale folded into fp16 weights beyond 65504): the output would compute inf where the input does not.
        A constant of the input's own computations overflows there alike: not refused."""
        written = {self.names.get(cid): cid for cid in self.overflowed}
        culprits = {written[name]: self._rules_above(written[name]) for name in live if name in written}
        rules = sorted({rule for found in culprits.values() for rule in found})
        if rules:
            cid = next(c for c, found in culprits.items() if found)
            raise FoldOverflowError(rules, self.names[cid], self.overflowed[cid])

    def _rules_above(self, cid: int) -> set[str]:
        """The rules of the nearest classes at or above `cid` (its readers, breadth first) that rules made."""
        seen, frontier = {cid}, [cid]
        while frontier:
            rules = {rule for c in frontier for rule in self.g.eclass(c).rules}
            if rules:
                return rules
            frontier = [p for c in frontier for p in self.parents().get(c, ()) if p not in seen]
            seen.update(frontier)
        return set()

    def _unbroadcast_constants(self, order: Sequence[int], roots: Sequence[int]) -> set[int]:
        """Constant classes whose every reader is a broadcasting op with another operand of the output's
        rank: they are written without their leading 1-dims (the encoder raised them to the output's rank,
        numpy style; exporters write a bias as (N,), and onnxruntime's fusions, e.g. MatMul + bias into Gemm
        and Gelu, only match that form)."""
        ok: dict[int, bool] = {}
        for cid in roots:
            ok[cid] = False
        for cid in order:
            node = self.g.node(self.choice[cid])
            out_shape = self.g.eclass(cid).shape
            for child in set(node.children):
                if not self.g.eclass(child).constant:
                    continue
                others = [self.g.eclass(c).shape for c in node.children if c != child]
                fits = (
                    node.op in _BROADCASTING
                    and not self.g.eclass(cid).constant
                    and out_shape is not None
                    and any(s is not None and len(s) >= len(out_shape) for s in others)
                )
                ok[child] = ok.get(child, True) and fits
        return {cid for cid, fits in ok.items() if fits}

    def _is_input_class(self, cid: int) -> bool:
        return self.g.node(self.choice[cid]).op == "Input"

    # ---- emission ----
    def emit(self, cid: int, name: str | None) -> None:
        node = self.g.node(self.choice[cid])
        if node.op in ("TNil", "TCons"):
            return
        if node.op == "Input":
            self.names[cid] = node.attrs[0]
            return
        if node.op == "Absent":
            self.names[cid] = ""
            return
        if self.g.eclass(cid).constant:
            self.emit_constant(cid, node, name)
            return
        if node.op == "Opaque":
            self.emit_opaque(cid, node)
            return
        if node.op == "Split":
            self.emit_split(cid, node)
            return
        if node.op == "Out":
            (n_class,) = node.children
            self.names[cid] = self.names[n_class].split("|")[node.attrs[0]]
            return
        out = name or self.preferred_name(cid)
        if node.op == "ReshapeDyn":
            self.names[cid] = out
            self.emit_dynamic_reshape(cid, node, out)
            return
        if node.op == "Concat":
            self.names[cid] = out
            self.emit_concat(cid, node, out)
            return
        self.names[cid] = out
        self.emit_typed(cid, node, out)

    def emit_typed(self, cid: int, node: ENode, out: str) -> None:
        spec = OPS.get(node.op)
        if spec is None:
            raise LoweringError(f"no lowering for e-node {node.op}")
        if not spec.one_axis_at(self.opset, node.attrs, self.g.eclass(node.children[0]).shape):
            raise LoweringError(f"{spec.name} {node.attrs} has another meaning at opset {self.opset}: not written")
        x_dtype = self.g.eclass(node.children[0]).dtype if node.children else None
        static, attrs = onnx_parts(spec, node.attrs, self.opset, _np_dtype(x_dtype) or np.dtype(np.float32))
        inputs: dict[int, str] = {}
        for pos, array in static.items():
            if array is not None:
                name = self.fresh(f"{out}_{pos}")
                self.initializers.append((name, array))
                inputs[pos] = name
        positions = [i for i in range(len(spec.inputs) + len(static)) if i not in static]
        for pos, child in zip(positions, node.children):
            inputs[pos] = self.names[child]
        proto = helper.make_node(spec.name, _input_list(inputs), [out], name=out, **attrs)
        self._provenance(proto, cid)
        self.nodes.append(proto)
        self._typed_value_info(cid, out)

    def _typed_value_info(self, cid: int, out: str) -> None:
        """The class's shape and dtype facts on `out` (checked by the full checker at save)."""
        eclass = self.g.eclass(cid)
        if eclass.dtype is not None and eclass.shape is not None:
            dims = [d if d >= 0 else self._dim_name(d) for d in eclass.shape]
            self.value_info.append(helper.make_tensor_value_info(out, int(ir.DataType[eclass.dtype]), dims))

    def _dim_name(self, symbol: int) -> str | None:
        """A symbolic dim's name in value_info: the model's symbol, or with `fresh_dims` one no other dim has."""
        if self.taken_dims is None:
            return self.enc.symbols.declared_name(symbol)
        while True:
            self.dims_minted += 1
            name = f"eqsat_dim_{self.dims_minted}"
            if name not in self.taken_dims:
                return name

    def emit_dynamic_reshape(self, cid: int, node: ENode, out: str) -> None:
        allowzero: dict[str, Any] = {"allowzero": 1} if int(node.attrs[0]) and self.opset >= 14 else {}
        proto = helper.make_node("Reshape", [self.names[c] for c in node.children], [out], name=out, **allowzero)
        self._provenance(proto, cid)
        self.nodes.append(proto)
        self._typed_value_info(cid, out)

    def emit_concat(self, cid: int, node: ENode, out: str) -> None:
        proto = helper.make_node(
            "Concat", self.flatten_list(node.children[0]), [out], name=out, axis=int(node.attrs[0])
        )
        self._provenance(proto, cid)
        self.nodes.append(proto)
        self._typed_value_info(cid, out)

    def emit_split(self, cid: int, node: ENode) -> None:
        """One Split node; each output is named after the class of its chosen `(Out n k)` (a graph output
        keeps its name), else fresh. Sizes go in the `split` input from opset 13, an attribute before."""
        axis, sizes = int(node.attrs[0]), tuple(int(s) for s in node.attrs[1])
        outs: list[str | None] = [None] * len(sizes)
        out_classes: list[int | None] = [None] * len(sizes)
        for parent in sorted(self.parents().get(cid, ())):
            chosen = self.g.node(self.choice[parent]) if parent in self.choice else None
            if (
                chosen is not None
                and chosen.op == "Out"
                and chosen.children == (cid,)
                and 0 <= chosen.attrs[0] < len(sizes)
            ):
                k = chosen.attrs[0]
                if outs[k] is None:
                    outs[k] = self.reserved.get(parent) or self.preferred_name(parent)
                    out_classes[k] = parent
        base = next((o for o in outs if o), None) or f"eqsat_{cid}"
        names = [o or self.fresh(f"{base}_split{k}") for k, o in enumerate(outs)]
        inputs = [self.names[node.children[0]]]
        attrs: dict[str, Any] = {"axis": axis}
        if self.opset >= 13:
            split_name = self.fresh(f"{names[0]}_split")
            self.initializers.append((split_name, np.asarray(sizes, np.int64)))
            inputs.append(split_name)
        else:
            attrs["split"] = list(sizes)
        proto = helper.make_node("Split", inputs, names, name=names[0], **attrs)
        self._provenance(proto, out_classes[0] if out_classes[0] is not None else cid)
        self.nodes.append(proto)
        self.names[cid] = "|".join(names)
        for k, oc in enumerate(out_classes):
            if oc is not None:
                self._typed_value_info(oc, names[k])

    def emit_opaque(self, cid: int, node: ENode) -> None:
        kept = self.enc.opaque_nodes.get(node.attrs[0])  # the node encoding recorded under this key
        if kept is None:
            raise LoweringError(f"opaque node {node.attrs[0]} has no original")
        original = ir.serde.serialize_node(kept)
        proto = copy.deepcopy(original)
        del proto.metadata_props[:]
        self._provenance(proto, cid, also={original.name} if original.name else set())
        inputs = self.flatten_list(node.children[0])
        n_direct = len(proto.input)
        for i in range(n_direct):
            proto.input[i] = inputs[i]
        for captured, (value_name) in zip(self._captured_names(original, n_direct, inputs), inputs[n_direct:]):
            if captured != value_name and captured not in self.aliased:  # bodies read outer values by name:
                alias = helper.make_node("Identity", [value_name], [captured])  # alias them back, once a name
                alias.metadata_props.extend(proto.metadata_props)
                self.nodes.append(alias)
                self.used.add(captured)
                self.aliased.add(captured)
        for out in proto.output:
            if out:
                self.used.add(out)
        self.names[cid] = "|".join(proto.output)
        self.kept_nodes.add(len(self.nodes))
        self.nodes.append(proto)

    def _captured_names(self, original: onnx.NodeProto, n_direct: int, inputs: list[str]) -> list[str]:
        """The outer names a node's subgraphs read, in the order encode appended them as inputs."""
        return [n for n in sorted(self._outer_names(original)) if n in self.enc.refs][: len(inputs) - n_direct]

    def _outer_names(self, original: onnx.NodeProto) -> set[str]:
        names: set[str] = set()
        graphs = [a.g for a in original.attribute if a.type == onnx.AttributeProto.GRAPH]
        graphs += [g for a in original.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]
        while graphs:
            graph = graphs.pop()
            local = {v.name for v in graph.input} | {t.name for t in graph.initializer}
            local |= {o for n in graph.node for o in n.output}
            for n in graph.node:
                names |= {i for i in n.input if i and i not in local}
                graphs += [a.g for a in n.attribute if a.type == onnx.AttributeProto.GRAPH]
                graphs += [g for a in n.attribute if a.type == onnx.AttributeProto.GRAPHS for g in a.graphs]
        return names

    def flatten_list(self, list_class: int) -> list[str]:
        return [self.names[c] for c in self.list_classes(list_class)]

    def list_classes(self, list_class: int) -> list[int]:
        heads: list[int] = []
        cid = list_class
        while True:
            node = self.g.node(self.choice[cid])
            if node.op == "TNil":
                return heads
            head, cid = node.children
            heads.append(head)

    def _provenance(self, proto: onnx.NodeProto, cid: int, also: frozenset[str] | set[str] = frozenset()) -> None:
        """The node's metadata: the original nodes it stands for (its class's history, the classes of its
        projections for a multi-output node, and `also`) and the rules behind it."""
        names = set(self.history(cid)) | {e for name in also for e in self.earlier.get(name, {name})}
        for out in self.parents().get(cid, ()):  # an opaque node's outputs are the (Out n k) classes reading it
            if out in self.choice and self.g.node(self.choice[out]).op == "Out":
                names |= set(self.history(out))
        for key, value in ((PROVENANCE_KEY, ",".join(sorted(names))), (RULES_KEY, ",".join(self.rules_of(cid)))):
            if value:
                entry = proto.metadata_props.add()
                entry.key, entry.value = key, value

    # ---- constants ----
    def emit_constant(self, cid: int, node: ENode, name: str | None) -> None:
        value, dtype = self.evaluate(cid, node)
        self.consts[cid] = (value, dtype)
        out = name
        if out is None and node.op == "Const":
            base = self.enc.constant_names.get(node.attrs[0])
            out = self.fresh(base) if base else None
        out = out or self.preferred_name(cid)
        self.names[cid] = out
        final = np.asarray(value.astype(_np_dtype(dtype), copy=False) if dtype is not None else value)
        narrowed = final.dtype.kind == "f" and final.dtype.itemsize < value.dtype.itemsize
        if narrowed and node.op != "Const" and _overflowed(value, final):  # a loaded weight was in its dtype
            self.overflowed[cid] = str(dtype)
        if cid in self.unbroadcast:
            lead = next((k for k, d in enumerate(final.shape) if d != 1), final.ndim)
            final = final.reshape(final.shape[lead:])
        self.initializers.append((out, final))

    def evaluate(self, cid: int, node: ENode) -> tuple[np.ndarray, str]:
        if node.op == "Const":
            array = self.enc.constants[node.attrs[0]]
            dtype = self.g.eclass(cid).dtype or ir.DataType.from_numpy(array.dtype).name
            return _compute_precision(array), dtype
        if node.op == "Scalar":
            value, dtype, shape = node.attrs
            return _compute_precision(np.full(shape, value, dtype=_np_dtype(dtype))), dtype
        if node.op == "Concat":
            items = self.list_classes(node.children[0])
            dtype = self.g.eclass(cid).dtype or self.consts[items[0]][1]
            return np.concatenate([self.consts[c][0] for c in items], axis=int(node.attrs[0])), dtype
        spec = OPS.get(node.op)
        if spec is None:
            raise LoweringError(f"cannot evaluate constant e-node {node.op}")
        args = [self.consts[c][0] if self.names.get(c) != "" else None for c in node.children]
        dtypes = [self.consts[c][1] for c in node.children if c in self.consts]
        params = dict(zip((p.name for p in spec.params), node.attrs))
        value = _evaluate(spec, args, params, self.opset)  # under run()'s errstate: an inf is the value, not news
        dtype = params["to"] if node.op == "Cast" else (self.g.eclass(cid).dtype or (dtypes[0] if dtypes else "FLOAT"))
        if node.op == "Cast" and np.issubdtype(_np_dtype(dtype), np.integer):
            value = value.astype(_np_dtype(dtype))
        return _compute_precision(value), dtype

    def live_initializers(self) -> list[tuple[str, np.ndarray]]:
        """The initializers something reads: a constant class is emitted before the classes computed from
        it, and only the folded result is read when a whole constant sub-term was evaluated here."""
        from eqsat.frontend.io import outer_values

        used = set(self.outputs)
        for n in self.nodes:
            used.update(n.input)
            if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
                used |= outer_values(n)  # subgraphs read outer values by name
        return [(name, array) for name, array in self.initializers if name in used]

    def model(self) -> onnx.ModelProto:
        src = self.source
        graph = helper.make_graph(
            self.nodes,
            src.graph.name,
            list(src.graph.input),
            list(src.graph.output),
            doc_string=src.graph.doc_string or None,
            value_info=[v for v in self.value_info if v.name not in self.outputs],
        )
        model = helper.make_model(graph, opset_imports=list(src.opset_import), ir_version=src.ir_version)
        hold = self.hold or (lambda name: False)
        for name, array in self.live_initializers():  # into the model itself: a weight is copied once, or held
            held = weights.holdable(array) and hold(name)
            model.graph.initializer.append(
                weights.placeholder(name, array) if held else numpy_helper.from_array(array, name)
            )
        for field in ("producer_name", "producer_version", "domain", "model_version", "doc_string"):
            setattr(model, field, getattr(src, field))
        model.metadata_props.extend(src.metadata_props)
        model.graph.metadata_props.extend(src.graph.metadata_props)
        model.graph.quantization_annotation.extend(_annotations_kept(src.graph, model.graph))
        model.functions.extend(src.functions)
        return model


def _annotations_kept(source: onnx.GraphProto, graph: onnx.GraphProto) -> list[onnx.TensorAnnotation]:
    """The source's quantization annotations whose tensor and parameter tensors (scale, zero point) are all still
    values of `graph`."""
    if not source.quantization_annotation:
        return []
    names = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    names |= {out for node in graph.node for out in node.output}
    return [
        a
        for a in source.quantization_annotation
        if a.tensor_name in names and all(p.value in names for p in a.quant_parameter_tensor_names)
    ]


def _overflowed(computed: np.ndarray, stored: np.ndarray) -> bool:
    """Whether a value finite as computed became infinite when stored in a narrower float dtype."""
    return bool(np.any(np.isfinite(computed) & ~np.isfinite(stored)))


#: Ops whose inputs broadcast numpy style (PRelu's slope one way): leading 1-dims of an operand are free.
_BROADCASTING = BROADCASTING & OPS.keys()


def _compute_precision(array: np.ndarray) -> np.ndarray:
    """Constants are computed in at least float32 and rounded once when stored."""
    up = _FLOAT_UPCAST.get(array.dtype)
    return array.astype(up) if up is not None else np.asarray(array)


#: numpy's functions for the ops the op table names one for (Neg: np.negative, Add: np.add, ...).
_NUMPY_UNARY: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    op: getattr(np, name) for op, name in NUMPY_KERNELS.items() if op in UNARY
}
_NUMPY_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    op: getattr(np, name) for op, name in NUMPY_KERNELS.items() if op not in UNARY
}  # Div apart ("own"): integer division truncates


def _evaluate(spec: OpSpec, args: list[np.ndarray | None], params: dict[str, Any], opset: int) -> np.ndarray:
    op = spec.name
    if op not in _NUMPY_OPS:
        return _evaluate_reference(spec, args, params, opset)
    x = _present(args[0], op)
    if op == "Transpose":
        return np.transpose(x, params["perm"])
    if op == "Reshape":
        shape = [d if d != 0 or params.get("allowzero") else x.shape[i] for i, d in enumerate(params["shape"])]
        return np.reshape(x, shape)
    if op == "Cast":
        to = _np_dtype(params["to"])
        return x.astype(to)  # explicit casts round (fp16 included)
    if op in _NUMPY_UNARY:
        return _NUMPY_UNARY[op](x)
    if op == "Unsqueeze":
        for axis in sorted(params["axes"]):
            x = np.expand_dims(x, axis)
        return x
    y = _present(args[1], op)
    if op == "Div":
        if np.issubdtype(x.dtype, np.integer):
            return np.trunc(np.divide(x, y)).astype(x.dtype)
        return np.divide(x, y)
    return _NUMPY_BINARY[op](x, y)


#: The ops `_evaluate` computes with numpy; onnx.reference evaluates the others.
_NUMPY_OPS = NUMPY_OWN | _NUMPY_UNARY.keys() | _NUMPY_BINARY.keys()


def _present(array: np.ndarray | None, op: str) -> np.ndarray:
    if array is None:
        raise LoweringError(f"{op}: a constant input is absent")
    return array


def _input_list(inputs: Mapping[int, str]) -> list[str]:
    names = [inputs.get(i, "") for i in range(max(inputs) + 1)] if inputs else []
    while names and names[-1] == "":
        names.pop()
    return names


def onnx_parts(
    spec: OpSpec, values: Sequence[Any], opset: int, float_dtype: np.dtype
) -> tuple[dict[int, np.ndarray | None], dict[str, Any]]:
    """A typed node's static parameters at `opset`: constant inputs (position -> array, None when
    absent) and attributes (defaults left out)."""
    static: dict[int, np.ndarray | None] = {}
    attrs: dict[str, Any] = {}
    for p, value in zip(spec.params, values):
        if p.input is not None and opset >= p.since:
            if (p.default is not None and value == p.default) or (p.kind == "ints" and value == () and p.default == ()):
                static[p.input] = None
            else:
                static[p.input] = np.asarray(value, dtype=np.int64 if p.kind == "ints" else float_dtype)
        elif p.input is None and opset < p.since:
            if value != p.default:
                raise LoweringError(f"{spec.name}.{p.name}={value!r} needs opset {p.since} (model has {opset})")
        elif p.kind == "dtype":
            attrs[p.name] = value if opset < DTYPE_CODES_SINCE else int(ir.DataType[value])
        elif not (value == p.default or (p.kind == "ints" and value == ())):
            attrs[p.name] = list(value) if p.kind == "ints" else value
    return static, attrs


def _evaluate_reference(spec: OpSpec, args: list[np.ndarray | None], params: dict[str, Any], opset: int) -> np.ndarray:
    from onnx.reference import ReferenceEvaluator

    float_dtype = next((a.dtype for a in args if a is not None and a.dtype.kind == "f"), np.dtype(np.float32))
    static, attrs = onnx_parts(spec, list(params.values()), opset, float_dtype)
    feeds: dict[str, np.ndarray] = {}
    inputs: dict[int, str] = {}
    positions = [i for i in range(len(spec.inputs) + len(static)) if i not in static]
    for pos, array in list(zip(positions, args)) + list(static.items()):
        if array is not None:
            inputs[pos] = f"i{pos}"
            feeds[f"i{pos}"] = array
    node = helper.make_node(spec.name, _input_list(inputs), ["y"], **attrs)
    graph = helper.make_graph(
        [node],
        "fold",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_value_info("y", onnx.TypeProto())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    with np.errstate(all="ignore"):  # an overflow (exp of a large constant) is the value, not news for stderr
        (out,) = ReferenceEvaluator(model).run(None, feeds)
    return np.asarray(out)


def lower(
    egraph: EGraph,
    choice: Mapping[int, int],
    enc: Encoding,
    source: onnx.ModelProto,
    hold: Callable[[str], bool] | None = None,
    fresh_dims: bool = False,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The graph the choice describes, as a model shaped like `source` (the normalized input), and its
    initializers' arrays by name (what verification feeds onnxruntime instead of copying them back out).
    A large float weight whose name `hold` accepts is written as a placeholder, its data left in the array
    (eqsat.frontend.weights: checked, fed and written from the array; `weights.fill` puts it in).
    With `fresh_dims` (the target's value_info_dims "fresh"), each dim value_info knows only symbolically gets a
    name of its own; the graph's inputs and outputs keep theirs."""
    return _Lowerer(egraph, choice, enc, source, hold, fresh_dims).run()
