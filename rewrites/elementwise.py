"""Elementwise arithmetic rules: identities that remove an op, and division by a constant as a multiplication.

    Div(x, c)          -> Mul(x, 1 / c)     c constant, float dtype (fp-reassoc: x / c and x * (1 / c) differ
                                            by an ulp; 1 / c is folded at lowering, a single-element c at once)
                                            when 1 / c does not overflow c's dtype
    Div(x, 2^k)        -> Mul(x, 2^-k)      a single-element c = +-2^k (exact: scaling by a power of two rounds
                                            once, the same way; div-pow2-to-mul, the fp-reassoc rule leaves it)
    Sub(x, 0)          -> x                 when the output shape is x's (0: a scalar or a tensor of zeros,
                                            the `splat` fact; 1 likewise)
    Div(x, 1)          -> x                 likewise (integer division by 1 too)
    Pow(x, 1)          -> x                 likewise (x^1 = x for every x, inf and NaN included)
    Or(x, false), And(x, true) -> x         likewise, either operand order
    Mul(x, -1)         -> Neg(x)            likewise (either operand order; -1: scalar or tensor of -1)
    a * (b * c), (a * c) * b -> (a * b) * c c a single-element constant, a and b of the output's shape
                                            (fp-reassoc: the exporters' Gelu orders become one)
    p * c + x          -> x + p * c         c a single-element constant (exact: + commutes)
    Neg(Neg(x))        -> x
    Where(Not(c), a, b) -> Where(c, b, a)
    And(a, a), Or(a, a) -> a

Shape guards: a constant may broadcast x to a higher rank or a larger dim, so the identities require the
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

from eqsat.engine.rule import Rule, fact, rw
from eqsat.rewrites.cleanup import rw_neutral

#: Guard of the identities: a constant may broadcast x to a larger shape.
SAME_SHAPE = "(= (shape __root) (shape x))"
#: Guards of mul-scalar-reassoc: c a single-element constant of rank <= the output's, a and b of the output's
#: shape (so a * b has it too: shape-binary sets it), and |c| at least the dtype's `reassoc-floor` (terms.REASSOC_FLOOR:
#: 1 in FLOAT16, where a * b of 300 * 300 overflows while the product times 0.125 does not; a heuristic for the
#: wide floats, which can overflow too but only near their limits).
REASSOC = (
    "(= c (Scalar v d sc))",
    "(= s (shape __root))",
    "(= s (shape a))",
    "(= s (shape b))",
    "(<= (vec-length sc) (vec-length s))",
    "(= least (reassoc-floor d))",
    "(>= (abs v) least)",
)

#: b = max(|v|, 1 / |v|) >= 1 for a nonzero scalar v, and n = b as an integer when b < 2**62: v is a power of two
#: exactly when b is an integer whose binary form has one bit ((b - n) + (n & (n - 1)) = 0, both terms >= 0).
POW2_RANGE = "(= b (max (abs v) (/ 1.0 (abs v)))) (< b 4611686018427387904.0) (= n (to-i64 b))"
POW2_REST = "(+ (- b (to-f64 n)) (to-f64 (& n (- n 1))))"
#: A scalar divisor whose reciprocal is finite in its dtype (float dtypes only: integer division truncates).
SCALAR_DIVISOR = ("(!= v 0.0) (= top (float-max dt))", "(<= (abs (/ 1.0 v)) top)")

RULES = [
    Rule(
        "div-pow2-to-mul",
        "elementwise",
        "exact",
        "tvm:DivToMul; onnxruntime:DivMulFusion",
        "Div(x, c) -> Mul(x, 1 / c) for a single-element float constant c = +-2^k (|k| <= 62) whose reciprocal "
        "is finite: x / 2^k and x * 2^-k are the same correctly rounded product",
        (
            rw(
                "(Div x (Scalar v dt s))",
                "(Mul x (Scalar (/ 1.0 v) dt s))",
                *SCALAR_DIVISOR,
                POW2_RANGE,
                f"(= {POW2_REST} 0.0)",
            ),
        ),
    ),
    Rule(
        "div-const-to-mul",
        "elementwise",
        "fp-reassoc",
        "tvm:DivToMul; onnxruntime:DivMulFusion",
        "Div(x, c) -> Mul(x, Reciprocal(c)) for a float constant c whose reciprocal does not overflow (a "
        "single-element c becomes Scalar(1 / c), powers of two excepted: div-pow2-to-mul; a tensor c only in "
        "FLOAT/DOUBLE, with no element so small, a subnormal, that its reciprocal overflows)",
        (
            rw(
                "(Div x (Scalar v dt s))",
                "(Mul x (Scalar (/ 1.0 v) dt s))",
                *SCALAR_DIVISOR,
                POW2_RANGE,
                f"(!= {POW2_REST} 0.0)",
            ),  # not a power of two within 2**+-62
            rw(
                "(Div x (Scalar v dt s))",
                "(Mul x (Scalar (/ 1.0 v) dt s))",
                *SCALAR_DIVISOR,
                "(>= (max (abs v) (/ 1.0 (abs v))) 4611686018427387904.0)",
            ),  # beyond 2**+-62: not checked
            rw(
                "(Div x c)",
                "(Mul x (Reciprocal c))",
                "(= c (Const k)) (safe-reciprocal c)",
                '(= dt (dtype c)) (dtype-group "tensor-reciprocal" dt since)',
            ),
        ),
    ),
    Rule(
        "sub-zero",
        "elementwise",
        "fp-reassoc",
        "coreml:noop_elimination",
        "x - 0 -> x (0 a scalar or a tensor of zeros) when the output shape is x's (not exact for a zero of -0 and "
        "a float x of -0: IEEE's -0 - (-0) is +0; the sign of a zero is all it changes)",
        (rw_neutral("(Sub x c)", "x", "(splat c 0.0)", SAME_SHAPE),),
        ruleset="simplify",
    ),
    Rule(
        "div-one",
        "elementwise",
        "exact",
        "coreml:noop_elimination",
        "x / 1 -> x (1 a scalar or a tensor of ones) when the output shape is x's",
        (rw_neutral("(Div x c)", "x", "(splat c 1.0)", SAME_SHAPE),),
        ruleset="simplify",
    ),
    Rule(
        "pow-one",
        "elementwise",
        "exact",
        "coreml:noop_elimination; tvm:SimplifyExpr (power 1)",
        "Pow(x, 1) -> x (1 a scalar or a tensor of ones, any exponent dtype) when the output shape is x's",
        (rw_neutral("(Pow x c)", "x", "(splat c 1.0)", SAME_SHAPE),),
        ruleset="simplify",
    ),
    Rule(
        "or-false",
        "elementwise",
        "exact",
        "tvm:SimplifyExpr (logical identities)",
        "Or(x, false) -> x (either operand order) when the output shape is x's",
        (
            rw_neutral("(Or x c)", "x", "(splat c 0.0)", SAME_SHAPE),
            rw_neutral("(Or c x)", "x", "(splat c 0.0)", SAME_SHAPE),
        ),
        ruleset="simplify",
    ),
    Rule(
        "and-true",
        "elementwise",
        "exact",
        "tvm:SimplifyExpr (logical identities)",
        "And(x, true) -> x (either operand order) when the output shape is x's",
        (
            rw_neutral("(And x c)", "x", "(splat c 1.0)", SAME_SHAPE),
            rw_neutral("(And c x)", "x", "(splat c 1.0)", SAME_SHAPE),
        ),
        ruleset="simplify",
    ),
    Rule(
        "mul-neg-one",
        "elementwise",
        "exact",
        "tvm:SimplifyExpr (x * -1 as -x); tf2onnx:PReLU (relu(x * -1))",
        "x * -1 -> Neg(x) (-1 a scalar or a tensor of -1, either operand order) when the output shape is x's",
        (fact(f"(mul-of __root x c) (splat c -1.0) {SAME_SHAPE}", "(union __root (Neg x))"),),
        ruleset="simplify",
    ),
    Rule(
        "mul-scalar-reassoc",
        "elementwise",
        "fp-reassoc",
        "tvm:SimplifyExpr (reassociate constant products); onnxruntime:GeluFusion (operand orders)",
        "a * (b * c) -> (a * b) * c and (a * c) * b -> (a * b) * c for a single-element constant c and a, b of the "
        "output's shape (one canonical place for a scale: the outermost product)",
        (
            rw("(Mul a (Mul b c))", "(Mul (Mul a b) c)", *REASSOC),
            rw("(Mul (Mul a c) b)", "(Mul (Mul a b) c)", *REASSOC),
        ),
    ),
    Rule(
        "add-scaled-last",
        "elementwise",
        "exact",
        "onnxruntime:FastGeluFusion (operand orders)",
        "p * c + x -> x + p * c for a single-element constant c (the scaled term second: one operand order for "
        "the fusions)",
        (
            rw(
                "(Add (Mul p c) x)",
                "(Add x (Mul p c))",
                "(= c (Scalar v d sc))",
                "(= (shape __root) (shape x))",
                "(= (shape __root) (shape p))",
            ),
        ),
    ),
    Rule(
        "neg-neg",
        "elementwise",
        "exact",
        "tvm:SimplifyExpr; onnxruntime:NegNegElimination",
        "Neg(Neg(x)) -> x",
        (rw("(Neg (Neg x))", "x"),),
        ruleset="simplify",
    ),
    Rule(
        "where-not-swap",
        "elementwise",
        "exact",
        "onnxoptimizer:rewrite_where",
        "Where(Not(c), a, b) -> Where(c, b, a)",
        (rw("(Where (Not c) a b)", "(Where c b a)"),),
        ruleset="simplify",
    ),
    Rule(
        "logical-self",
        "elementwise",
        "exact",
        "onnxoptimizer:eliminate_consecutive_idempotent_ops (And/Or); tvm:SimplifyExpr",
        "And(a, a) -> a and Or(a, a) -> a (the output is a's shape)",
        (rw_neutral("(Binary op a a)", "a", "(bool-idempotent op)"),),
        ruleset="simplify",
    ),
]
