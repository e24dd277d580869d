"""Layout rules: transposes merged, removed, and sunk through the ops they commute with.

    Transpose(Transpose(x, p), q)     -> Transpose(x, p o q)
    Transpose(x, identity)            -> x
    U(Transpose(x, p))                -> Transpose(U(x), p)              U unary elementwise
    B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p)         B binary elementwise
    B(Transpose(a, p), c)             -> Transpose(B(a, Transpose(c, p^-1)), p)   c constant, same rank
    B(Transpose(a, p), c)             -> Transpose(B(a, Transpose(Unsqueeze(c, [0..r-k-1]), p^-1)), p)
                                         c a graph input of lower rank k (broadcasting aligns it to the
                                         trailing axes: the Unsqueeze makes that explicit)
    Pad(Transpose(x, p), pads)        -> Transpose(Pad(x, pads o p^-1), p)
    R(Transpose(x, p), axes, 1)       -> Transpose(R(x, sorted p[axes], 1), p)          R a reduction
    R(Transpose(x, p), axes, 0)       -> Transpose(R(x, sorted p[axes], 0), q)          q: p without the
                                         positions in axes, renumbered 0..r-k-1 (a perm of the kept axes)
    R(Transpose(x, p), all axes)      -> R(x, all axes)                                 (empty axes too)
    Transpose(x, p)                   -> Reshape(x, shape(out))    p moves no data: the axes of size > 1
                                                                   keep their order (a symbol counts as
                                                                   > 1; at most one symbol, written -1)
    Reshape(Transpose(Reshape(x, [a b, ...]), p), [a, b, ...]) -> Transpose(x, [0, 1, 1 + p[1:]])   p[0] = 0:
                                         the Reshapes only merge and split x's leading two axes (static
                                         or run-time targets: matched on shape facts)
    Squeeze(Squeeze(x, a), b)         -> Squeeze(x, sorted(a + b mapped to x's axes))   (axes-less outer: Squeeze(x))
    Unsqueeze(Unsqueeze(x, a), b)     -> Unsqueeze(x, sorted(b + a mapped to the output's axes))
    Squeeze(Unsqueeze(x, a), a)       -> x,  Unsqueeze(Squeeze(x, a), a) -> x  (and any pair whose output
                                                                   has x's shape)

Sinking keeps both forms in the e-graph; transposes that meet cancel through the first two rules, and
the extractor decides which layout to keep (coremltools reduce_transposes, Glow transpose sinking).

Squeeze/Unsqueeze merges: an axes-less inner Squeeze (every dim that is 1 at run time) followed by a listed one
is declined: which of x's dims it removed is known only when x is static, and then the inner output has no 1
left for the outer to remove. An axes-less OUTER Squeeze merges always: x's listed dims are 1s too.

Reductions: axes are normalized (non-negative, sorted) at load, so p[axes] is sorted again here, with a
sorting network of min/max (egglog has no vector sort), for up to MAX_REDUCE_AXES axes. The kept-axes perm
of keepdims = 0 is built per rank: q[j] = pr[j] - #{a in axes: p[a] < pr[j]} with pr = p with the positions
in axes removed. The new reduction gets its shape (x's with the axes set to 1, or removed) and dtype facts.
A reduction over other axes sums in another order: `fp-reassoc` (exact for Max/Min, which are included).
"""

from __future__ import annotations

import itertools

from eqsat.engine.rule import Rule, fact, ones, op_pattern, rw
from eqsat.engine.terms import BINARY, UNARY

COMPOSE = '(unstable-vec-map (unstable-fn "vec-get" p) q)'  # (p o q)[i] = p[q[i]]
MAX_RANK = 6

#: Unary ops with parameters that are elementwise and layout-agnostic.
PARAM_UNARY = ("LeakyRelu", "Elu", "HardSigmoid", "Gelu", "Clip", "Cast")


def _identity(rank: int) -> str:
    return "(vec-of " + " ".join(map(str, range(rank))) + ")"


#: Reductions whose axes may be remapped through a transpose (each reduces a set of axes, order-free).
REDUCE_OPS = ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceSumSquare")
MAX_REDUCE_AXES = 2
#: keepdims = 0 builds the kept-axes perm per rank, up to this rank.
MAX_REDUCE_RANK = 5

#: Optimal sorting networks (compare-exchange pairs) for 1..4 values.
_NETWORKS = {1: [], 2: [(0, 1)], 3: [(0, 1), (0, 2), (1, 2)], 4: [(0, 1), (2, 3), (0, 2), (1, 3), (1, 2)]}


