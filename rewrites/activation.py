"""Activation rules: exported activation formulas fused into ONNX activation ops (and Gelu decomposed again
for targets without it), Clip and Relu chains merged.

    Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)    -> Gelu(x)                 also (x * 0.5) * h, Mul(x, 1/sqrt 2)
    Mul(Mul(x, 0.5), Add(Tanh(Mul(Add(x, Mul(Pow(x, 3), 0.044715)), sqrt(2/pi))), 1))
                                                     -> Gelu(x, approximate=tanh)   also x * x * x (either
                                                        association) for Pow(x, 3)
    Gelu(x)                                          -> its primitives (FLOAT; the erf or the tanh form)
    Mul(Mul(x, Clip(Add(x, 3), 0, 6)), 1/6)          -> Mul(x, HardSigmoid(x, 1/6, 0.5)), HardSwish(x) (opset >= 14)
                                                        also Div(., 6), Mul(x, Div(Clip(...), 6)), operands swapped
    Mul(x, HardSigmoid(x, 1/6, 0.5))                 -> HardSwish(x)            opset >= 14
    Max(x, Mul(x, a))                                -> LeakyRelu(x, a)         0 < a < 1
    Add(Relu(x), Mul(Relu(Neg(x)), a))               -> PRelu(x, Neg(a))        a constant (Sub: PRelu(x, a))
    PRelu(x, a)                                      -> LeakyRelu(x, a)         a a single-element constant
    Clip(Clip(x, a, b), c, d)                        -> Clip(x, max(a, c), min(b, d))   when max(a, c) <= min(b, d)
    Relu(Clip(x, a, b)), Clip(Relu(x), a, b)         -> Clip(x, max(a, 0), b)   when max(a, 0) <= b

Gelu fusion needs opset 20 (`(model-opset)`) and is `fp-reassoc`: the constants are matched within 5e-4
(constants written with 4-5 digits match; the result then moves by < 1e-4 relative), and the kernel
evaluates the formula in its own order. Only FLOAT graphs are fused into Gelu: the kernel computes fp16
in float32, dropping the decomposition's fp16 roundings (precision-changing; measured up to 1.3% of the
output scale). Operand orders are matched as exporters write them (torch, tf2onnx); other orders are made
canonical by rules of their own rather than listed here: constants on the left of a Mul/Add are turned to
the right by `const-operand-last` (conv family), x * (h * 0.5) becomes (x * h) * 0.5 by `mul-scalar-reassoc`,
0.044715 x^3 + x becomes x + x^3 0.044715 by `add-scaled-last`, and x * -1 is Neg(x) by `mul-neg-one` (so
relu(x) + a relu(x * -1) is a PRelu) (elementwise family). LeakyRelu/PRelu rules are
exact for FLOAT and FLOAT16 (LeakyRelu's alpha is a float32 attribute: exact for those dtypes, not for
DOUBLE).
"""

from __future__ import annotations

import math

from eqsat.engine.rule import Rule, fact, rw

#: Gelu needs opset 20, HardSwish 14.
OPSET_GELU = "(= o (model-opset)) (>= o 20)"
OPSET_HARDSWISH = "(= o (model-opset)) (>= o 14)"
#: How far a matched constant may be from its exact value (an fp16 rounding of sqrt 2 is 1.5e-4 off).
TOL = 5e-4
SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
TANH_CUBIC = 0.044715


def near(var: str, value: float, tol: float = TOL) -> str:
    """Guard: the f64 `var` is within `tol` of `value`."""
    return f"(< (abs (- {var} {value!r})) {tol!r})"


