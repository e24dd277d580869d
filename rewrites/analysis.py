"""Analyses: facts for the nodes that rewrites create (loaded nodes get theirs from shape inference).

    shape(U(x)) = shape(x), dtype(U(x)) = dtype(x)          U unary elementwise (Cast: dtype = to)
    shape(Transpose(x, p)) = shape(x) permuted by p
    shape(B(a, b)) = shape(a) when shape(a) = shape(b)       B binary elementwise
    shape(Concat(l, ax)), shape(Out(Split(x, ax, sizes), k))       (Concat sums axis ax over its list,
                                                                    when no dim there is a symbol)
    is-const(Const), is-const(Scalar); is-const(Transpose(c)), is-const(B(c, d)), ... for constant inputs
    splat(Scalar(v), v); splat(L(c), v) for splat(c, v), L Reshape/Transpose/Expand/Identity (the loader
                                                                    gives Const splats: zeros, ones, ...)
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, fact, op_pattern
from eqsat.engine.terms import BINARY, OPS, UNARY
from eqsat.rewrites.layout import PARAM_UNARY

_COMPARISONS = {"Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"}
_CONST_FOLDABLE_UNARY = ("Neg", "Reciprocal", "Sqrt", "Abs", "Exp", "Log", "Identity")

RULES = [
    Rule("shape-unary", "analysis", "exact", "eqsat:analysis",
         "shape(U(x)) = shape(x) and dtype(U(x)) = dtype(x) for elementwise U (Cast: dtype(Cast(x, t)) = t)",
         tuple(fact(f"(= y {op_pattern(op, 'x')}) (= s (shape x))", "(set (shape y) s)")
               for op in sorted(UNARY) + list(PARAM_UNARY))
         + tuple(fact(f"(= y {op_pattern(op, 'x')}) (= d (dtype x))", "(set (dtype y) d)")
                 for op in sorted(UNARY - {"IsNaN"}) + [o for o in PARAM_UNARY if o != "Cast"])
         + (fact("(= y (Cast x t))", "(set (dtype y) t)"),),
         ruleset="analysis"),
    Rule("shape-transpose", "analysis", "exact", "eqsat:analysis",
         "shape(Transpose(x, p))[i] = shape(x)[p[i]]; dtype kept",
         (fact("(= y (Transpose x p)) (= s (shape x)) (= (vec-length s) (vec-length p))",
               '(set (shape y) (unstable-vec-map (unstable-fn "vec-get" s) p))'),
          fact("(= y (Transpose x p)) (= d (dtype x))", "(set (dtype y) d)")),
         ruleset="analysis"),
    Rule("shape-binary", "analysis", "exact", "eqsat:analysis",
         "shape(B(a, b)) = shape(a) when shape(a) = shape(b); dtype(B(a, b)) = dtype(a) (BOOL for comparisons)",
         tuple(fact(f"(= y ({op} a b)) (= s (shape a)) (= s (shape b))", "(set (shape y) s)") for op in sorted(BINARY))
         + tuple(fact(f"(= y ({op} a b)) (= d (dtype a))", "(set (dtype y) d)")
                 for op in sorted(BINARY - _COMPARISONS - {"And", "Or", "Xor"}))
         + tuple(fact(f"(= y ({op} a b))", '(set (dtype y) "BOOL")') for op in sorted(_COMPARISONS)),
         ruleset="analysis"),
    Rule("shape-concat-split", "analysis", "exact", "eqsat:analysis",
         "shape(Concat(l, ax)) = shape(l[0]) with axis ax the sum over l; shape(Out(Split(x, ax, sz), k)) = "
         "shape(x) with axis ax = sz[k]; dtypes kept",
         (fact("(= y (Concat l ax))", "(cdim-demand l ax)"),
          fact("(cdim-demand l ax) (= l (TCons h t))", "(cdim-demand t ax)"),
          fact("(cdim-demand l ax) (= l (TNil))", "(set (cdim l ax) 0)"),
          fact("(cdim-demand l ax) (= l (TCons h t)) (= s (shape h)) (>= ax 0) (< ax (vec-length s)) "
               "(>= (vec-get s ax) 0) (= d (cdim t ax))", "(set (cdim l ax) (+ d (vec-get s ax)))"),
          fact("(= y (Concat l ax)) (= l (TCons h t)) (= s (shape h)) (>= ax 0) (< ax (vec-length s)) "
               "(= d (cdim l ax))", "(set (shape y) (vec-set s ax d))"),
          fact("(= y (Concat l ax)) (= l (TCons h t)) (= d (dtype h))", "(set (dtype y) d)"),
          fact("(= o (Out n k)) (= n (Split x ax sz)) (= s (shape x)) (>= ax 0) (< ax (vec-length s)) (>= k 0) "
               "(< k (vec-length sz))", "(set (shape o) (vec-set s ax (vec-get sz k)))"),
          fact("(= o (Out n k)) (= n (Split x ax sz)) (= d (dtype x))", "(set (dtype o) d)")),
         ruleset="analysis"),
    Rule("constant-terms", "analysis", "exact", "eqsat:analysis",
         "is-const(c) for constants and for Transpose/Reshape/Cast/elementwise ops over constants",
         (fact("(= y (Const k))", "(is-const y)"),
          fact("(= y (Scalar v d s))", "(is-const y)"),
          fact("(= y (Transpose c p)) (is-const c)", "(is-const y)"),
          fact("(= y (Reshape c s z)) (is-const c)", "(is-const y)"),
          fact("(= y (Cast c t)) (is-const c)", "(is-const y)"),
          fact("(= l (TNil))", "(const-list l)"),
          fact("(= l (TCons h t)) (is-const h) (const-list t)", "(const-list l)"),
          fact("(= y (Concat l ax)) (const-list l)", "(is-const y)"))
         + tuple(fact(f"(= y ({op} c)) (is-const c)", "(is-const y)") for op in _CONST_FOLDABLE_UNARY)
         + tuple(fact(f"(= y ({op} c d)) (is-const c) (is-const d)", "(is-const y)") for op in sorted(BINARY)),
         ruleset="analysis"),
    Rule("splat-facts", "analysis", "exact", "eqsat:analysis",
         "splat(c, v) (every element of c is v) for a Scalar v, and through Reshape/Transpose/Expand/Identity "
         "(loaded constants of equal elements get it from the loader)",
         (fact("(= y (Scalar v d s))", "(splat y v)"),
          fact("(= y (Reshape c s z)) (splat c v)", "(splat y v)"),
          fact("(= y (Transpose c p)) (splat c v)", "(splat y v)"),
          fact("(= y (Expand c s)) (splat c v)", "(splat y v)"),
          fact("(= y (Identity c)) (splat c v)", "(splat y v)")),
         ruleset="analysis"),
]

assert all(op in OPS for op in PARAM_UNARY)