def _sorted(values: list[str]) -> list[str]:
    """Expressions of `values` in increasing order (a sorting network of min/max)."""
    out = list(values)
    for i, j in _NETWORKS[len(values)]:
        out[i], out[j] = f"(min {out[i]} {out[j]})", f"(max {out[i]} {out[j]})"
    return out


def _less(a: str, b: str) -> str:
    """1 when a < b, else 0 (i64 arithmetic)."""
    return f"(min 1 (max 0 (- {b} {a})))"


def _reduce_sink() -> tuple:
    rules = []
    for op in REDUCE_OPS:
        for k in range(1, MAX_REDUCE_AXES + 1):
            picked = [f"(vec-get p (vec-get ax {i}))" for i in range(k)]
            ax2 = _sorted(picked)
            in_range = " ".join(f"(>= (vec-get ax {i}) 0) (< (vec-get ax {i}) (vec-length p))" for i in range(k))
            base = (f"(= __root ({op} t ax kd)) (= t (Transpose x p)) (= (vec-length ax) {k}) {in_range} "
                    f"(< {k} (vec-length p)) (= sx (shape x)) (= (vec-length sx) (vec-length p)) (= dx (dtype x))")
            new_ax = f"(vec-of {' '.join(ax2)})"
            kept = "sx"
            for a in ax2:
                kept = f"(vec-set {kept} {a} 1)"
            rules.append(fact(f"{base} (= kd 1)",
                              f"(let ax2 {new_ax}) (let red ({op} x ax2 1)) (set (shape red) {kept}) "
                              "(set (dtype red) dx) (union __root (Transpose red p))"))
            removed = "sx"
            pr = "p"
            for i in reversed(range(k)):  # ax is sorted: remove from the last position
                pr = f"(vec-remove {pr} (vec-get ax {i}))"
            for i in reversed(range(k)):  # ax2 is sorted too
                removed = f"(vec-remove {removed} (vec-get ax2 {i}))"
            for r in range(k + 1, MAX_REDUCE_RANK + 1):
                q = []
                for j in range(r - k):
                    v = f"(vec-get pr {j})"
                    shift = _less("(vec-get ax2 0)", v)
                    for i in range(1, k):
                        shift = f"(+ {shift} {_less(f'(vec-get ax2 {i})', v)})"
                    q.append(f"(- {v} {shift})")
                rules.append(fact(f"{base} (= kd 0) (= (vec-length p) {r})",
                                  f"(let ax2 {new_ax}) (let pr {pr}) (let red ({op} x ax2 0)) "
                                  f"(set (shape red) {removed}) (set (dtype red) dx) "
                                  f"(union __root (Transpose red (vec-of {' '.join(q)})))"))
        # every axis reduced (listed, or the empty list with noop_with_empty_axes = 0): the layout is gone
        rules.append(fact(f"(= __root ({op} (Transpose x p) ax kd)) (= (vec-length ax) (vec-length p))",
                          f"(union __root ({op} x ax kd))"))
        rules.append(fact(f"(= __root ({op} (Transpose x p) ax kd)) (= ax (vec-empty))",
                          f"(union __root ({op} x ax kd))"))
    return tuple(rules)


def _moves_no_data(rank: int) -> str:
    """Guards: the output axes whose dims are not 1 (so = the output's shape; a symbol counts as not 1) come
    from increasing axes of x. With q_i = p[i] + 1 for such an axis and 0 for a size-1 one, every q_i is 0
    or above the largest q before it (the running max m). O(rank) atoms: egglog compiles a rule in time
    growing with its atoms, and the pairwise form cost 11 ms per rank-6 rule."""
    def not_one(i: int) -> str:  # 0 when so[i] is 1, else 1
        d = f"(vec-get so {i})"
        return f"(min 1 (* (- {d} 1) (- {d} 1)))"
    guards = [f"(= q{i} (* {not_one(i)} (+ (vec-get p {i}) 1)))" for i in range(rank)]
    for i in range(1, rank):
        guards.append(f"(>= (* q{i} (- q{i} {'q0' if i == 1 else f'm{i - 1}'})) 0)")
        if i < rank - 1:
            guards.append(f"(= m{i} (max {'q0' if i == 1 else f'm{i - 1}'} q{i}))")
    return " ".join(guards)


#: The output shape `so` with each symbol (a negative dim) as -1.
_SYMBOLS_AS_MINUS_ONE = '(unstable-vec-map (unstable-fn "max" -1) so)'


