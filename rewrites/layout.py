"""Layout rules: transposes merged, removed, and sunk through the ops they commute with.

    Transpose(Transpose(x, p), q)     -> Transpose(x, p o q)
    Transpose(x, identity)            -> x
    U(Transpose(x, p))                -> Transpose(U(x), p)              U unary elementwise
    B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p)         B binary elementwise
    B(Transpose(a, p), c)             -> Transpose(B(a, Transpose(c, p^-1)), p)   c constant, same rank
    B(Transpose(a, p), c)             -> Transpose(B(a, Transpose(Unsqueeze(c, [0..r-k-1]), p^-1)), p)
                                         c a graph input of lower rank k (broadcasting aligns it to the
                                         trailing axes: the Unsqueeze makes that explicit)
    Transpose(B(Transpose(a, p), y), p^-1) -> B(a, Transpose(y, p^-1))  y of the same rank, any value (either order)
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
    U(Reshape(x, s))                  -> Reshape(U(x), s)                U unary elementwise (Cast: cast-reshape)
    B(Reshape(y, s), b)               -> Reshape(B(y, Reshape(b, [-1])), s)   B in Add, Sub, Mul, Div (either order),
                                         b [1, .., 1, n] of rank <= the output's, y's last dim the output's
    Squeeze(Squeeze(x, a), b)         -> Squeeze(x, sorted(a + b mapped to x's axes))   (axes-less outer: Squeeze(x))
    Unsqueeze(Unsqueeze(x, a), b)     -> Unsqueeze(x, sorted(b + a mapped to the output's axes))
    Squeeze(Unsqueeze(x, a), a)       -> x,  Unsqueeze(Squeeze(x, a), a) -> x  (and any pair whose output
                                                                   has x's shape)

Sinking keeps both forms in the e-graph; transposes that meet cancel through the first two rules, and
the extractor decides which layout to keep (coremltools reduce_transposes, Glow transpose sinking).

Squeeze/Unsqueeze merges: an axes-less inner Squeeze (every dim that is 1 at run time) followed by a listed one
is declined: which of x's dims it removed is known only when x is static, and then the inner output has no 1
left for the outer to remove. An axes-less OUTER Squeeze merges always: x's listed dims are 1s too.

Reductions: axes are normalized (non-negative, sorted) at load, so p[axes] is sorted again here (`merged`, a
function of lists: any number of axes, any rank). The kept-axes perm of keepdims = 0 maps pr = p with the
positions in axes removed through m, the place of each kept axis of x among them (`index-map`). The new
reduction gets its shape (x's with the axes set to 1, or removed) and dtype facts.
A reduction over other axes sums in another order: `fp-reassoc` (exact for Max/Min, which are included).
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, fact, need, ones, rw

COMPOSE = '(unstable-vec-map (unstable-fn "vec-get" p) q)'  # (p o q)[i] = p[q[i]]

#: R(Transpose(x, p), ax, kd) with 0 < |ax| < |p| = rank of x (ax sorted, non-negative: normalized at load), R a
#: reduction whose axes may be remapped through a transpose (`axes-reduce`: each reduces a set of axes, order-free).
_SINK_GUARD = (
    "(= __root (Reduce op (Transpose x p) ax kd)) (axes-reduce op) (= n (vec-length ax)) (> n 0) (= r (vec-length p)) "
    "(< n r) (>= (vec-get ax 0) 0) (< (vec-get ax (- n 1)) r) (= (vec-length (shape x)) r)"
)
#: ... what the site asks the list functions for, once: sorted p[ax] and p without the positions in ax
_SINK_NEEDS = '(need-merged (unstable-vec-map (unstable-fn "vec-get" p) ax) (vec-empty)) (need-drop-at p ax)'
#: ... the site (computed once, in analysis: transpose-sink-reduce-site) and what the rewrites read
_SINK = (
    "(= __root (Reduce op (Transpose x p) ax kd)) (reduce-sink __root op x p ax) (= r (vec-length p)) "
    "(= sx (shape x)) (= dx (dtype x))"
)
#: ... the reduced axes of x, sorted: ax2 = sorted p[ax]
_SINK_AXES = '(= ax2 (merged (unstable-vec-map (unstable-fn "vec-get" p) ax) (vec-empty)))'
#: ... keepdims = 0: the kept axes of x (sorted), their places m (m[kept[i]] = i), p without ax
_SINK_KEPT = "(= kept (drop-at (vec-range r) ax2)) (= m (index-map kept)) (= pr (drop-at p ax))"


#: R(Transpose(x, p), ax, kd) -> Transpose(R(x, ax2, kd), q): ax2 = sorted p[ax]; q = p for kd = 1, and for kd = 0 the
#: perm of the kept axes: p without the positions in ax, each renumbered to its place among x's kept axes (m). The
#: new reduction's shape: x's with ax2 set to 1 (kd = 1) or removed (kd = 0).
_REDUCE_SINK = (
    # the first values (ax2's and p without ax) are asked for by the site row (transpose-sink-reduce-site)
    need(f"{_SINK} {_SINK_AXES}", "(need-ones-at sx ax2) (need-drop-at sx ax2) (need-drop-at (vec-range r) ax2)"),
    need(f"{_SINK} {_SINK_AXES} (= kept (drop-at (vec-range r) ax2))", "(need-index-map kept)"),
    fact(
        f"{_SINK} (= kd 1) {_SINK_AXES} (= so (ones-at sx ax2))",
        "(let red (Reduce op x ax2 1)) (set (shape red) so) (set (dtype red) dx) (union __root (Transpose red p))",
    ),
    fact(
        f"{_SINK} (= kd 0) {_SINK_AXES} (= so (drop-at sx ax2)) {_SINK_KEPT}",
        "(let red (Reduce op x ax2 0)) (set (shape red) so) (set (dtype red) dx) "
        '(union __root (Transpose red (unstable-vec-map (unstable-fn "vec-get" m) pr)))',
    ),
    # every axis reduced (listed, or the empty list with noop_with_empty_axes = 0): the layout is gone
    fact(
        "(= __root (Reduce op (Transpose x p) ax kd)) (axes-reduce op) (= n (vec-length ax)) "
        "(= 0 (* n (- n (vec-length p))))",
        "(union __root (Reduce op x ax kd))",
    ),
)


#: Transpose(x, p) whose perm moves no data: the output axes whose dims are not 1 (a symbol counts as not 1) come from
#: increasing axes of x (`data-order`, a function of lists: any rank), the output has no 0 dim, and x is not all 1s
#: (transpose-identity's case). `so` is the output's shape.
_NO_DATA_MOVED = (
    "(= __root (Transpose x p)) (> (vec-length p) 1) (= s (shape x)) (= (vec-length s) (vec-length p)) "
    f"(!= s {ones('s')}) (= so (shape __root)) (vec-not-contains so 0)"
)
#: The output shape `so` with each symbol (a negative dim) as -1 (a static dim >= 1 is unchanged).
_SYMBOLS_AS_MINUS_ONE = '(unstable-vec-map (unstable-fn "max" -1) so)'


#: A Reshape with a static target, or with one computed at run time: the rules read shape facts only.
RESHAPES = ("(Reshape {x} s{k} z{k})", "(ReshapeDyn {x} t{k} z{k})")


#: Reshape(Transpose(Reshape(x, [a b, c...]), p), [a, b, ...]) with p[0] = 0 (x of rank r >= 3): the first Reshape
#: merges x's leading two axes (its other dims are x's: sr[1:] = sx[2:]), the Transpose keeps the merged axis in
#: front, and the last Reshape splits it back into x's two axes (its other dims are the Transpose's: sy[2:] =
#: sr[p[1:]]).
_RTR = (
    "(reshape-of y tp) (= tp (Transpose r p)) (reshape-of r x) (= sx (shape x)) (= sr (shape r)) "
    "(= n (vec-length sx)) (>= n 3) (= (vec-length sr) (- n 1)) (= (vec-length p) (- n 1)) (= (vec-get p 0) 0) "
    "(= (vec-remove sr 0) (vec-remove (vec-remove sx 0) 0)) "
    '(= (shape y) (vec-append (vec-of (vec-get sx 0) (vec-get sx 1)) (unstable-vec-map (unstable-fn "vec-get" sr) '
    "(vec-remove p 0))))"
)
#: The Transpose of x: [0, 1, 1 + p[1:]]
_RTR_PERM = '(vec-append (vec-of 0 1) (unstable-vec-map (unstable-fn "+" 1) (vec-remove p 0)))'


#: Squeeze(Squeeze(x, a), b): b indexes the inner output, whose axis i is x's axis k[i], k = x's axes without a
#: (drop-at(range(l), a) for any l long enough); the merged axes are a and those, in increasing order.
_SQUEEZES = (
    "(= __root (Squeeze (Squeeze x a) b)) (= na (vec-length a)) (> na 0) (= nb (vec-length b)) (> nb 0) "
    "(= l (+ (+ (vec-get a (- na 1)) (vec-get b (- nb 1))) (+ na 1)))"
)
_SQUEEZE_KEPT = "(= k (drop-at (vec-range l) a)) (< (vec-get b (- nb 1)) (vec-length k))"
#: Unsqueeze(Unsqueeze(x, a), b): a indexes the inner output, whose axis i is the output's axis k[i], k = the
#: output's axes without b; the merged axes are b and those.
_UNSQUEEZES = (
    "(= __root (Unsqueeze (Unsqueeze x a) b)) (= na (vec-length a)) (> na 0) (= nb (vec-length b)) "
    "(> nb 0) (= l (+ (+ (vec-get a (- na 1)) (vec-get b (- nb 1))) (+ nb 1)))"
)
_UNSQUEEZE_KEPT = "(= k (drop-at (vec-range l) b)) (< (vec-get a (- na 1)) (vec-length k))"
_MAPPED = '(unstable-vec-map (unstable-fn "vec-get" k) {})'


#: B(Transpose(a, p), c) and B(c, Transpose(a, p)) for B in Add, Sub, Mul, Div (`arith`: broadcasting ops whose
#: operands are often a transposed activation and a lower-rank bias or input) and c of rank k < r = |p| that does not
#: enlarge the output: c broadcasts as Unsqueeze(c, [0..r-k-1]) (numpy rules align trailing axes), which has rank r
#: and goes through the transpose as in transpose-sink-binary-const. c is a graph input (a Transpose of the smaller
#: operand at run time; the extractor decides); constants of lower rank are re-encoded at the output's rank at load
#: and sink through transpose-sink-binary-const. `{args}`: the operands, `{new}`: the new B's.
_SINK_BROADCAST = (
    "(bcast-sink y op t c d {side}) (= t (Transpose a p)) (= sc (shape c)) (= ip (inv-perm p)) (= sa (shape a)) "
    "(= dc (dtype c))",
    "(let u (Unsqueeze c (vec-range d))) "
    f"(set (shape u) (vec-append {ones('(vec-range d)')} sc)) (set (dtype u) dc) "
    "(let cp (Transpose u ip)) (let b (Binary op {new})) (set (shape b) sa) (union y (Transpose b p))",
)
#: ... the site (transpose-sink-binary-broadcast-site, in analysis): y = B(t, c) (side 0) or B(c, t) (side 1), d the
#: ranks c lacks
_BROADCAST_SITE = (
    "(= y (Binary op {args})) (arith op) (= t (Transpose a p)) (= c (Input nm)) (= r (vec-length p)) "
    "(= k (vec-length (shape c))) (< k r) (= (shape y) (shape t))",
    "(bcast-sink y op t c (- r k) {side})",
)


#: pads' with pads'[j] = pads[ip[j]] and pads'[r + j] = pads[r + ip[j]] (begins, then ends, in x's axis order)
_PADS_REMAPPED = (
    '(unstable-vec-map (unstable-fn "vec-get" pads) (vec-append ip (unstable-vec-map (unstable-fn "+" r) ip)))'
)


#: B(Reshape(y, s), b) for B in Add, Sub, Mul, Div (`arith`) with b varying along the last axis only (shape
#: [1, .., 1, n] of rank k <= the output's, n the last dim or 1) and a Reshape that keeps the last dim (y's last dim
#: is the output's: a symbol equal to itself).
#: Element i of Reshape(y) is element i of y, and its last-axis index is i mod d in both (d the shared last dim): b
#: adds (multiplies, ...) the same value to it either way. `r` is the Reshape, {args} the operands.
#: The guard is a site computed once in analysis (reshape-sink-bias-site: reshape-bias(root, B, r, y, b, side), side 0
#: for B(r, b), 1 for B(b, r)); the rewrite reads it.
_RESHAPE_BIAS = (
    "(reshape-of r y) (= __root (Binary op {args})) (arith op) (= so (shape r)) (= so (shape __root)) "
    "(= n (vec-length so)) (= sy (shape y)) (= ny (vec-length sy)) (> ny 0) (= (vec-get sy (- ny 1)) "
    "(vec-get so (- n 1))) (= sb (shape b)) (= k (vec-length sb)) (> k 0) (<= k n) "
    "(= sb (vec-set {ones} (- k 1) (vec-get sb (- k 1))))"
)
_RESHAPE_BIAS_SITE = "(reshape-bias __root op r y b {side}) (= sb (shape b)) (= k (vec-length sb)) (= sy (shape y)) "
#: ... -> Reshape(B(y, Reshape(b, [-1])), s): b as a vector along y's last axis (w's dtype: the analysis's).
_RESHAPE_BIAS_SUNK = (
    "(let bv (Reshape b (vec-of -1) 0)) (set (shape bv) (vec-of (vec-get sb (- k 1)))) (set (dtype bv) db) "
    "(let w (Binary op {args})) (set (shape w) sy) (union __root {reshape})"
)


def _reshape_sink_bias() -> tuple:
    """B(Reshape(y, s), b) and B(b, Reshape(y, s)), static or run-time targets."""
    return tuple(
        fact(
            _RESHAPE_BIAS_SITE.format(side=side) + f"(= r {reshape.format(x='y', k=1)}) (= db (dtype b))",
            _RESHAPE_BIAS_SUNK.format(args=rhs, reshape=reshape.format(x="w", k=1)),
        )
        for reshape in RESHAPES
        for side, rhs in enumerate(("y bv", "bv y"))
    )


#: reshape-sink-bias's site, either operand order.
RESHAPE_BIAS_SITE = tuple(
    fact(_RESHAPE_BIAS.format(args=args, ones=ones("sb")), f"(reshape-bias __root op r y b {side})")
    for side, args in enumerate(("r b", "b r"))
)


#: Transpose(B(Transpose(a, p), y), q) with q = p^-1 and y of the same rank, not enlarging the inner output: the
#: transposes around `a` cancel and y takes q instead (same rank: Transpose commutes with broadcasting axis by axis).
_CANCEL = (
    "(= o (Transpose m q)) (= m (Binary op {args})) (= t (Transpose a p)) (= q (inv-perm p)) (= (shape m) (shape t)) "
    "(= (vec-length (shape y)) (vec-length p)) (= sa (shape a))"
)


#: ... -> B(a, Transpose(y, p^-1)) (`{new}`: the new B's operands)
_CANCELLED = "(let b (Binary op {new})) (set (shape b) sa) (union o b)"


RULES = [
    Rule(
        "transpose-merge",
        "layout",
        "exact",
        "glow:MergeTransposes; coreml:merge_consecutive_transposes",
        "Transpose(Transpose(x, p), q) -> Transpose(x, p o q)",
        (rw("(Transpose (Transpose x p) q)", f"(Transpose x {COMPOSE})", "(= (vec-length p) (vec-length q))"),),
        ruleset="simplify",
    ),
    Rule(
        "transpose-identity",
        "layout",
        "exact",
        "onnxoptimizer:eliminate_nop_transpose",
        "Transpose(x, p) -> x for the identity perm, or when every dim of x is 1",
        (
            rw("(Transpose x p)", "x", "(= p (vec-range (vec-length p)))"),
            rw("(Transpose x p)", "x", "(= s (shape x))", f"(= s {ones('s')})"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "transpose-sink-unary",
        "layout",
        "exact",
        "glow:SinkTranspose; coreml:reduce_transposes",
        "U(Transpose(x, p)) -> Transpose(U(x), p) for unary elementwise U (Relu, Clip, Cast, Sigmoid, ...)",
        (
            rw("(Unary op (Transpose x p))", "(Transpose (Unary op x) p)"),
            rw("(UnaryF op (Transpose x p) a)", "(Transpose (UnaryF op x a) p)"),
            rw("(UnaryFF op (Transpose x p) a b)", "(Transpose (UnaryFF op x a b) p)"),
            rw("(UnaryS op (Transpose x p) a)", "(Transpose (UnaryS op x a) p)"),
        ),
    ),
    Rule(
        "transpose-sink-binary",
        "layout",
        "exact",
        "glow:SinkTranspose; coreml:reduce_transposes",
        "B(Transpose(a, p), Transpose(b, p)) -> Transpose(B(a, b), p) for binary elementwise B",
        (rw("(Binary op (Transpose a p) (Transpose b p))", "(Transpose (Binary op a b) p)"),),
    ),
    Rule(
        "transpose-sink-binary-const",
        "layout",
        "exact",
        "glow:SinkTranspose; coreml:reduce_transposes",
        "B(Transpose(a, p), c) -> Transpose(B(a, Transpose(c, p^-1)), p) for a constant c of the same rank "
        "that does not enlarge the output (either operand order)",
        (
            fact(
                "(= y (Binary op (Transpose a p) c)) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                "(let b (Binary op a (Transpose c ip))) (set (shape b) sa) (union y (Transpose b p))",
            ),
            fact(
                "(= y (Binary op c (Transpose a p))) (is-const c) (= (vec-length (shape c)) (vec-length p)) "
                "(= (shape y) (shape (Transpose a p))) (= ip (inv-perm p)) (= sa (shape a))",
                "(let b (Binary op (Transpose c ip) a)) (set (shape b) sa) (union y (Transpose b p))",
            ),
        ),
    ),
    Rule(
        "transpose-sink-binary-broadcast",
        "layout",
        "exact",
        "glow:SinkTranspose; coreml:reduce_transposes; onnxruntime:TransposeOptimizer (broadcast inputs)",
        "B(Transpose(a, p), c) -> Transpose(B(a, Transpose(Unsqueeze(c, leading axes), p^-1)), p) for B in Add, Sub, "
        "Mul, Div and a graph input c of lower rank that does not enlarge the output",
        (
            fact(_SINK_BROADCAST[0].format(side=0), _SINK_BROADCAST[1].format(new="a cp")),
            fact(_SINK_BROADCAST[0].format(side=1), _SINK_BROADCAST[1].format(new="cp a")),
        ),
    ),
    Rule(
        "transpose-sink-binary-broadcast-site",
        "layout",
        "exact",
        "eqsat:analysis",
        "bcast-sink(B(Transpose(a, p), c), B, Transpose(a, p), c, rank(p) - rank(c), operand order) for B in Add, "
        "Sub, Mul, Div and a graph input c of lower rank not enlarging the output: the guard of "
        "transpose-sink-binary-broadcast",
        (
            fact(_BROADCAST_SITE[0].format(args="t c"), _BROADCAST_SITE[1].format(side=0)),
            fact(_BROADCAST_SITE[0].format(args="c t"), _BROADCAST_SITE[1].format(side=1)),
        ),
        ruleset="analysis",
    ),
    Rule(
        "transpose-sink-reduce",
        "layout",
        "fp-reassoc",
        "glow:SinkTranspose; coreml:reduce_transposes; onnxruntime:TransposeOptimizer (reduce)",
        "R(Transpose(x, p), axes, kd) -> Transpose(R(x, sorted p[axes], kd), p or, for kd = 0, p without the "
        "reduced positions renumbered) for a reduction R; R(x, all axes) when every axis is reduced",
        _REDUCE_SINK,
    ),
    Rule(
        "transpose-sink-reduce-site",
        "layout",
        "exact",
        "eqsat:analysis",
        "reduce-sink(R(Transpose(x, p), axes, kd), R, x, p, axes) when 0 < |axes| < rank (axes in range): the guard "
        "transpose-sink-reduce joins (and the first list values it reads, asked for here)",
        (fact(_SINK_GUARD, f"(reduce-sink __root op x p ax) {_SINK_NEEDS}"),),
        ruleset="analysis",
    ),
    Rule(
        "transpose-to-reshape",
        "layout",
        "exact",
        "onnxruntime:TransposeOptimizer (transpose as reshape); coreml:transpose -> reshape",
        "Transpose(x, p) -> Reshape(x, shape(out)) when p moves no data (the axes of size > 1 keep their order; any "
        "rank): the target is the output's shape when it is static, with its one symbol as -1 when it has one",
        (
            need(_NO_DATA_MOVED, "(need-data-order p s) (need-symbol-count so)"),
            # a static so (no 0: every dim >= 1) is its own max(-1, .): one row for both
            fact(
                f"{_NO_DATA_MOVED} (= o (data-order p s)) (<= (symbol-count so) 1)",
                f"(union __root (Reshape x {_SYMBOLS_AS_MINUS_ONE} 0))",
            ),
        ),
    ),
    Rule(
        "reshape-transpose-reshape",
        "layout",
        "exact",
        "onnxruntime:ReshapeFusion (attention transposes); coreml:reduce_transposes",
        "Reshape(Transpose(Reshape(x, [a*b, c, ...]), p), [a, b, ...]) -> Transpose(x, [0, 1, 1 + p[1:]]) when "
        "p[0] = 0 and the reshapes only merge and split x's leading two axes (targets static or run-time)",
        (fact(_RTR, f"(union y (Transpose x {_RTR_PERM}))"),),
    ),
    Rule(
        "squeeze-unsqueeze-cancel",
        "layout",
        "exact",
        "onnxoptimizer:eliminate_nop_squeeze_unsqueeze; tvm:SimplifyExpr (squeeze/expand_dims)",
        "Squeeze(Unsqueeze(x, a), a) -> x and Unsqueeze(Squeeze(x, a), a) -> x (a non-empty), or any such pair "
        "whose output has x's shape",
        (
            rw("(Squeeze (Unsqueeze x a) a)", "x"),
            rw("(Unsqueeze (Squeeze x a) a)", "x", "(> (vec-length a) 0)"),
            rw("(Squeeze (Unsqueeze x a) b)", "x", "(= (shape __root) (shape x))"),
            rw("(Unsqueeze (Squeeze x b) a)", "x", "(= (shape __root) (shape x))"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "squeeze-merge",
        "layout",
        "exact",
        "onnxoptimizer:fuse_consecutive_squeezes",
        "Squeeze(Squeeze(x, a), b) -> Squeeze(x, sorted(a + b mapped to x's axes)) (any number of axes); "
        "Squeeze(Squeeze(x, a)) -> Squeeze(x) (no axes: every dim that is 1 at run time)",
        (
            need(_SQUEEZES, "(need-drop-at (vec-range l) a)"),
            need(f"{_SQUEEZES} {_SQUEEZE_KEPT}", f"(need-merged a {_MAPPED.format('b')})"),
            fact(f"{_SQUEEZES} {_SQUEEZE_KEPT} (= c (merged a {_MAPPED.format('b')}))", "(union __root (Squeeze x c))"),
            rw("(Squeeze (Squeeze x a) (vec-empty))", "(Squeeze x (vec-empty))"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "unsqueeze-merge",
        "layout",
        "exact",
        "onnxoptimizer:fuse_consecutive_unsqueezes",
        "Unsqueeze(Unsqueeze(x, a), b) -> Unsqueeze(x, sorted(b + a mapped to the output's axes)) (any number of axes)",
        (
            need(_UNSQUEEZES, "(need-drop-at (vec-range l) b)"),
            need(f"{_UNSQUEEZES} {_UNSQUEEZE_KEPT}", f"(need-merged b {_MAPPED.format('a')})"),
            fact(
                f"{_UNSQUEEZES} {_UNSQUEEZE_KEPT} (= c (merged b {_MAPPED.format('a')}))",
                "(union __root (Unsqueeze x c))",
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "transpose-sink-pad",
        "layout",
        "exact",
        "glow:SinkTranspose; coreml:reduce_transposes",
        "Pad(Transpose(x, p), pads) -> Transpose(Pad(x, pads permuted by p^-1), p)",
        (
            rw(
                "(Pad (Transpose x p) pads v mode)",
                f"(Transpose (Pad x {_PADS_REMAPPED} v mode) p)",
                "(= r (vec-length p))",
                "(= (vec-length pads) (* 2 r))",
                "(= ip (inv-perm p))",
            ),
        ),
    ),
    Rule(
        "reshape-sink-unary",
        "layout",
        "exact",
        "onnxruntime:TransposeOptimizer (reshape); tvm:SimplifyExpr; coreml:reduce_transposes",
        "U(Reshape(x, s)) -> Reshape(U(x), s) for unary elementwise U (Relu, Gelu, Sigmoid, ...; Cast: cast-reshape), "
        "static or run-time targets",
        (
            rw("(Unary op (Reshape x s z))", "(Reshape (Unary op x) s z)"),
            rw("(Unary op (ReshapeDyn x t z))", "(ReshapeDyn (Unary op x) t z)"),
            rw("(UnaryF op (Reshape x s z) a)", "(Reshape (UnaryF op x a) s z)"),
            rw("(UnaryF op (ReshapeDyn x t z) a)", "(ReshapeDyn (UnaryF op x a) t z)"),
            rw("(UnaryFF op (Reshape x s z) a b)", "(Reshape (UnaryFF op x a b) s z)"),
            rw("(UnaryFF op (ReshapeDyn x t z) a b)", "(ReshapeDyn (UnaryFF op x a b) t z)"),
            # Cast is not same-dtype: its Reshape sink is cast-sink-reshape
            rw("(UnaryS op (Reshape x s z) a)", "(Reshape (UnaryS op x a) s z)", "(same-dtype-unary op)"),
            rw("(UnaryS op (ReshapeDyn x t z) a)", "(ReshapeDyn (UnaryS op x a) t z)", "(same-dtype-unary op)"),
        ),
    ),
    Rule(
        "reshape-sink-bias",
        "layout",
        "exact",
        "tf2onnx Dense (Reshape -> MatMul -> Reshape -> Add); onnxruntime:MatMulAddFusion (reshaped bias)",
        "B(Reshape(y, s), b) -> Reshape(B(y, Reshape(b, [-1])), s) for B in Add, Sub, Mul, Div (either operand "
        "order) when b varies along the last axis only ([1, .., 1, n], rank <= the output's) and the Reshape keeps "
        "the last dim (y's last dim is the output's)",
        _reshape_sink_bias(),
    ),
    Rule(
        "reshape-sink-bias-site",
        "layout",
        "exact",
        "eqsat:analysis",
        "reshape-bias(B(r, b), B, r, y, b, operand order) for r a Reshape of y keeping its last dim and b [1, .., 1, "
        "n] of rank <= the output's, B in Add, Sub, Mul, Div: the guard of reshape-sink-bias",
        RESHAPE_BIAS_SITE,
        ruleset="analysis",
    ),
    Rule(
        "transpose-cancel-binary",
        "layout",
        "exact",
        "coreml:reduce_transposes (non-constant operand); onnxruntime:TransposeOptimizer",
        "Transpose(B(Transpose(a, p), y), p^-1) -> B(a, Transpose(y, p^-1)) (either operand order) for binary "
        "elementwise B and y of the same rank not enlarging the output (y need not be constant: it takes the "
        "transpose instead, and a Transpose y cancels with it)",
        (
            fact(_CANCEL.format(args="t y"), _CANCELLED.format(new="a (Transpose y q)")),
            fact(_CANCEL.format(args="y t"), _CANCELLED.format(new="(Transpose y q) a")),
        ),
    ),
]