#: gelu-half(y, x, h): y = x * 0.5 * h in the two association orders exporters write, x and h in either order
#: (torch/BERT: (x * h) * 0.5; GPT-2/TF: (x * 0.5) * h, each product read through mul-of), for an h some Gelu
#: fusion asks for (gelu-h: h = 1 + erf(e) or 1 + tanh(t), the op fact gelu-core).
GELU_FORMS = (
    fact("(= h (Add (Unary op e) (Scalar 1.0 d1 s1))) (gelu-core op)", "(gelu-h h)"),
    fact("(gelu-h h) (= y (Mul t (Scalar 0.5 dh sh))) (mul-of t x h)", "(gelu-half y x h)"),
    fact("(gelu-h h) (mul-of y h t) (= t (Mul x (Scalar 0.5 dh sh)))", "(gelu-half y x h)"),
)
#: The guards both fusions share: a FLOAT x of the output's shape, opset >= 20.
_GELU = f'(= s (shape x)) (= (shape y) s) (= (dtype x) "FLOAT") {OPSET_GELU}'

GELU_FUSE = (
    fact(
        f"(gelu-half y x h) (= h (Add (Erf (Div x (Scalar k dk sk))) (Scalar 1.0 d1 s1))) {near('k', SQRT2)} {_GELU}",
        '(union y (Gelu x "none"))',
    ),
    fact(
        f"(gelu-half y x h) (= h (Add (Erf (Mul x (Scalar k dk sk))) (Scalar 1.0 d1 s1))) {near('k', 1 / SQRT2)} "
        f"{_GELU}",
        '(union y (Gelu x "none"))',
    ),
)

#: h = 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)), x^3 = cu as Pow(x, 3) or x * x * x in either association (mul-of).
_TANH_H = (
    "(= h (Add (Tanh (Mul (Add x (Mul cu (Scalar c1 dc1 sc1))) (Scalar c2 dc2 sc2))) (Scalar 1.0 d1 s1))) {cube} "
    f"{near('c1', TANH_CUBIC, 1e-4)} {near('c2', SQRT_2_OVER_PI)} {_GELU}"
)
GELU_TANH_FUSE = (
    *(
        fact(f"(gelu-half y x h) {_TANH_H.format(cube=cube)}", '(union y (Gelu x "tanh"))')
        for cube in ("(= cu (Pow x (Scalar 3.0 d3 s3)))", "(mul-of cu x q) (= q (Mul x x))")
    ),
)


def _sc(value: float) -> str:
    """A rank-0 FLOAT scalar (its facts: _scalar_facts)."""
    return f'(Scalar {value!r} "FLOAT" (vec-empty))'


def _gelu_decompose() -> tuple:
    """Gelu (FLOAT) -> (x * h) * 0.5 with h = 1 + erf(x / sqrt 2) or 1 + tanh(sqrt(2/pi) (x + 0.044715 x^3));
    rank-0 scalars, x^3 as x * x * x (targets without Pow). The new nodes' facts come from the analysis rows:
    scalar-broadcast-facts, shape-binary for equal shapes, shape-unary for Erf and Tanh, dtypes from the first
    operand."""
    erf = f"(Add (Erf (Mul x {_sc(1 / SQRT2)})) {_sc(1.0)})"
    cube = f"(Mul (Mul (Mul x x) x) {_sc(TANH_CUBIC)})"
    tanh = f"(Add (Tanh (Mul (Add x {cube}) {_sc(SQRT_2_OVER_PI)})) {_sc(1.0)})"
    guard = '(= (dtype x) "FLOAT")'
    return (
        fact(f'(= __root (Gelu x "none")) {guard}', f"(union __root (Mul (Mul x {erf}) {_sc(0.5)}))"),
        fact(f'(= __root (Gelu x "tanh")) {guard}', f"(union __root (Mul (Mul x {tanh}) {_sc(0.5)}))"),
    )


def _scalar_facts() -> tuple:
    """Facts of scalars and of an elementwise op with a rank-0 one as its second operand: shape(Scalar(v, d, s)) = s,
    dtype = d (a loaded Scalar's are the same); shape(B(a, Scalar(v, d, []))) = shape(a) (broadcasting a rank-0
    scalar keeps a's shape)."""
    return (
        fact("(= y (Scalar v d s))", "(set (shape y) s) (set (dtype y) d)"),
        fact("(= y (Binary op a (Scalar v d (vec-empty)))) (arith op) (= s (shape a))", "(set (shape y) s)"),
    )


