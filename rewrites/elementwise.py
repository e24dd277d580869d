"""Elementwise arithmetic rules: identities that remove an op, and division by a constant as a multiplication.

    Div(x, c)          -> Mul(x, 1 / c)     c constant, float dtype (fp-reassoc: x / c and x * (1 / c) differ
                                            by an ulp; 1 / c is folded at lowering, a single-element c at once)
    Sub(x, 0)          -> x                 when the output shape is x's
    Div(x, 1)          -> x                 likewise (integer division by 1 too)
    Neg(Neg(x))        -> x

Shape guards: a single-element constant may broadcast x to a higher rank, so the identities require the
output's shape to be x's.
"""

from __future__ import annotations

from eqsat.rule import Rule, rw

#: Float dtypes (integer division truncates: never a multiplication by the reciprocal).
FLOATS = ("FLOAT", "FLOAT16", "DOUBLE")

RULES = [
    Rule("div-const-to-mul", "elementwise", "fp-reassoc", "tvm:DivToMul; onnxruntime:DivMulFusion",
         "Div(x, c) -> Mul(x, Reciprocal(c)) for a float constant c (a single-element c becomes Scalar(1 / c))",
         tuple(rw(f'(Div x (Scalar v "{dt}" s))', f'(Mul x (Scalar (/ 1.0 v) "{dt}" s))', "(!= v 0.0)")
               for dt in FLOATS)
         + tuple(rw("(Div x c)", "(Mul x (Reciprocal c))", "(= c (Const k))", f'(= (dtype c) "{dt}")')
                 for dt in FLOATS)),
    Rule("sub-zero", "elementwise", "exact", "coreml:noop_elimination",
         "x - 0 -> x when the output shape is x's",
         (rw("(Sub x (Scalar 0.0 dt s))", "x", "(= (shape __root) (shape x))"),), ruleset="simplify"),
    Rule("div-one", "elementwise", "exact", "coreml:noop_elimination",
         "x / 1 -> x when the output shape is x's",
         (rw("(Div x (Scalar 1.0 dt s))", "x", "(= (shape __root) (shape x))"),), ruleset="simplify"),
    Rule("neg-neg", "elementwise", "exact", "tvm:SimplifyExpr; onnxruntime:NegNegElimination",
         "Neg(Neg(x)) -> x", (rw("(Neg (Neg x))", "x"),), ruleset="simplify"),
]
