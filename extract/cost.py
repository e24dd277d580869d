"""Cost models: the contract and the default roofline model, for a hardware target (eqsat.extract.target).

Contract: a `CostModel` is any callable `(egraph, node) -> float` giving the cost of one e-node (seconds,
for the built-in models) from its op, attributes and the shape/dtype facts of its class and its children.
Costs are >= 0 and not NaN; `inf` means "never choose this node". Nodes in constant-only classes cost 0
(they are folded at lowering time). A model may also offer `node_costs(egraph) -> np.ndarray` (one cost
per node id) to cost a whole e-graph at once; `node_costs()` below uses it when present.

`roofline(target)`: max(flops / peak[dtype], bytes / bandwidth) + launch per op, with
- conv: 2 * prod(out) * prod(w.shape[1:]); matmul/gemm: 2 * M * N * K; elementwise, reductions and
  normalizations: a few FLOPs per element; data movement (Transpose, Pad, Concat, Cast, ...): bytes only;
  views (Reshape, Squeeze, Unsqueeze, Flatten, Identity): no data moved, `view_fraction * launch`;
- bytes = output bytes + bytes of every tensor input (weights included), from shapes and dtype sizes;
  an unknown shape is estimated from the children (broadcast for elementwise ops) or `DEFAULT_NUMEL`;
- Input, Const, Scalar, Absent, TCons, TNil, Out and constant-only classes cost 0; Opaque costs launch +
  its input bytes / bandwidth; Concat (over a list) and Split (one N node whose outputs are `Out`s) move
  data: launch + (bytes of every list item or the input + bytes out) / bandwidth;
- an op (or compute dtype) the target does not support costs `unsupported_penalty` plus its roofline
  time on the fallback (host) hardware;
- fused patterns: a consumer whose input class holds the pattern's producer (directly or through other
  fused consumers) runs with no launch and no round trip of the producer's output: it costs the reading
  of its constant operands, e.g. a bias, plus FUSED_EPSILON ("free": a bias folded into the producer
  beats the same bias applied by an epilogue), or max(its compute time, the traffic of its other inputs
  such as a residual or a bias, FUSED_EPSILON) ("epilogue"). This is a per-node approximation: it assumes
  the producer is the node chosen in that class and that its output is not needed elsewhere. A pattern
  with `all_inputs = true` fuses only a consumer whose optional inputs are all present (ONNX Runtime's
  ReluQuantFusion reads Q's zero point), one with `dtypes` only a producer writing one of them. A node that
  shares a class with the producer, being neither it nor a consumer fused into it, pays what the consumers
  fused through the class then cost more as kernels of their own (so the choice keeps the producer);
- emulated dtypes (`[emulated]`, dtype -> the dtype its kernels run in: the cpu's FLOAT16 -> FLOAT): a compute
  op of such a dtype costs its roofline in the other dtype plus a Cast kernel for each input no such op can
  produce and for a graph output; any other reader of its output (data movement, views) pays the Cast back;
- the compute dtype (which peak applies) is that of the first non-constant input (else the first input,
  else the output); ops with no FLOPs (data movement) run in any dtype;
- layout: on a target preferring NHWC, layout-bound ONNX ops (NCHW by definition) pay
  `layout_penalty` times their activation traffic (the conversion a runtime inserts);
- QDQ node units (`[qdq] ops`): an op of that list whose every non-constant tensor input is a
  DequantizeLinear output, and whose output a QuantizeLinear reads, runs as one integer kernel (ONNX
  Runtime's QLinear*/QGemm rewrite): it is costed on the quantized tensors (their bytes, the integer peak).
  On such a target DQ and Q nodes cost FUSED_EPSILON and their consumer / producer accounts for them: a
  unit absorbs them, any other op pays their roofline as kernels of its own (so DQ -> ReduceMean -> Q
  costs three kernels where DQ -> GlobalAveragePool -> Q costs one). A DQ with no consumer (a graph
  output) and a Q of a graph input pay for themselves. A unit of an op in `[qdq] zero_point_ops` (whose
  runtime selector reads the zero points) absorbs only a DQ or Q with an explicit one; one without runs as a
  kernel of its own. On a target without the list, Q and DQ are kernels of their own and the op computes
  in float;
- blocked layout (`[blocked_layout]`, ONNX Runtime's NCHWc on x86): classes produced by its producers (and
  by its ops over blocked inputs) hold blocked activations; any other consumer pays a reorder to NCHW
  (reading and writing its input once more);
- relayout (`[relayout]`): an op of that list whose input rank is not among `ranks` (NPU pooling takes 4-D
  images) pays a transpose of its input first (a launch, reading and writing it once more);
- serial window (`[serial] ops`): kernels that give each output one thread looping over its window (GPU
  pooling with a global window) cannot run faster than window x `step` (the work-span bound), so their time
  is max(flops / peak, bytes / bandwidth, window x step) + launch;
- quantized types (`[quant]`): a QuantizeLinear/DequantizeLinear whose quantized tensor (Q's output, DQ's
  input) has a quantized type (QUANT_TYPES: 4-, 8- and 16-bit integers; int32 biases are not) outside
  `types`, or a nonzero zero point when `symmetric`, is not taken natively: `other = "unsupported"` costs it as
  an unsupported op (never absorbed by a QDQ unit), `other = "convert"` adds one conversion pass (a launch,
  reading and writing the quantized tensor). Zero points are read from Scalar/Absent leaves; a zero point held
  as a tensor (per channel) is taken as zero, one computed at lowering (a per-axis zero point shifted into the
  other 8-bit type) as nonzero. Targets without the section take every type.
- tie-break (`tie_break`, seconds per node, every target; extract/ties.py): each kernel adds tie_break x
  (1 + a quarter to a half per tensor it reads, growing with its bytes; twice for a constant computed at
  lowering): among graphs of equal cost fewer nodes win, then fewer and smaller inputs; constant classes stay free;
- measured prices (`[op_scale]`, op -> factor, 1 by default): an op's roofline time (launch excluded) times the
  factor its kernel measured against the roofline's peers (the cpu's Div against Mul: benchmarks/measure_ops.py);
Remaining ties between equal-cost nodes are broken by the extractors (lowest node id): deterministic.
"""