def _reshape_targets(rank: int) -> list[tuple[str, str]]:
    """Reshape targets for an output shape `so` of `rank` and their guards: `so` itself when every dim is a
    size (max(0, d) changes only symbols); `so` with its one symbol as -1 (Reshape infers it) when exactly
    one dim is a symbol (the dims mapped to -1 for a symbol and 0 for a size sum to -1)."""
    marks = f'(unstable-vec-map (unstable-fn "min" 0) {_SYMBOLS_AS_MINUS_ONE})'
    total = "(vec-get n 0)"
    for i in range(1, rank):
        total = f"(+ {total} (vec-get n {i}))"
    return [("so", '(= so (unstable-vec-map (unstable-fn "max" 0) so))'),
            (_SYMBOLS_AS_MINUS_ONE, f"(= n {marks}) (= {total} -1)")]


#: A Reshape with a static target, or with one computed at run time: the rules read shape facts only.
_RESHAPES = ("(Reshape {x} s{k} z{k})", "(ReshapeDyn {x} t{k} z{k})")


def _reshape_transpose_reshape() -> tuple:
    """Reshape(Transpose(Reshape(x, [a b, c...]), p), [a, b, ...]) -> Transpose(x, [0, 1, 1 + p[1:]]) for p[0] = 0:
    the first Reshape merges x's leading two axes (its other dims are x's), the Transpose keeps the merged axis in
    front, and the last Reshape splits it back into x's two axes (its other dims are the Transpose's)."""
    rules = []
    for rank in range(3, MAX_RANK + 1):
        tail = range(1, rank - 1)
        kept = " ".join(f"(= (vec-get sr {i}) (vec-get sx {i + 1}))" for i in tail)
        moved = " ".join(f"(= (vec-get sy {j + 1}) (vec-get sr (vec-get p {j})))" for j in tail)
        perm = "(vec-of 0 1 " + " ".join(f"(+ 1 (vec-get p {j}))" for j in tail) + ")"
        for inner, outer in itertools.product(_RESHAPES, _RESHAPES):
            rules.append(fact(
                f"(= y {outer.format(x='tp', k=2)}) (= tp (Transpose r p)) (= r {inner.format(x='x', k=1)}) "
                f"(= sx (shape x)) (= sr (shape r)) (= sy (shape y)) (= (vec-length sx) {rank}) "
                f"(= (vec-length sr) {rank - 1}) (= (vec-length sy) {rank}) (= (vec-length p) {rank - 1}) "
                f"(= (vec-get p 0) 0) {kept} (= (vec-get sy 0) (vec-get sx 0)) (= (vec-get sy 1) (vec-get sx 1)) {moved}",
                f"(union y (Transpose x {perm}))"))
    return tuple(rules)


def _le(a: str, b: str) -> str:
    """1 when a <= b, else 0 (i64 arithmetic)."""
    return f"(min 1 (max 0 (+ 1 (- {b} {a}))))"


def _axis_merge(op: str) -> tuple:
    """op(op(x, a), b) -> op(x, c) for |a| + |b| <= 4 listed axes (sorted, non-negative: normalized at load).

    Squeeze: b indexes the inner output, whose axis i is x's axis i shifted past each removed a_k <= it
    (a ascending); c = sorted(a + mapped b). Unsqueeze: a indexes the inner output, which is the outer output
    without the inserted b; its axis i is the output's axis i shifted past each b_k <= it; c = sorted(b +
    mapped a). The two sets are disjoint, so c has no repeats. Every step is a query variable (`(= v ...)`):
    egglog compiles a rule in time growing with its atoms, and nested copies of the sorting network cost
    4 ms per rule."""
    rules = []
    for na in range(1, 4):
        for nb in range(1, 5 - na):
            fixed, moved = ("a", "b") if op == "Squeeze" else ("b", "a")
            n_fixed, n_moved = (na, nb) if op == "Squeeze" else (nb, na)
            steps = []
            mapped = []
            for j in range(n_moved):
                t = f"(vec-get {moved} {j})"
                for k in range(n_fixed):
                    steps.append(f"(= m{j}_{k} (+ {t} {_le(f'(vec-get {fixed} {k})', t)}))")
                    t = f"m{j}_{k}"
                mapped.append(t)
            order, c = _sorting_steps([f"(vec-get {fixed} {k})" for k in range(n_fixed)] + mapped)
            rules.append(rw(f"({op} ({op} x a) b)", f"({op} x (vec-of {' '.join(c)}))",
                            f"(= (vec-length a) {na}) (= (vec-length b) {nb})", *steps, *order))
    return tuple(rules)


