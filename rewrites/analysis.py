"""Analyses: facts for the nodes that rewrites create (loaded nodes get theirs from shape inference).

    shape(U(x)) = shape(x), dtype(U(x)) = dtype(x)          U unary elementwise (Cast: dtype = to)
    shape(Transpose(x, p)) = shape(x) permuted by p
    shape(B(a, b)) = shape(a) when shape(a) = shape(b)       B binary elementwise
    shape(Concat(l, ax)), shape(Out(Split(x, ax, sizes), k))       (Concat sums axis ax over its list,
                                                                    when no dim there is a symbol)
    is-const(Const), is-const(Scalar); is-const(Transpose(c)), is-const(B(c, d)), ... for constant inputs
    reshape-of(Reshape(x, s), x), reshape-of(ReshapeDyn(x, t), x)
    mul-of(a * b, a, b), mul-of(a * b, b, a); add-of likewise              (either operand order, one relation)
    splat(Scalar(v), v); splat(L(c), v) for splat(c, v), L Reshape/Transpose/Expand/Identity (the loader
                                                                    gives Const splats: zeros, ones, ...)
    elements(v), merged(a, b), drop-at(v, ix), ones-at(v, ix), index-map(k), dims-product(v, ix),
                                                                    sum-of(a, b), symbol-count(v), quotients(v, d),
                                                                    zeros-resolved(t, sy, sx), data-order(p, s)
                                                                    (functions of lists, on demand)

Functions of lists (eqsat.engine.terms.LIST_FUNCTIONS): egglog has no fold or sort over vectors, so a rule that
computes over a whole vector of any length (sorted axes, a product of dims) asks for the value with a
`need` row (eqsat.engine.rule.need) and these rows compute it by recursion on a shorter vector, one element a
step, within one saturation of the analysis ruleset. Each is guarded (no vec-get out of range). A function whose
value at empty arguments is a constant (elements, index-map, sum-of, symbol-count) starts from a
standard fact (eqsat.engine.terms.LIST_BASES), not a base row.
"""

from __future__ import annotations

from eqsat.engine.rule import NEED_RULE, Rule, fact

#: (need v) rows: v's last element is l = v[n - 1], n = |v| > 0, and the value for v without it is r.
_LAST = "(= n (vec-length {v})) (> n 0) (= l (vec-get {v} (- n 1)))"