#: relu6(x + 3) (h), and the scale 1/6 (as a product) or 6 (as a divisor).
_H = "(Clip (Add x (Scalar three d3 s3)) 0.0 6.0)"
_SIXTH, _SIX = (near("k", 1 / 6, 1e-6), "(= k 6.0)")


def _hardswish_forms() -> list[tuple[str, str]]:
    """(form, guard) rows for x * relu6(x + 3) / 6 as exporters write it (paddle, torch, tf), h = relu6(x + 3):
    (x h) k, (x h) / 6, x (h / 6) and x (h k), each product in either operand order (mul-of)."""
    k = "(Scalar k dk sk)"
    return [
        (f"(= __root (Mul t {k})) (mul-of t x h)", _SIXTH),
        (f"(= __root (Div t {k})) (mul-of t x h)", _SIX),
        (f"(mul-of __root x u) (= u (Div h {k}))", _SIX),
        (f"(mul-of __root x u) (= u (Mul h {k}))", _SIXTH),
    ]


def _hardswish_fuse() -> tuple:
    rules = []
    guard = f'(= h {_H}) (= three 3.0) (= (dtype x) "FLOAT") (= s (shape x)) (= (shape __root) s)'
    for form, scale in _hardswish_forms():
        rules.append(
            fact(
                f"{form} {guard} {scale}",
                f"(union __root (Mul x (HardSigmoid x {1 / 6!r} 0.5)))",  # its facts: shape-unary
            )
        )
    hardswish = (
        f"(mul-of __root x g) (= g (HardSigmoid x a b)) {near('a', 1 / 6, 1e-6)} (= b 0.5) "
        f'(= (dtype x) "FLOAT") (= (shape __root) (shape x)) {OPSET_HARDSWISH}'
    )
    rules.append(fact(hardswish, "(union __root (HardSwish x))"))
    return tuple(rules)


def _leaky_from_max() -> tuple:
    """Max(x, x * a) and Max(x * a, x), the product in either operand order (mul-of)."""
    guard = (
        "(mul-of m x c) (= c (Scalar a da sa)) (> a 0.0) (< a 1.0) (= dt (dtype x)) "
        '(!= dt "DOUBLE") (!= dt "BFLOAT16") (= (shape __root) (shape x))'
    )
    return tuple(
        fact(f"(= __root {form}) {guard}", "(union __root (LeakyRelu x a))") for form in ("(Max x m)", "(Max m x)")
    )


#: relu(x) - a * relu(-x) = PRelu(x, a) and relu(x) + a * relu(-x) = PRelu(x, -a) (the Keras/TF export);
#: exact: for x < 0 the original computes 0 - a * (-x) (or 0 + a * (-x)), the same magnitude as a * x.
_PRELU = '(is-const a) (= dt (dtype x)) (dtype-group "activation" dt since) (= (shape __root) (shape x))'
_RELU_PARTS = "(= rx (Relu x)) (mul-of m n a) (= n (Relu (Neg x)))"
PRELU_FROM_RELU = (
    fact(f"(= __root (Sub rx m)) {_RELU_PARTS} {_PRELU}", "(union __root (PRelu x a))"),
    fact(f"(add-of __root rx m) {_RELU_PARTS} {_PRELU}", "(union __root (PRelu x (Neg a)))"),
)