def _sorting_steps(values: list[str]) -> tuple[list[str], list[str]]:
    """Query bindings that sort `values` (a sorting network, each compare-exchange two new variables) and
    the variables holding them in increasing order."""
    names, steps = list(values), []
    for k, (i, j) in enumerate(_NETWORKS[len(values)]):
        steps.append(f"(= lo{k} (min {names[i]} {names[j]})) (= hi{k} (max {names[i]} {names[j]}))")
        names[i], names[j] = f"lo{k}", f"hi{k}"
    return steps, names


#: Broadcasting ops whose operands are often a transposed activation and a lower-rank bias or input.
BROADCAST_SINK_OPS = ("Add", "Sub", "Mul", "Div")


def _sink_broadcast() -> tuple:
    """B(Transpose(a, p), c) and B(c, Transpose(a, p)) for c of rank k < r = |p| that does not enlarge the output:
    c broadcasts as Unsqueeze(c, [0..r-k-1]) (numpy rules align trailing axes), which has rank r and goes through
    the transpose as in transpose-sink-binary-const. c is a graph input (a Transpose of the smaller operand at
    run time; the extractor decides); constants of lower rank are re-encoded at the output's rank at load and
    sink through transpose-sink-binary-const."""
    rules = []
    for op in BROADCAST_SINK_OPS:
        for first in (True, False):
            pattern = f"({op} t c)" if first else f"({op} c t)"
            inner = f"({op} a cp)" if first else f"({op} cp a)"
            rules.append(fact(
                f"(= y {pattern}) (= t (Transpose a p)) (= c (Input nm)) (= sc (shape c)) (= r (vec-length p)) "
                "(= k (vec-length sc)) (< k r) (= (shape y) (shape t)) (= ip (inv-perm p)) (= sa (shape a)) "
                "(= dc (dtype c))",
                "(let u (Unsqueeze c (vec-range (- r k)))) "
                f"(set (shape u) (vec-append {ones('(vec-range (- r k))')} sc)) (set (dtype u) dc) "
                f"(let cp (Transpose u ip)) (let b {inner}) (set (shape b) sa) (union y (Transpose b p))"))
    return tuple(rules)


def _pad_remap(rank: int) -> str:
    """pads' with pads'[j] = pads[ip[j]] and pads'[r+j] = pads[r+ip[j]]."""
    begins = [f"(vec-get pads (vec-get ip {j}))" for j in range(rank)]
    ends = [f"(vec-get pads (+ {rank} (vec-get ip {j})))" for j in range(rank)]
    return "(vec-of " + " ".join(begins + ends) + ")"