LIST_ROWS = (
    # elements(v): the set of v's elements, inserting the last into the set of the others
    fact("(need-elements v) (> (vec-length v) 0)", "(need-elements (vec-pop v))"),
    fact(
        f"(need-elements v) {_LAST.format(v='v')} (= r (elements (vec-pop v)))", "(set (elements v) (set-insert r l))"
    ),
    # merged(a, b): the union of their elements, read by position (set-get) in one map: a set's own order, which is
    # increasing for values in [0, 2^32) such as axes (merged(v, []) sorts v; larger or negative ones come in
    # the order the e-graph first stored them)
    fact("(need-merged a b)", "(need-elements a) (need-elements b)"),
    fact(
        "(need-merged a b) (= sa (elements a)) (= sb (elements b))",
        "(let u (set-union sa sb)) "
        '(set (merged a b) (unstable-vec-map (unstable-fn "set-get" u) (vec-range (set-length u))))',
    ),
    # drop-at(v, ix): remove the last position first, so the others do not move
    fact(
        f"(need-drop-at v ix) {_LAST.format(v='ix')} (>= l 0) (< l (vec-length v))",
        "(need-drop-at (vec-remove v l) (vec-pop ix))",
    ),
    fact("(need-drop-at v ix) (= (vec-length ix) 0)", "(set (drop-at v ix) v)"),
    fact(
        f"(need-drop-at v ix) {_LAST.format(v='ix')} (>= l 0) (< l (vec-length v)) "
        "(= r (drop-at (vec-remove v l) (vec-pop ix)))",
        "(set (drop-at v ix) r)",
    ),
    # ones-at(v, ix): set the last position to 1, then the others
    fact(
        f"(need-ones-at v ix) {_LAST.format(v='ix')} (>= l 0) (< l (vec-length v))",
        "(need-ones-at (vec-set v l 1) (vec-pop ix))",
    ),
    fact("(need-ones-at v ix) (= (vec-length ix) 0)", "(set (ones-at v ix) v)"),
    fact(
        f"(need-ones-at v ix) {_LAST.format(v='ix')} (>= l 0) (< l (vec-length v)) "
        "(= r (ones-at (vec-set v l 1) (vec-pop ix)))",
        "(set (ones-at v ix) r)",
    ),
    # index-map(k): the map of the others, grown to length l + 1, with m[l] = n - 1 (k increasing)
    fact("(need-index-map k) (> (vec-length k) 0)", "(need-index-map (vec-pop k))"),
    fact(
        f"(need-index-map k) {_LAST.format(v='k')} (= r (index-map (vec-pop k))) (>= l (vec-length r))",
        "(set (index-map k) (vec-set (vec-append r (vec-range (- (+ l 1) (vec-length r)))) l (- n 1)))",
    ),
    # sum-of(a, b): the sums of the others with a[n - 1] + b[n - 1] pushed after them
    fact(
        "(need-sum-of a b) (= n (vec-length a)) (> n 0) (= n (vec-length b))", "(need-sum-of (vec-pop a) (vec-pop b))"
    ),
    fact(
        "(need-sum-of a b) (= n (vec-length a)) (> n 0) (= n (vec-length b)) (= r (sum-of (vec-pop a) (vec-pop b)))",
        "(set (sum-of a b) (vec-push r (+ (vec-get a (- n 1)) (vec-get b (- n 1)))))",
    ),
    # symbol-count(v): the others' count, plus 1 when the last entry is a symbol (negative)
    fact("(need-symbol-count v) (> (vec-length v) 0)", "(need-symbol-count (vec-pop v))"),
    fact(
        f"(need-symbol-count v) {_LAST.format(v='v')} (= c (symbol-count (vec-pop v)))",
        "(set (symbol-count v) (+ c (min 1 (max 0 (- 0 l)))))",
    ),
    # zeros-resolved(t, sy, sx): t with each 0 (a copy of dim i of shape sy) as sy[i] when that is a size > 0 (a 0
    # would read as a copy again), or kept 0
    # when sy[i] is the symbol sx[i] (a copy of that dim of shape sx); declined when neither is known
    fact("(need-zeros-resolved t sy sx) (> (vec-length t) 0)", "(need-zeros-resolved (vec-pop t) sy sx)"),
    fact("(need-zeros-resolved t sy sx) (= (vec-length t) 0)", "(set (zeros-resolved t sy sx) t)"),
    fact(
        f"(need-zeros-resolved t sy sx) {_LAST.format(v='t')} (!= l 0) (= r (zeros-resolved (vec-pop t) sy sx))",
        "(set (zeros-resolved t sy sx) (vec-push r l))",
    ),
    fact(
        f"(need-zeros-resolved t sy sx) {_LAST.format(v='t')} (= l 0) (<= n (vec-length sy)) "
        "(> (vec-get sy (- n 1)) 0) (= r (zeros-resolved (vec-pop t) sy sx))",
        "(set (zeros-resolved t sy sx) (vec-push r (vec-get sy (- n 1))))",
    ),
    fact(
        f"(need-zeros-resolved t sy sx) {_LAST.format(v='t')} (= l 0) (<= n (vec-length sy)) (<= n (vec-length sx)) "
        "(< (vec-get sy (- n 1)) 0) (= (vec-get sy (- n 1)) (vec-get sx (- n 1))) "
        "(= r (zeros-resolved (vec-pop t) sy sx))",
        "(set (zeros-resolved t sy sx) (vec-push r 0))",
    ),
    # quotients(v, d): the others' quotients with l / d pushed after them, declined unless d > 0 divides l >= 0
    fact("(need-quotients v d) (> (vec-length v) 0)", "(need-quotients (vec-pop v) d)"),
    fact("(need-quotients v d) (= (vec-length v) 0) (> d 0)", "(set (quotients v d) (vec-empty))"),
    fact(
        f"(need-quotients v d) {_LAST.format(v='v')} (> d 0) (>= l 0) (= (% l d) 0) (= r (quotients (vec-pop v) d))",
        "(set (quotients v d) (vec-push r (/ l d)))",
    ),
    # data-order(p, s): p's last entry l when s[l] is not 1 (a symbol is not) and l is above the others' order; the
    # others' order when s[l] is 1; declined (no value) when an entry whose dim is not 1 comes after a larger one
    fact("(need-data-order p s) (> (vec-length p) 0)", "(need-data-order (vec-pop p) s)"),
    fact("(need-data-order p s) (= (vec-length p) 0)", "(set (data-order p s) -1)"),
    fact(
        f"(need-data-order p s) {_LAST.format(v='p')} (>= l 0) (< l (vec-length s)) (= (vec-get s l) 1) "
        "(= r (data-order (vec-pop p) s))",
        "(set (data-order p s) r)",
    ),
    fact(
        f"(need-data-order p s) {_LAST.format(v='p')} (>= l 0) (< l (vec-length s)) (!= (vec-get s l) 1) "
        "(= r (data-order (vec-pop p) s)) (> l r)",
        "(set (data-order p s) l)",
    ),
    # dims-product(v, ix): v[l] times the product of the others, declined at a symbol (a negative dim)
    fact("(need-dims-product v ix) (> (vec-length ix) 0)", "(need-dims-product v (vec-pop ix))"),
    fact("(need-dims-product v ix) (= (vec-length ix) 0)", "(set (dims-product v ix) 1)"),
    fact(
        f"(need-dims-product v ix) {_LAST.format(v='ix')} (>= l 0) (< l (vec-length v)) (>= (vec-get v l) 0) "
        "(= r (dims-product v (vec-pop ix)))",
        "(set (dims-product v ix) (* r (vec-get v l)))",
    ),
)