RULES = [
    Rule(
        "gelu-forms",
        "activation",
        "exact",
        "eqsat:analysis",
        "gelu-half(y, x, h): y = x * 0.5 * h in the association orders exporters write, for the h of a Gelu "
        "fusion, gelu-h(h) (1 + erf(...) or 1 + tanh(...))",
        GELU_FORMS,
        ruleset="analysis",
    ),
    Rule(
        "gelu-fuse",
        "activation",
        "fp-reassoc",
        "onnxruntime:GeluFusion",
        "x * 0.5 * (1 + erf(x / sqrt 2)) -> Gelu(x) in the exporters' association orders (FLOAT, opset >= 20)",
        GELU_FUSE,
    ),
    Rule(
        "gelu-tanh-fuse",
        "activation",
        "fp-reassoc",
        "onnxruntime:FastGeluFusion",
        "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) -> Gelu(x, approximate=tanh) (FLOAT, opset >= 20)",
        GELU_TANH_FUSE,
    ),
    Rule(
        "scalar-broadcast-facts",
        "activation",
        "exact",
        "eqsat:analysis",
        "shape(Scalar(v, d, s)) = s and dtype d; shape(B(a, Scalar(v, d, []))) = shape(a) for Add/Sub/Mul/Div (the "
        "facts of the nodes gelu-decompose, bn-compose and the quant shifts build)",
        _scalar_facts(),
        ruleset="analysis",
    ),
    Rule(
        "gelu-decompose",
        "activation",
        "fp-reassoc",
        "onnx:Gelu function body",
        "Gelu(x) -> x * (1 + erf(x / sqrt 2)) * 0.5 (tanh form for approximate=tanh), FLOAT, for targets without Gelu",
        _gelu_decompose(),
    ),
    Rule(
        "hardswish-fuse",
        "activation",
        "fp-reassoc",
        "onnxruntime:HardSwish fusion; coreml:fuse_hard_swish",
        "x * Clip(x + 3, 0, 6) / 6 -> x * HardSigmoid(x, 1/6, 0.5), and x * HardSigmoid(x, 1/6, 0.5) -> "
        "HardSwish(x) at opset >= 14 (FLOAT)",
        _hardswish_fuse(),
    ),
    Rule(
        "leakyrelu-from-max",
        "activation",
        "exact",
        "tf2onnx:LeakyRelu (max(x, alpha * x))",
        "Max(x, Mul(x, a)) -> LeakyRelu(x, a) when 0 < a < 1 (FLOAT/FLOAT16: alpha is exact as float32)",
        _leaky_from_max(),
    ),
    Rule(
        "prelu-from-relu",
        "activation",
        "exact",
        "tf2onnx:PReLU (relu(x) - alpha * relu(-x))",
        "Relu(x) - a * Relu(-x) -> PRelu(x, a); Relu(x) + a * Relu(-x) -> PRelu(x, -a) for a constant a",
        PRELU_FROM_RELU,
    ),
    Rule(
        "prelu-to-leakyrelu",
        "activation",
        "exact",
        "coreml:prelu_to_lrelu",
        "PRelu(x, a) -> LeakyRelu(x, a) when the slope a is a single-element constant (FLOAT/FLOAT16)",
        (
            rw(
                "(PRelu x (Scalar a da sa))",
                "(LeakyRelu x a)",
                '(= dt (dtype x)) (dtype-group "activation" dt since)',
                "(= (shape __root) (shape x))",
            ),
        ),
    ),
    Rule(
        "clip-merge",
        "activation",
        "exact",
        "coreml:merge_consecutive_relus (clip); onnxoptimizer:fuse_consecutive_clips",
        "Clip(Clip(x, a, b), c, d) -> Clip(x, max(a, c), min(b, d)) when max(a, c) <= min(b, d)",
        (rw("(Clip (Clip x a b) c d)", "(Clip x (max a c) (min b d))", "(<= (max a c) (min b d))"),),
    ),
    Rule(
        "relu-clip-merge",
        "activation",
        "exact",
        "coreml:merge_consecutive_relus (clip)",
        "Relu(Clip(x, a, b)) and Clip(Relu(x), a, b) -> Clip(x, max(a, 0), b) when max(a, 0) <= b",
        (
            rw("(Relu (Clip x a b))", "(Clip x (max a 0.0) b)", "(<= (max a 0.0) b)"),
            rw("(Clip (Relu x) a b)", "(Clip x (max a 0.0) b)", "(<= (max a 0.0) b)"),
        ),
    ),
]