from __future__ import annotations

import dataclasses
import math
import weakref
from typing import Callable, Iterable, Mapping

import numpy as np

from eqsat.extract.op_traits import (
    DTYPE_BYTES,
    DEFAULT_DTYPE,
    DEFAULT_NUMEL,
    DEFAULT_KERNEL,
    VIEW_OPS,
    MOVE_OPS,
    ELEMENTWISE_FLOPS,
    REDUCE_FLOPS,
    LAYOUT_OPS,
    INDEXED_READ_OPS,
    QUANT_TYPES,
    QDQ_OPS,
    CONV_WEIGHT,
    MATMUL_RHS,
)
from eqsat.extract.target import (  # noqa: F401 - TARGET_DIR, targets, TargetError: re-exported, used from here
    TARGET_DIR,
    BlockedLayout,
    FusedPattern,
    Target,
    TargetError,
    load_target,
    targets,
    user_target_dir,
)
from eqsat.extract.ties import tie_cost
from eqsat.engine.egraph import EGraph, ENode
from eqsat.engine.terms import PLUMBING_OPS

CostModel = Callable[[EGraph, ENode], float]

# ---------------------------------------------------------------------------------------------------
# Costing a whole e-graph


def cost_lookup(egraph: EGraph, cost: CostModel) -> Callable[[int], float]:
    """Node id -> its cost under `cost`: the roofline's table of the whole graph (costed once per graph), or
    the model called on the node."""
    if isinstance(cost, Roofline):
        return cost.cost_table(egraph).__getitem__
    nodes = egraph.nodes
    return lambda nid: float(cost(egraph, nodes[nid]))


def node_costs(egraph: EGraph, cost: CostModel) -> np.ndarray:
    """Costs of all nodes (index = node id), computed once; raises ValueError on a negative or NaN cost."""
    bulk = getattr(cost, "node_costs", None)
    if bulk is not None:
        out = np.asarray(bulk(egraph), dtype=np.float64)
    else:
        out = np.fromiter((cost(egraph, n) for n in egraph.nodes), dtype=np.float64, count=len(egraph.nodes))
    bad = np.flatnonzero(np.isnan(out) | (out < 0))
    if bad.size:
        n = egraph.nodes[int(bad[0])]
        raise ValueError(
            f"cost model returned {out[bad[0]]} for node {n.id} ({n.op}) of class {n.eclass}: costs must be >= 0"
        )
    return out


# ---------------------------------------------------------------------------------------------------
# The roofline model


@dataclasses.dataclass
class _GraphFacts:
    """Per-class facts the roofline model derives once per e-graph."""

    numel: list[float]  # elements: from the shape, else estimated from the inputs (see _estimate)
    elt_bytes: list[float]  # bytes per element (dtype size, or the default's)
    dtype: list[str | None]
    fused: list[int]  # per class: bitmask of fused patterns whose producer output it can be
    dq: list[int]  # per class: a DequantizeLinear node in it (node id), else -1
    q: list[int]  # per class: a QuantizeLinear node reading it (node id), else -1
    unit: list[bool]  # per node: a QDQ node unit of the target (see _qdq_facts)
    dq_used: list[bool]  # per class: a DQ output with consumers (which absorb it or pay for it)
    q_paid: list[bool]  # per class: its producer absorbs (unit) or pays for a Q reading it
    zero_point: list[bool]  # per class: a unit of a `[qdq] zero_point_ops` op reads it or is in it
    blocked: list[bool]  # per class: holds an activation in the target's blocked layout
    emulated: list[bool]  # per class: holds a compute op that runs between inserted Casts (_emulated_classes)
    computed: list[bool]  # per class: a constant lowering computes (_computed)
    costs: dict[int, float] = dataclasses.field(default_factory=dict)  # per node id: its cost, once computed
    table: list[float] | None = None  # every node's cost by id, once the whole graph was costed

    def __post_init__(self) -> None:
        self.any_emulated = any(self.emulated)  # else no node pays a Cast back (_cast_back)
        self.nbytes = [n * b for n, b in zip(self.numel, self.elt_bytes)]  # bytes per class


#: Graphs whose facts a Roofline keeps (held weakly: a graph freed drops its facts at the next new graph).
FACTS_KEPT = 3