RULES = [
    Rule(
        "shape-facts-agree",
        "analysis",
        "exact",
        "eqsat:analysis",
        "every shape fact an e-class gets has its rank and its static dims (shape-rank, shape-dim): two that "
        "differ there are a real conflict (egglog's illegal merge); symbols that meet are unified by the session",
        (
            fact("(shape-met t s)", "(set (shape-rank t) (vec-length s))"),
            fact(
                "(shape-met t s) (dim-index i) (< i (vec-length s)) (>= (vec-get s i) 0)",
                "(set (shape-dim t i) (vec-get s i))",
            ),
        ),
        ruleset="analysis",
    ),
    Rule(
        "shape-unary",
        "analysis",
        "exact",
        "eqsat:analysis",
        "shape(U(x)) = shape(x) and dtype(U(x)) = dtype(x) for elementwise U (Cast: dtype(Cast(x, t)) = t)",
        (
            fact("(= y (Unary op x)) (= s (shape x))", "(set (shape y) s)"),
            fact("(= y (UnaryF op x a)) (= s (shape x))", "(set (shape y) s)"),
            fact("(= y (UnaryFF op x a b)) (= s (shape x))", "(set (shape y) s)"),
            fact("(= y (UnaryS op x a)) (= s (shape x))", "(set (shape y) s)"),
            fact("(= y (Unary op x)) (same-dtype-unary op) (= d (dtype x))", "(set (dtype y) d)"),
            fact("(= y (UnaryF op x a)) (= d (dtype x))", "(set (dtype y) d)"),
            fact("(= y (UnaryFF op x a b)) (= d (dtype x))", "(set (dtype y) d)"),
            fact("(= y (UnaryS op x a)) (same-dtype-unary op) (= d (dtype x))", "(set (dtype y) d)"),
            fact("(= y (Cast x t))", "(set (dtype y) t)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "shape-transpose",
        "analysis",
        "exact",
        "eqsat:analysis",
        "shape(Transpose(x, p))[i] = shape(x)[p[i]]; dtype kept",
        (
            fact(
                "(= y (Transpose x p)) (= s (shape x)) (= (vec-length s) (vec-length p))",
                '(set (shape y) (unstable-vec-map (unstable-fn "vec-get" s) p))',
            ),
            fact("(= y (Transpose x p)) (= d (dtype x))", "(set (dtype y) d)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "shape-binary",
        "analysis",
        "exact",
        "eqsat:analysis",
        "shape(B(a, b)) = shape(a) when shape(a) = shape(b); dtype(B(a, b)) = dtype(a) (BOOL for comparisons)",
        (
            fact("(= y (Binary op a b)) (= s (shape a)) (= s (shape b))", "(set (shape y) s)"),
            fact("(= y (Binary op a b)) (same-dtype-binary op) (= d (dtype a))", "(set (dtype y) d)"),
            fact("(= y (Binary op a b)) (comparison op)", '(set (dtype y) "BOOL")'),
        ),
        ruleset="analysis",
    ),
    Rule(
        "shape-concat-split",
        "analysis",
        "exact",
        "eqsat:analysis",
        "shape(Concat(l, ax)) = shape(l[0]) with axis ax the sum over l; shape(Out(Split(x, ax, sz), k)) = "
        "shape(x) with axis ax = sz[k]; dtypes kept",
        (
            fact("(= y (Concat l ax))", "(cdim-demand l ax)"),
            fact("(cdim-demand l ax) (= l (TCons h t))", "(cdim-demand t ax)"),
            fact("(cdim-demand l ax) (= l (TNil))", "(set (cdim l ax) 0)"),
            fact(
                "(cdim-demand l ax) (= l (TCons h t)) (= s (shape h)) (>= ax 0) (< ax (vec-length s)) "
                "(>= (vec-get s ax) 0) (= d (cdim t ax))",
                "(set (cdim l ax) (+ d (vec-get s ax)))",
            ),
            fact(
                "(= y (Concat l ax)) (= l (TCons h t)) (= s (shape h)) (>= ax 0) (< ax (vec-length s)) "
                "(= d (cdim l ax))",
                "(set (shape y) (vec-set s ax d))",
            ),
            fact("(= y (Concat l ax)) (= l (TCons h t)) (= d (dtype h))", "(set (dtype y) d)"),
            fact(
                "(= o (Out n k)) (= n (Split x ax sz)) (= s (shape x)) (>= ax 0) (< ax (vec-length s)) (>= k 0) "
                "(< k (vec-length sz))",
                "(set (shape o) (vec-set s ax (vec-get sz k)))",
            ),
            fact("(= o (Out n k)) (= n (Split x ax sz)) (= d (dtype x))", "(set (dtype o) d)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "constant-terms",
        "analysis",
        "exact",
        "eqsat:analysis",
        "is-const(c) for constants and for Transpose/Reshape/Cast/elementwise ops over constants; const-leaf(c) for "
        "the constant leaves (a Const or a Scalar); zero-point(c, v, s) for a Scalar (its value and shape, as the "
        "quant rules read a per-tensor zero point)",
        (
            fact("(= y (Const k))", "(is-const y) (const-leaf y)"),
            fact("(= y (Scalar v d s))", "(is-const y) (const-leaf y) (zero-point y v s)"),
            fact("(view-of y c) (is-const c)", "(is-const y)"),  # Transpose, Reshape
            fact("(= y (Cast c t)) (is-const c)", "(is-const y)"),
            fact("(= l (TNil))", "(const-list l)"),
            fact("(= l (TCons h t)) (is-const h) (const-list t)", "(const-list l)"),
            fact("(= y (Concat l ax)) (const-list l)", "(is-const y)"),
            fact("(= y (Unary op c)) (const-foldable op) (is-const c)", "(is-const y)"),
            fact("(= y (Binary op c d)) (is-const c) (is-const d)", "(is-const y)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "splat-facts",
        "analysis",
        "exact",
        "eqsat:analysis",
        "splat(c, v) (every element of c is v) for a Scalar v, and through Reshape/Transpose/Expand/Identity "
        "(loaded constants of equal elements get it from the loader)",
        (
            fact("(= y (Scalar v d s))", "(splat y v)"),
            fact("(view-of y c) (splat c v)", "(splat y v)"),  # Reshape, Transpose
            fact("(= y (Expand c s)) (splat c v)", "(splat y v)"),
            fact("(= y (Identity c)) (splat c v)", "(splat y v)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "reshape-facts",
        "analysis",
        "exact",
        "eqsat:analysis",
        "reshape-of(y, x) for y = Reshape(x, s) and y = ReshapeDyn(x, t): rules that read only the shapes of a "
        "reshape's input and output join it instead of one row per target kind; view-of(y, x) for y = Reshape(x, s) "
        "and y = Transpose(x, p) (x's elements rearranged: the constant, splat, finite and positive facts pass)",
        (
            fact("(= y (Reshape x s z))", "(reshape-of y x) (view-of y x)"),
            fact("(= y (ReshapeDyn x t z))", "(reshape-of y x)"),
            fact("(= y (Transpose x p))", "(view-of y x)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        "operand-orders",
        "analysis",
        "exact",
        "eqsat:analysis",
        "mul-of(y, a, b) and mul-of(y, b, a) for y = a * b, add-of likewise for y = a + b: a rule that reads a "
        "product or a sum in either operand order joins one of them instead of one row per order",
        (
            fact("(= y (Mul a b))", "(mul-of y a b) (mul-of y b a)"),
            fact("(= y (Add a b))", "(add-of y a b) (add-of y b a)"),
        ),
        ruleset="analysis",
    ),
    Rule(
        NEED_RULE,
        "analysis",
        "exact",
        "eqsat:analysis",
        "elements(v), merged(a, b), drop-at(v, ix), ones-at(v, ix), index-map(k), dims-product(v, ix), "
        "zeros-resolved(t, sy, sx): functions of lists, sum-of(a, b), symbol-count(v), quotients(v, d) and "
        "data-order(p, s) computed by recursion where a rule's need row asks for them (any length)",
        LIST_ROWS,
        ruleset="analysis",
    ),
]
