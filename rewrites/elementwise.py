"""Elementwise arithmetic rules: identities that remove an op, and division by a constant as a multiplication.

    Div(x, c)          -> Mul(x, 1 / c)     c constant, float dtype (fp-reassoc: x / c and x * (1 / c) differ
                                            by an ulp; 1 / c is folded at lowering, a single-element c at once)
                                            when 1 / c does not overflow c's dtype
    Sub(x, 0)          -> x                 when the output shape is x's
    Div(x, 1)          -> x                 likewise (integer division by 1 too)
    Neg(Neg(x))        -> x
    Where(Not(c), a, b) -> Where(c, b, a)
    And(a, a), Or(a, a) -> a

Shape guards: a single-element constant may broadcast x to a higher rank, so the identities require the
output's shape to be x's.

Division by a constant as a product, element by element (IEEE): a zero in c is fine, x / 0 and x * (1 / 0)
= x * inf agree for every x (+-inf for x != 0 with the same sign, NaN for x = 0 or NaN, signed zeros
included). What breaks it is an overflowing reciprocal: for |c| < 1 / max (max the largest finite value of
c's dtype) 1 / c rounds to inf though c is not 0, and 0 / c = 0 becomes 0 * inf = NaN, small x / c finite
becomes inf. That happens for float16 c below 1.53e-5 (subnormals, reachable) and float32 c below 2.9e-39
(subnormals only). A single-element c is checked exactly (|1 / c| <= max). A tensor c's elements are not
visible to rules: its form is admitted for FLOAT and DOUBLE, whose overflowing divisors are subnormal
(and flushed to zero by FTZ/DAZ runtimes, where x / c itself becomes x / 0), never for FLOAT16.
"""

from __future__ import annotations

from eqsat.rule import Rule, rw
from eqsat.rewrites.cleanup import rw_neutral

#: Float dtypes (integer division truncates: never a multiplication by the reciprocal), with their largest
#: finite value: 1 / c must not exceed it.
FLOAT_MAX = {"FLOAT": 3.4028234663852886e38, "FLOAT16": 65504.0, "DOUBLE": 1.7976931348623157e308}
#: Dtypes whose tensor constants may be inverted unseen (overflow only for subnormal elements, see above).
TENSOR_RECIPROCAL = ("FLOAT", "DOUBLE")

RULES = [
    Rule("div-const-to-mul", "elementwise", "fp-reassoc", "tvm:DivToMul; onnxruntime:DivMulFusion",
         "Div(x, c) -> Mul(x, Reciprocal(c)) for a float constant c whose reciprocal does not overflow (a "
         "single-element c becomes Scalar(1 / c); a tensor c only in FLOAT/DOUBLE)",
         tuple(rw(f'(Div x (Scalar v "{dt}" s))', f'(Mul x (Scalar (/ 1.0 v) "{dt}" s))', "(!= v 0.0)",
                  f"(<= (abs (/ 1.0 v)) {top!r})")
               for dt, top in FLOAT_MAX.items())
         + tuple(rw("(Div x c)", "(Mul x (Reciprocal c))", "(= c (Const k))", f'(= (dtype c) "{dt}")')
                 for dt in TENSOR_RECIPROCAL)),
    Rule("sub-zero", "elementwise", "exact", "coreml:noop_elimination",
         "x - 0 -> x when the output shape is x's",
         (rw_neutral("(Sub x (Scalar 0.0 dt s))", "x", "(= (shape __root) (shape x))"),), ruleset="simplify"),
    Rule("div-one", "elementwise", "exact", "coreml:noop_elimination",
         "x / 1 -> x when the output shape is x's",
         (rw_neutral("(Div x (Scalar 1.0 dt s))", "x", "(= (shape __root) (shape x))"),), ruleset="simplify"),
    Rule("neg-neg", "elementwise", "exact", "tvm:SimplifyExpr; onnxruntime:NegNegElimination",
         "Neg(Neg(x)) -> x", (rw("(Neg (Neg x))", "x"),), ruleset="simplify"),
    Rule("where-not-swap", "elementwise", "exact", "onnxoptimizer:rewrite_where",
         "Where(Not(c), a, b) -> Where(c, b, a)", (rw("(Where (Not c) a b)", "(Where c b a)"),), ruleset="simplify"),
    Rule("logical-self", "elementwise", "exact", "onnxoptimizer:eliminate_consecutive_idempotent_ops (And/Or); "
         "tvm:SimplifyExpr",
         "And(a, a) -> a and Or(a, a) -> a (the output is a's shape)",
         (rw_neutral("(And a a)", "a"), rw_neutral("(Or a a)", "a")), ruleset="simplify"),
]