class Roofline:
    """The default cost model: see the module docstring. Call it on a node, or `node_costs(egraph)`."""

    def __init__(self, target: Target):
        self.target = target
        self._consumed: dict[str, list[int]] = {}  # op -> the fused patterns it is a consumer of, in order
        for i, pattern in enumerate(target.fused):
            for op in pattern.consumers:
                self._consumed.setdefault(op, []).append(i)
        self._facts: list[tuple[weakref.ref[EGraph], _GraphFacts]] = []  # the last FACTS_KEPT graphs', newest last

    def __repr__(self) -> str:
        return f"roofline({self.target.name!r})"

    def __call__(self, egraph: EGraph, node: ENode) -> float:
        facts = self._graph_facts(egraph)
        known = facts.costs.get(node.id)
        if known is None or egraph.nodes[node.id] is not node:  # a node of the graph is priced once
            known = self._cost(egraph, facts, node)
            if egraph.nodes[node.id] is node:
                facts.costs[node.id] = known
        return known

    def node_costs(self, egraph: EGraph) -> np.ndarray:
        return np.array(self.cost_table(egraph), dtype=np.float64)

    def cost_table(self, egraph: EGraph) -> list[float]:
        """Every node's cost by node id, computed once per graph (the list is shared: do not change it)."""
        facts = self._graph_facts(egraph)
        if facts.table is None:
            known, cost = facts.costs, self._cost
            table = []
            for n in egraph.nodes:
                found = known.get(n.id)
                if found is None:
                    found = known[n.id] = cost(egraph, facts, n)
                table.append(found)
            facts.table = table
        return facts.table

    # ---- per-graph facts ----
    def _graph_facts(self, egraph: EGraph) -> _GraphFacts:
        """The facts (and prices) of `egraph`, derived once while it is among the last FACTS_KEPT graphs costed:
        a run costs the e-graph, the chosen graph on its own, then the e-graph again (its summary)."""
        if self._facts and self._facts[-1][0]() is egraph:
            return self._facts[-1][1]
        for ref, kept in self._facts:
            if ref() is egraph:
                return kept
        numel = _estimate_numel(egraph)
        dtype = [c.dtype for c in egraph.classes]
        elt = [float(DTYPE_BYTES.get(d or DEFAULT_DTYPE, 4)) for d in dtype]
        facts = _GraphFacts(
            numel,
            elt,
            dtype,
            _fusable_classes(egraph, self.target.fused),
            *_qdq_facts(egraph, self.target.qdq_ops, self.target.qdq_zero_point_ops, _reads_zero_point(self.target)),
            _blocked_classes(egraph, self.target.blocked),
            _emulated_classes(egraph, self.target.emulated),
            [c.constant and _computed(egraph, c.id) for c in egraph.classes],
        )
        alive = [(ref, kept) for ref, kept in self._facts if ref() is not None]
        self._facts = alive[max(0, len(alive) - FACTS_KEPT + 1) :]
        self._facts.append((weakref.ref(egraph), facts))
        return facts

    # ---- one node ----
    def _cost(self, g: EGraph, f: _GraphFacts, n: ENode) -> float:
        """The node's cost plus its tie-break; constant-only classes and plumbing stay free."""
        if not f.any_emulated and g.classes[n.eclass].constant:
            return 0.0  # what the steps below give it: no price, no Cast back (nothing emulated), no tie-break
        ins = _tensor_inputs(g, n)
        cost = self._priced(g, f, n, ins) + self._cast_back(g, f, n, ins)
        if self.target.tie_break and n.op not in PLUMBING_OPS and not g.classes[n.eclass].constant:
            cost += self._tie(f, n, ins)
        return cost

    def _tie(self, f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        """The tie-break (extract/ties.py) over the bytes `n` reads (its tensor inputs `ins`): of an indexed
        read's table, the rows read."""
        nbytes = [f.nbytes[c] for c in ins]
        if n.op in INDEXED_READ_OPS and nbytes:
            nbytes[0] = min(nbytes[0], f.nbytes[n.eclass])
        return tie_cost(self.target.tie_break, zip(nbytes, [f.computed[c] for c in ins]))

    def _priced(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        """The node's cost; a Q/DQ in a quantized form the target does not take pays for it (`[quant]`)."""
        if n.op not in QDQ_OPS or g.classes[n.eclass].constant or not self._foreign_quant(g, f, n):
            return self._node_cost(g, f, n, ins)
        t = self.target
        if t.quant_other == "unsupported":
            return self._fallback(g, f, n, ins, self._out_numel(g, f, n, ins))
        q = n.eclass if n.op == "QuantizeLinear" else n.children[0]
        return self._node_cost(g, f, n, ins) + t.launch + 2 * self._numel(f, q) * f.elt_bytes[q] / t.bandwidth

    def _foreign_quant(self, g: EGraph, f: _GraphFacts, n: ENode) -> bool:
        """A Q/DQ whose quantized tensor has a type outside `[quant] types`, or a nonzero zero point on a
        `symmetric` target."""
        t = self.target
        if t.quant_types is None and not t.quant_symmetric:
            return False
        qtype = f.dtype[n.eclass] if n.op == "QuantizeLinear" else (f.dtype[n.children[0]] if n.children else None)
        if qtype not in QUANT_TYPES:
            return False
        if t.quant_types is not None and qtype not in t.quant_types:
            return True
        return t.quant_symmetric and _zero_point(g, n) not in (None, 0.0)

    def _node_cost(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        """The node's cost without the tie-break; `ins` are its tensor inputs (_tensor_inputs)."""
        op = n.op
        if op in PLUMBING_OPS or g.classes[n.eclass].constant:
            return 0.0
        t = self.target
        if op == "Opaque":
            return self._opaque(g, f, n)
        out_numel = self._out_numel(g, f, n, ins)
        # leaving the blocked layout: the runtime reorders each blocked input to NCHW (read + write)
        reorder = 0.0
        if t.blocked is not None and op not in t.blocked.ops:
            reorder = sum(2 * self._numel(f, c) * f.elt_bytes[c] for c in ins if f.blocked[c]) / t.bandwidth
        # a kernel that takes only some ranks (NPU pooling: 4-D images) gets its input transposed first
        if op in t.relayout_ops and ins:
            shape = g.classes[ins[0]].sizes
            if shape is not None and len(shape) not in t.relayout_ranks:
                reorder += t.launch + 2 * self._numel(f, ins[0]) * f.elt_bytes[ins[0]] / t.bandwidth
        if not t.qdq_ops:
            return self._plain(g, f, n, ins, out_numel) + reorder
        # QDQ node units: DQ and Q cost their consumer / producer, which absorbs them (an integer kernel)
        # or pays for running them as kernels of their own (any other op)
        # a unit whose selector reads zero points absorbs only a DQ or Q that has one
        implicit = op in ("DequantizeLinear", "QuantizeLinear") and len(ins) < 3  # no zero point (ins skips absent)
        if op == "DequantizeLinear" and f.dq_used[n.eclass] and not (implicit and f.zero_point[n.eclass]):
            return FUSED_EPSILON
        if op == "QuantizeLinear" and ins and f.q_paid[ins[0]] and not (implicit and f.zero_point[ins[0]]):
            return FUSED_EPSILON
        if f.unit[n.id] and t.supports(op):
            unit = t.launch * t.view_fraction if op in VIEW_OPS else self._qdq_unit(g, f, n, ins, out_numel)
            return unit + reorder
        own = self._plain(g, f, n, ins, out_numel) + reorder
        if op in ("DequantizeLinear", "QuantizeLinear"):
            return own
        paid = [f.dq[c] for c in ins if f.dq[c] >= 0] + ([f.q[n.eclass]] if f.q[n.eclass] >= 0 else [])
        return own + sum(self._plain_node(g, f, g.nodes[m]) for m in paid)

    def _plain_node(self, g: EGraph, f: _GraphFacts, n: ENode) -> float:
        ins = _tensor_inputs(g, n)
        return self._plain(g, f, n, ins, self._out_numel(g, f, n, ins))

    def _plain(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int], out_numel: float, fuse: bool = True) -> float:
        """The roofline of one node: fused epilogues (unless not `fuse`), unsupported ops, span and layout included,
        and the fusions it takes from a consumer (_lost_fusion)."""
        t, op = self.target, n.op
        if op in VIEW_OPS:
            return t.launch * t.view_fraction
        out_bytes = out_numel * self._elt_bytes(f, n, ins)
        if op in INDEXED_READ_OPS and ins:
            in_bytes = out_bytes + sum([f.nbytes[c] for c in ins[1:]])
        else:
            in_bytes = sum([f.nbytes[c] for c in ins])
        flops = _flops(g, f, n, ins, out_numel)
        dtype = self._compute_dtype(g, f, n, ins)
        peak = t.peak_for(dtype) if flops else 1.0
        if not t.supports(op) or peak is None:
            return self._fallback(g, f, n, ins, out_numel)
        fused = self._fused(g, f, n) if fuse else None
        if fused is not None:
            mode, extra, consts = fused  # inputs other than the producer's output: non-constant, constant
            extra_bytes = sum([f.nbytes[c] for c in extra])
            const_bytes = sum([f.nbytes[c] for c in consts])
            # An epilogue still reads its constant operand (a bias vector, as the producer would with the
            # bias folded in); it is nearly free, not free: among equal graphs the one with fewer ops wins.
            if mode == "free":
                return const_bytes / t.bandwidth + FUSED_EPSILON
            return max(flops / peak, (extra_bytes + const_bytes) / t.bandwidth, FUSED_EPSILON)
        runs_as = t.emulated.get(dtype) if flops and op not in MOVE_OPS else None
        casts = 0.0
        if runs_as is not None:  # a kernel in `runs_as` between the Casts the runtime inserts around it
            widen = DTYPE_BYTES[runs_as] / DTYPE_BYTES[dtype]
            in_bytes, out_bytes, peak = in_bytes * widen, out_bytes * widen, t.peak_for(runs_as) or peak
            casts = self._casts(g, f, n, ins, dtype, runs_as)
        seconds = max(flops / peak, (in_bytes + out_bytes) / t.bandwidth, self._span(f, n, ins, out_numel))
        seconds = seconds * t.op_scale.get(op, 1.0) + t.launch + casts
        if op in LAYOUT_OPS and t.layout == "NHWC":
            act_bytes = out_bytes + (self._numel(f, ins[0]) * f.elt_bytes[ins[0]] if ins else 0.0)
            seconds += t.layout_penalty * act_bytes / t.bandwidth
        return seconds + (self._lost_fusion(g, f, n) if fuse else 0.0)

    def _casts(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int], dtype: str, runs_as: str) -> float:
        """The Casts a runtime puts in front of a compute op whose dtype has no kernels (`emulated`), each a kernel
        reading and writing its tensor: one per distinct input of that dtype that no such op (nor a Cast) can
        produce (between two such ops the runtime drops the Cast pair; constants are converted at load), and one
        for its output when it is a graph output. Other readers pay for the Cast back (_cast_back)."""
        cast = [c for c in dict.fromkeys(ins) if f.dtype[c] == dtype and not g.classes[c].constant]
        cast = [c for c in cast if not f.emulated[c] and not any(g.nodes[m].op == "Cast" for m in g.classes[c].nodes)]
        cast += [n.eclass] if f.dtype[n.eclass] == dtype and n.eclass in g.roots else []
        return sum(self._cast(f, c, dtype, runs_as) for c in cast)

    def _cast(self, f: _GraphFacts, c: int, dtype: str, runs_as: str) -> float:
        t = self.target
        per_element = (DTYPE_BYTES[dtype] + DTYPE_BYTES[runs_as]) / t.bandwidth * t.op_scale.get("Cast", 1.0)
        return t.launch + self._numel(f, c) * per_element

    def _cast_back(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        """A node that reads an emulated op's output in its own dtype (data movement, a view, an op of another
        dtype; not a Cast, whose pair the runtime drops) pays the Cast the runtime inserts in front of it."""
        emulated = self.target.emulated
        if not emulated or not f.any_emulated or n.op in PLUMBING_OPS or n.op == "Cast" or _emulated_op(g, n, emulated):
            return 0.0
        reads = [c for c in dict.fromkeys(ins) if f.emulated[c] and not g.classes[c].constant]
        return sum(self._cast(f, c, f.dtype[c], emulated[f.dtype[c]]) for c in reads)  # type: ignore[index]

    def _lost_fusion(self, g: EGraph, f: _GraphFacts, n: ENode) -> float:
        """What `n` costs its consumers: a node in a class that also holds a fused pattern's producer, being
        neither that producer nor a consumer fused into it, pays what each consumer fused through the class
        then costs more as a kernel of its own (a Mul by 1 / sqrt 2 in place of the Div ONNX Runtime's Gelu
        fusion reads pays the Erf's kernel). The consumers are priced fused only when their input class
        holds the producer, whichever node is chosen there: without this charge the choice could drop the
        producer and keep the fused price."""
        mask = f.fused[n.eclass]
        if not mask:
            return 0.0
        lost = 0.0
        for i, pattern in enumerate(self.target.fused):
            if not mask >> i & 1 or n.op in pattern.producers or _fused_input(g, f.fused, i, pattern, n) is not None:
                continue
            for parent in g.parents.get(n.eclass, ()):
                k = _fused_input(g, f.fused, i, pattern, parent)
                tensors = [c for c in parent.children if g.classes[c].sort == "T"]
                if k is None or tensors[k] != n.eclass:
                    continue
                ins = _tensor_inputs(g, parent)
                out_numel = self._out_numel(g, f, parent, ins)
                own = self._plain(g, f, parent, ins, out_numel, fuse=False)
                lost += max(own - self._plain(g, f, parent, ins, out_numel), 0.0)
        return lost

    def _fallback(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int], out_numel: float) -> float:
        """An op the target cannot run: the host round trip plus its roofline on the fallback hardware."""
        t = self.target
        in_bytes = sum([f.nbytes[c] for c in ins])
        out_bytes = out_numel * self._elt_bytes(f, n, ins)
        flops = _flops(g, f, n, ins, out_numel)
        return (
            t.unsupported_penalty
            + t.launch
            + max(flops / t.fallback_peak, (in_bytes + out_bytes) / t.fallback_bandwidth)
        )

    def _span(self, f: _GraphFacts, n: ENode, ins: list[int], out_numel: float) -> float:
        """Work-span bound of a serial-window kernel: window elements (input / output) x step."""
        t = self.target
        if n.op not in t.serial_ops or not ins or out_numel <= 0:
            return 0.0
        return self._numel(f, ins[0]) / out_numel * t.serial_step

    def _qdq_unit(self, g: EGraph, f: _GraphFacts, n: ENode, ins: list[int], out_numel: float) -> float:
        """One integer kernel for DQ -> op -> Q: reads the quantized inputs, writes a quantized output."""
        t = self.target
        in_bytes, qtype = 0.0, None
        for c in ins:
            if f.dq[c] >= 0:
                q = g.nodes[f.dq[c]].children[0]  # the quantized tensor behind the DequantizeLinear
                in_bytes += self._numel(f, c) * f.elt_bytes[q]
                qtype = qtype or f.dtype[q]
            else:
                in_bytes += self._numel(f, c) * f.elt_bytes[c]
        qtype = qtype or "INT8"
        out_bytes = out_numel * DTYPE_BYTES.get(qtype, 1)
        flops = _flops(g, f, n, ins, out_numel)
        peak = (t.peak_for(qtype) or t.peak_for(DEFAULT_DTYPE) or 1.0) if flops else 1.0
        return max(flops / peak, (in_bytes + out_bytes) / t.bandwidth) + t.launch

    def _opaque(self, g: EGraph, f: _GraphFacts, n: ENode) -> float:
        t = self.target
        in_bytes = sum([f.nbytes[c] for c in _list_items(g, n.children)])
        key = str(n.attrs[0]) if n.attrs else ""
        op_type = key.split("::")[-1].split("#")[0]
        if t.supported_ops is not None and op_type not in t.supported_ops:
            return t.unsupported_penalty + t.launch + in_bytes / t.fallback_bandwidth
        return t.launch + in_bytes / t.bandwidth

    @staticmethod
    def _numel(f: _GraphFacts, cid: int) -> float:
        return f.numel[cid]

    @staticmethod
    def _elt_bytes(f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        if f.dtype[n.eclass] is None and ins:
            return f.elt_bytes[ins[0]]
        return f.elt_bytes[n.eclass]

    @staticmethod
    def _compute_dtype(g: EGraph, f: _GraphFacts, n: ENode, ins: list[int]) -> str:
        known = [c for c in ins if f.dtype[c] is not None]
        for c in known:
            if not g.classes[c].constant:
                return f.dtype[c]  # type: ignore[return-value]
        return (f.dtype[known[0]] if known else f.dtype[n.eclass]) or DEFAULT_DTYPE

    @staticmethod
    def _out_numel(g: EGraph, f: _GraphFacts, n: ENode, ins: list[int]) -> float:
        if g.classes[n.eclass].sizes is not None:
            return f.numel[n.eclass]
        return _node_numel(g, f.numel, n, ins)

    def _fused(self, g: EGraph, f: _GraphFacts, n: ENode) -> tuple[str, list[int], list[int]] | None:
        for i in self._consumed.get(n.op, ()):  # _fused_input is None for the patterns n.op does not consume
            pattern = self.target.fused[i]
            k = _fused_input(g, f.fused, i, pattern, n)
            if k is not None:
                ins = [c for c in n.children if g.classes[c].sort == "T"]  # as _fused_input indexes them
                others = [c for j, c in enumerate(ins) if j != k and not _absent(g, c)]
                return (
                    pattern.mode,
                    [c for c in others if not g.classes[c].constant],
                    [c for c in others if g.classes[c].constant],
                )
        return None


def roofline(target: Target | str) -> Roofline:
    """The roofline cost model for `target` (a Target or a target name)."""
    return Roofline(load_target(target) if isinstance(target, str) else target)


# ---------------------------------------------------------------------------------------------------
# helpers


def _tensor_inputs(g: EGraph, n: ENode) -> list[int]:
    """The tensor classes a node reads: its T children, and the items of its lists (Concat)."""
    kinds = g.input_kinds
    read = [kinds[c] for c in n.children]
    if "TL" in read:
        return _list_items(g, n.children)
    return [c for c, kind in zip(n.children, read) if kind == "T"]


def _zero_point(g: EGraph, n: ENode) -> float | None:
    """The zero point of a Q/DQ node: 0 when absent, the value of a Scalar leaf, NaN (not known to be 0) when
    lowering computes it (a per-axis zero point shifted into the other 8-bit type), else None (a tensor)."""
    if len(n.children) < 3:
        return 0.0
    if _computed(g, n.children[2]):
        return math.nan
    for m in g.classes[n.children[2]].nodes:
        leaf = g.nodes[m]
        if leaf.op == "Absent":
            return 0.0
        if leaf.op == "Scalar":
            return float(leaf.attrs[0])
    return None


def _computed(g: EGraph, cid: int) -> bool:
    """A constant-only class without a leaf (Const, Scalar, Absent): lowering evaluates it into a new initializer."""
    eclass = g.classes[cid]
    return eclass.constant and not any(g.nodes[m].op in ("Const", "Scalar", "Absent") for m in eclass.nodes)


def _absent(g: EGraph, cid: int) -> bool:
    return cid in g.absent_classes


def _list_items(g: EGraph, classes: Iterable[int]) -> list[int]:
    """Tensor classes held by the TL lists among `classes` (following the first TCons of each list class)."""
    items: list[int] = []
    for start in classes:
        cid, seen = start, set()
        while cid not in seen and g.classes[cid].sort == "TL":
            seen.add(cid)
            cons = next((g.nodes[m] for m in g.classes[cid].nodes if g.nodes[m].op == "TCons"), None)
            if cons is None or len(cons.children) != 2:
                break
            head, cid = cons.children
            if not _absent(g, head):
                items.append(head)
        if g.classes[start].sort == "T" and not _absent(g, start):
            items.append(start)
    return items


def _node_numel(g: EGraph, numel: list[float], n: ENode, ins: list[int]) -> float:
    """Estimated output elements of `n` from its inputs: broadcast for elementwise ops, else the largest."""
    if n.op in ELEMENTWISE_FLOPS:
        shapes = [g.classes[c].sizes for c in ins]
        if shapes and all(s is not None for s in shapes):
            return float(math.prod(_broadcast(shapes)))  # type: ignore[arg-type]
    return max((numel[c] for c in ins), default=float(DEFAULT_NUMEL))


def _estimate_numel(g: EGraph) -> list[float]:
    """Elements per class: from the shape fact, else from the first node whose inputs are all known or
    estimated (Kahn order over the e-graph, no recursion), else `DEFAULT_NUMEL`."""
    numel = [float(math.prod(c.sizes)) if c.sizes is not None else -1.0 for c in g.classes]
    parents: dict[int, list[int]] = {}
    pending = [0] * len(g.nodes)
    work: list[int] = []
    for n in g.nodes:
        if numel[n.eclass] >= 0:  # its class is known: never estimated, and nothing waits on it
            continue
        kids = set(n.children)
        pending[n.id] = sum(1 for c in kids if numel[c] < 0)
        for c in kids:
            parents.setdefault(c, []).append(n.id)
        if not pending[n.id]:
            work.append(n.id)
    while work:
        n = g.nodes[work.pop()]
        if numel[n.eclass] >= 0:
            continue
        ins = [c for c in n.children if not _absent(g, c)]
        numel[n.eclass] = _node_numel(g, numel, n, ins)
        for p in parents.get(n.eclass, ()):
            pending[p] -= 1
            if not pending[p]:
                work.append(p)
    return [float(DEFAULT_NUMEL) if v < 0 else v for v in numel]


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    rank = max(len(s) for s in shapes)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s, start=rank - len(s)):
            out[i] = max(out[i], d) if d != 1 else out[i]
    return tuple(out)


#: Seconds charged for an op fused into its producer (one instruction's worth: a tie-breaker).
FUSED_EPSILON = 1e-9


def _flops(g: EGraph, f: _GraphFacts, n: ENode, ins: list[int], out_numel: float) -> float:
    op = n.op
    if op in CONV_WEIGHT:
        tensors = [c for c in n.children if g.classes[c].sort == "T"]
        k = CONV_WEIGHT[op]
        w = g.classes[tensors[k]].sizes if k < len(tensors) else None
        per_out = float(math.prod(w[1:])) if w else DEFAULT_KERNEL
        if op == "ConvTranspose" and w and ins:
            return 2.0 * f.numel[ins[0]] * float(math.prod(w[1:]))
        return 2.0 * out_numel * per_out
    if op in MATMUL_RHS:
        tensors = [c for c in n.children if g.classes[c].sort == "T"]
        a = g.classes[tensors[0]].sizes if tensors else None
        out = g.classes[n.eclass].sizes
        if op == "Gemm" and a and out and len(a) == 2:
            k = float(math.prod(a)) / max(out[0], 1)
        else:
            k = float(a[-1]) if a else 64.0
        return 2.0 * out_numel * k
    if op in REDUCE_FLOPS:
        in_numel = f.numel[ins[0]] if ins else out_numel
        return REDUCE_FLOPS[op] * max(in_numel, out_numel)
    if op in MOVE_OPS:
        return 0.0
    return ELEMENTWISE_FLOPS.get(op, 1.0) * out_numel


def _fusable_classes(g: EGraph, patterns: tuple[FusedPattern, ...]) -> list[int]:
    """Per class, a bitmask of the patterns whose (possibly already fused) producer output it can hold."""
    mask = [0] * len(g.classes)
    if not patterns:
        return mask
    produced: dict[str, list[int]] = {}  # op -> the patterns it produces, in pattern order
    for i, p in enumerate(patterns):
        for op in p.producers:
            produced.setdefault(op, []).append(i)
    work: list[tuple[int, int]] = []
    for n in g.nodes:
        found = produced.get(n.op)
        if found is None or g.classes[n.eclass].constant:
            continue
        for i in found:
            p = patterns[i]
            if not mask[n.eclass] >> i & 1 and _fuses_dtype(p, g.classes[n.eclass].dtype):
                mask[n.eclass] |= 1 << i
                work.append((n.eclass, i))
    parents = g.parents
    while work:
        cid, i = work.pop()
        for n in parents.get(cid, ()):
            if not mask[n.eclass] >> i & 1 and _fused_input(g, mask, i, patterns[i], n) is not None:
                mask[n.eclass] |= 1 << i
                work.append((n.eclass, i))
    return mask


def _fuses_dtype(p: FusedPattern, dtype: str | None) -> bool:
    """The runtime fuses pattern `p` on a producer writing `dtype` (patterns without `dtypes` take any)."""
    return p.dtypes is None or (dtype or DEFAULT_DTYPE) in p.dtypes


def _live_inputs(g: EGraph, n: ENode) -> list[int]:
    """The tensor children of `n` computed at run time (not constant-only)."""
    return [c for c in n.children if g.classes[c].sort == "T" and not g.classes[c].constant]


def _reads_zero_point(target: Target) -> frozenset[str]:
    """Producers of fused patterns whose consumer is a QuantizeLinear that must have its zero point (ONNX
    Runtime's ReluQuantFusion): their Q is absorbed only with one."""
    return frozenset(op for p in target.fused if p.all_inputs and "QuantizeLinear" in p.consumers for op in p.producers)


def _qdq_facts(
    g: EGraph,
    ops: frozenset[str],
    zero_point_ops: frozenset[str] = frozenset(),
    q_zero_point: frozenset[str] = frozenset(),
) -> tuple[list[int], list[int], list[bool], list[bool], list[bool], list[bool]]:
    """QDQ facts for a target running `ops` as integer kernels: per class the DequantizeLinear node it holds
    and a QuantizeLinear node reading it (-1: none); per node whether it is a unit (an op of `ops` whose
    every non-constant tensor input holds a DQ, at least one, and whose output a Q reads); per DQ class
    whether it has consumers; per class whether a node in it (a unit, or an op that runs the Q as its own
    kernel) accounts for its Q; per class whether a unit of `zero_point_ops` reads it or is in it, or an op
    of `q_zero_point` is in it (its DQ or Q is absorbed only with an explicit zero point)."""
    dq = [-1] * len(g.classes)
    q = [-1] * len(g.classes)
    unit = [False] * len(g.nodes)
    dq_used = [False] * len(g.classes)
    q_paid = [False] * len(g.classes)
    zero_point = [False] * len(g.classes)
    if not ops:
        return dq, q, unit, dq_used, q_paid, zero_point
    for n in g.nodes:
        if g.classes[n.eclass].constant or not n.children:
            continue
        if n.op == "DequantizeLinear" and dq[n.eclass] < 0:
            dq[n.eclass] = n.id
        elif n.op == "QuantizeLinear" and q[n.children[0]] < 0:
            q[n.children[0]] = n.id
    for n in g.nodes:
        if g.classes[n.eclass].constant:
            continue
        if n.op in ops and q[n.eclass] >= 0:  # ONNX Runtime's selectors also want the Q of the output
            live = _live_inputs(g, n)
            unit[n.id] = bool(live) and all(dq[c] >= 0 for c in live)
            if unit[n.id] and n.op in zero_point_ops:
                for c in [n.eclass, *live]:
                    zero_point[c] = True
        if n.op in q_zero_point:
            zero_point[n.eclass] = True
        if n.op not in PLUMBING_OPS and n.op not in ("Opaque", "DequantizeLinear", "QuantizeLinear"):
            q_paid[n.eclass] = True
        if n.op not in PLUMBING_OPS and n.op not in ("DequantizeLinear", "QuantizeLinear"):
            for c in n.children:
                dq_used[c] = dq_used[c] or dq[c] >= 0
    return dq, q, unit, dq_used, q_paid, zero_point


def _blocked_classes(g: EGraph, layout: BlockedLayout | None) -> list[bool]:
    """Classes holding an activation in the blocked layout: the output of a producer (whose channel count
    is a multiple of the block), or of a layout op whose every non-constant tensor input is blocked."""
    blocked = [False] * len(g.classes)
    if layout is None:
        return blocked

    def eligible(n: ENode) -> bool:
        c = g.classes[n.eclass]
        return not c.constant and (c.dtype or DEFAULT_DTYPE) in layout.dtypes

    work: list[int] = []
    for n in g.nodes:
        shape = g.classes[n.eclass].sizes
        if (
            n.op in layout.producers
            and eligible(n)
            and not blocked[n.eclass]
            and shape is not None
            and len(shape) >= 3
            and shape[1] % layout.block == 0
        ):
            blocked[n.eclass] = True
            work.append(n.eclass)
    while work:
        cid = work.pop()
        for n in g.parents.get(cid, ()):
            if blocked[n.eclass] or n.op not in layout.ops or not eligible(n):
                continue
            live = _live_inputs(g, n)
            if live and all(blocked[c] for c in live):
                blocked[n.eclass] = True
                work.append(n.eclass)
    return blocked


def _emulated_op(g: EGraph, n: ENode, emulated: Mapping[str, str]) -> bool:
    """A compute op writing a dtype the target has no kernels for (it runs in another between inserted Casts)."""
    c = g.classes[n.eclass]
    return c.dtype in emulated and not c.constant and n.op not in _NOT_COMPUTE and n.op not in MOVE_OPS


#: Ops an `emulated` dtype runs as they are: plumbing, views, data movement (MOVE_OPS) and opaque ops.
_NOT_COMPUTE = PLUMBING_OPS | VIEW_OPS | {"Opaque", "Cast"}


def _emulated_classes(g: EGraph, emulated: Mapping[str, str]) -> list[bool]:
    """Per class: it holds a compute op of an `emulated` dtype (its output is in float between such ops)."""
    out = [False] * len(g.classes)
    if emulated:
        for n in g.nodes:
            out[n.eclass] = out[n.eclass] or _emulated_op(g, n, emulated)
    return out


def _fused_input(g: EGraph, mask: list[int], i: int, p: FusedPattern, n: ENode) -> int | None:
    """Index of the input through which consumer `n` fuses into a producer of pattern `i`, or None."""
    if n.op not in p.consumers or g.classes[n.eclass].constant:
        return None
    ins = [c for c in n.children if g.classes[c].sort == "T"]
    for k, c in enumerate(ins):
        if mask[c] >> i & 1:
            others = ins[:k] + ins[k + 1 :]
            if p.all_inputs and any(_absent(g, o) for o in others):
                continue
            if p.other_inputs == "any" or all(g.classes[o].constant for o in others):
                return k
    return None