RULES = [
    Rule("transpose-merge", "layout", "exact", "glow:MergeTransposes; coreml:merge_consecutive_transposes",
         "Transpose(Transpose(x, p), q) -> Transpose(x, p o q)",
         (rw("(Transpose (Transpose x p) q)", f"(Transpose x {COMPOSE})", "(= (vec-length p) (vec-length q))"),),
         ruleset="simplify"),
    Rule("transpose-identity", "layout", "exact", "onnxoptimizer:eliminate_nop_transpose",
         "Transpose(x, p) -> x for the identity perm, or when every dim of x is 1",
         tuple(rw("(Transpose x p)", "x", f"(= p {_identity(r)})") for r in range(1, MAX_RANK + 1))
         + (rw("(Transpose x p)", "x", "(= s (shape x))", f"(= s {ones('s')})"),),
         ruleset="simplify"),
    Rule("transpose-sink-unary", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "U(Transpose(x, p)) -> Transpose(U(x), p) for unary elementwise U (Relu, Clip, Cast, Sigmoid, ...)",
         tuple(rw(op_pattern(op, "(Transpose x p)"), f"(Transpose {op_pattern(op, 'x')} p)")
               for op in sorted(UNARY) + list(PARAM_UNARY))),
    Rule("transpose-sink-binary", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p) for binary elementwise B",
         tuple(rw(f"({op} (Transpose a p) (Transpose b p))", f"(Transpose ({op} a b) p)") for op in sorted(BINARY))),
    Rule("transpose-sink-binary-const", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "B(Transpose(a, p), c) -> Transpose(B(a, Transpose(c, p^-1)), p) for a constant c of the same rank "
         "that does not enlarge the output (either operand order)",
         tuple(
             fact(f"(= y ({op} (Transpose a p) c)) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                  "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                  f"(union y (Transpose ({op} a (Transpose c ip)) p)) (set (shape ({op} a (Transpose c ip))) sa)")
             for op in sorted(BINARY)
         ) + tuple(
             fact(f"(= y ({op} c (Transpose a p))) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                  "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                  f"(union y (Transpose ({op} (Transpose c ip) a) p)) (set (shape ({op} (Transpose c ip) a)) sa)")
             for op in sorted(BINARY)
         )),
    Rule("transpose-sink-binary-broadcast", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes; "
         "onnxruntime:TransposeOptimizer (broadcast inputs)",
         "B(Transpose(a, p), c) -> Transpose(B(a, Transpose(Unsqueeze(c, leading axes), p^-1)), p) for B in Add, Sub, "
         "Mul, Div and a graph input c of lower rank that does not enlarge the output",
         _sink_broadcast()),
    Rule("transpose-sink-reduce", "layout", "fp-reassoc", "glow:SinkTranspose; coreml:reduce_transposes; "
         "onnxruntime:TransposeOptimizer (reduce)",
         "R(Transpose(x, p), axes, kd) -> Transpose(R(x, sorted p[axes], kd), p or, for kd = 0, p without the "
         "reduced positions renumbered) for a reduction R; R(x, all axes) when every axis is reduced",
         _reduce_sink()),
    Rule("transpose-to-reshape", "layout", "exact", "onnxruntime:TransposeOptimizer (transpose as reshape); "
         "coreml:transpose -> reshape",
         "Transpose(x, p) -> Reshape(x, shape(out)) when p moves no data (the axes of size > 1 keep their order)",
         tuple(rw("(Transpose x p)", f"(Reshape x {target} 0)", f"(= (vec-length p) {r})", "(= s (shape x))",
                  f"(= (vec-length s) {r})", f"(!= s {ones('s')})", "(= so (shape __root))",
                  "(vec-not-contains so 0)", _moves_no_data(r), guard)
               for r in range(2, MAX_RANK + 1) for target, guard in _reshape_targets(r))),
    Rule("reshape-transpose-reshape", "layout", "exact", "onnxruntime:ReshapeFusion (attention transposes); "
         "coreml:reduce_transposes",
         "Reshape(Transpose(Reshape(x, [a*b, c, ...]), p), [a, b, ...]) -> Transpose(x, [0, 1, 1 + p[1:]]) when "
         "p[0] = 0 and the reshapes only merge and split x's leading two axes (targets static or run-time)",
         _reshape_transpose_reshape()),
    Rule("squeeze-unsqueeze-cancel", "layout", "exact", "onnxoptimizer:eliminate_nop_squeeze_unsqueeze; "
         "tvm:SimplifyExpr (squeeze/expand_dims)",
         "Squeeze(Unsqueeze(x, a), a) -> x and Unsqueeze(Squeeze(x, a), a) -> x (a non-empty), or any such pair "
         "whose output has x's shape",
         (rw("(Squeeze (Unsqueeze x a) a)", "x"),
          rw("(Unsqueeze (Squeeze x a) a)", "x", "(> (vec-length a) 0)"),
          rw("(Squeeze (Unsqueeze x a) b)", "x", "(= (shape __root) (shape x))"),
          rw("(Unsqueeze (Squeeze x b) a)", "x", "(= (shape __root) (shape x))")),
         ruleset="simplify"),
    Rule("squeeze-merge", "layout", "exact", "onnxoptimizer:fuse_consecutive_squeezes",
         "Squeeze(Squeeze(x, a), b) -> Squeeze(x, sorted(a + b mapped to x's axes)) (up to 4 axes in all); "
         "Squeeze(Squeeze(x, a)) -> Squeeze(x) (no axes: every dim that is 1 at run time)",
         _axis_merge("Squeeze") + (rw("(Squeeze (Squeeze x a) (vec-empty))", "(Squeeze x (vec-empty))"),),
         ruleset="simplify"),
    Rule("unsqueeze-merge", "layout", "exact", "onnxoptimizer:fuse_consecutive_unsqueezes",
         "Unsqueeze(Unsqueeze(x, a), b) -> Unsqueeze(x, sorted(b + a mapped to the output's axes)) (up to 4 axes)",
         _axis_merge("Unsqueeze"), ruleset="simplify"),
    Rule("transpose-sink-pad", "layout", "exact", "glow:SinkTranspose; coreml:reduce_transposes",
         "Pad(Transpose(x, p), pads) -> Transpose(Pad(x, pads permuted by p^-1), p)",
         tuple(rw("(Pad (Transpose x p) pads v mode)", f"(Transpose (Pad x {_pad_remap(r)} v mode) p)",
                  f"(= (vec-length p) {r})", f"(= (vec-length pads) {2 * r})", "(= ip (inv-perm p))")
               for r in range(1, MAX_RANK + 1))),
]
