"""Cast rules: no-op casts removed, lossless chains fused, integer truncation chains fused, casts moved
across Reshape; fp16 round trips only when allowed.

    Cast(x, t)                 -> x             when dtype(x) = t
    Cast(Cast(x, t1), t2)      -> Cast(x, t2)   when dtype(x) -> t1 is exact for every value
    Cast(Cast(x, t1), t2)      -> Cast(x, t2)   x integer, t1 and t2 integer, bits(t2) <= bits(t1)
    Cast(Reshape(x, s), t)     -> Reshape(Cast(x, t), s)
    Cast(Cast(x, FLOAT16), FLOAT) -> x          (precision-changing: off by default)
    Cast(Cast(x, FLOAT), FLOAT16) -> Cast(x, FLOAT16)   x an integer (also via DOUBLE), see below
    Cast(B(Cast(a, FLOAT), Cast(b, FLOAT)), FLOAT16) -> B(a, b)   a, b FLOAT16; B in Add, Sub, Mul, Div
    Cast(Sqrt(Cast(a, FLOAT)), FLOAT16) -> Sqrt(a),  Cast(Pow(Cast(a, FLOAT), 2), FLOAT16) -> Mul(a, a)

Integer casts keep the low bits (two's complement wrap, as onnxruntime's static_cast): truncating to t1
and then to a type no wider than t1 keeps the same low bits(t2) bits as truncating to t2 directly, so
int32 -> uint8 -> int8 is Cast(x, INT8), while int32 -> int8 -> int16 is not (the sign of bit 7 is
extended). x must be an integer (or bool) of at most 32 bits (the `lossless-cast x INT64` fact): a float x
truncated to t1 in range but out of t2's range has no defined direct cast. Chains through a float type are
fused only when lossless (int8 -> fp16 -> fp32 is; fp32 -> fp16 -> fp32 and fp32 -> fp16 -> bool are not:
fp16 rounds 1e-8 to 0, so the bool differs). Casts sink through Transpose with the other unary ops
(layout: transpose-sink-unary).

fp16 arithmetic computed in fp32 and rounded back (the islands mixed-precision converters leave around
LayerNorm) is the fp16 operation itself: float32 has p' = 24 significant bits, float16 p = 11, and for
+, -, *, / and sqrt the double rounding (exact -> fp32 -> fp16) equals one rounding whenever p' >= 2p + 2
(Figueroa, "When is double rounding innocuous?", SIGNUM 1995); fp32's exponent range holds every fp16
value, subnormals included, so overflow to inf happens at the same results. x * x of an fp16 x is exact
in fp32 (22 bits), so Pow(x, 2) rounded to fp16 is the fp16 Mul(x, x) (not the fp16 Pow: onnxruntime's is
off by an ulp on about 5% of BERT's LayerNorm values); other exponents are not covered (powf is not
correctly rounded).
BFLOAT16 is left out: its subnormals are fp32's, where fp32 has no spare bits.

An integer cast to FLOAT16 through FLOAT (or DOUBLE) is the direct cast: the first cast is exact below 2^24
(2^53), so one rounding happens either way; an integer the first cast rounds is at least 2^24, far above
FLOAT16's largest finite value (65504: anything from 65520 up rounds to inf), so both give the same
infinity. Not for BFLOAT16, whose range covers those integers: rounding twice (to 24 bits, then 8) can
differ from rounding once.
onnxruntime's CPU provider has no fp16 kernels for these ops: it computes them in fp32 and drops the roundings
between consecutive ones, so under onnxruntime an fp16 graph can differ from the ONNX semantics by an ulp where
its Casts were explicit; the reference evaluator gives bit-identical outputs (bert_l2_h128_fp16_mixed).
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, rw

#: Integer dtypes and their widths in bits.
INT_BITS = {"INT8": 8, "UINT8": 8, "INT16": 16, "UINT16": 16, "INT32": 32, "UINT32": 32, "INT64": 64, "UINT64": 64}
#: (t1, t2) with Cast(Cast(x, t1), t2) = Cast(x, t2) for every integer x (t1 != t2).
TRUNCATING_PAIRS = tuple((a, b) for a in INT_BITS for b in INT_BITS if a != b and INT_BITS[b] <= INT_BITS[a])

#: Integers a float cast may round (narrower ones are exact in FLOAT: cast-chain-lossless covers them).
WIDE_INTS = ("INT32", "UINT32", "INT64", "UINT64")

#: Cast(B(Cast(a, FLOAT), Cast(b, FLOAT)), FLOAT16) -> B(a, b) for B in Add, Sub, Mul, Div (`arith`: fp16 binary ops
#: that equal their fp32 computation rounded once to fp16, double rounding innocuous), and Sqrt, and Pow(x, 2) as x * x.
_FP16 = '(= (dtype a) "FLOAT16")'
NARROW_ARITH = (
    rw(
        '(Cast (Binary op (Cast a "FLOAT") (Cast b "FLOAT")) "FLOAT16")',
        "(Binary op a b)",
        "(arith op)",
        _FP16,
        '(= (dtype b) "FLOAT16")',
    ),
    rw('(Cast (Sqrt (Cast a "FLOAT")) "FLOAT16")', "(Sqrt a)", _FP16),
    # the exponent must not broadcast a up: a 2.0 of higher rank than a makes Pow's output of its rank
    rw(
        '(Cast (Pow (Cast a "FLOAT") (Scalar 2.0 de se)) "FLOAT16")',
        "(Mul a a)",
        _FP16,
        "(<= (vec-length se) (vec-length (shape a)))",
    ),
)


RULES = [
    Rule(
        "cast-noop",
        "cast",
        "exact",
        "onnxoptimizer:eliminate_nop_cast",
        "Cast(x, t) -> x when dtype(x) = t",
        (rw("(Cast x t)", "x", "(= (dtype x) t)"),),
        ruleset="simplify",
    ),
    Rule(
        "cast-chain-lossless",
        "cast",
        "exact",
        "coreml:merge_consecutive_casts",
        "Cast(Cast(x, t1), t2) -> Cast(x, t2) when every value of dtype(x) is exact in t1",
        (rw("(Cast (Cast x t1) t2)", "(Cast x t2)", "(lossless-cast (dtype x) t1)"),),
        ruleset="simplify",
    ),
    Rule(
        "cast-fp16-roundtrip",
        "cast",
        "precision-changing",
        "ort:cast-elimination (fp16)",
        "Cast(Cast(x, FLOAT16|BFLOAT16), FLOAT) -> x when dtype(x) = FLOAT (drops the fp16 rounding)",
        (
            rw('(Cast (Cast x "FLOAT16") "FLOAT")', "x", '(= (dtype x) "FLOAT")'),
            rw('(Cast (Cast x "BFLOAT16") "FLOAT")', "x", '(= (dtype x) "FLOAT")'),
        ),
        ruleset="simplify",
    ),
    Rule(
        "cast-int-truncate-chain",
        "cast",
        "exact",
        "coreml:merge_consecutive_casts (integer truncation)",
        "Cast(Cast(x, t1), t2) -> Cast(x, t2) for integer x, t1, t2 with bits(t2) <= bits(t1) (wrap-around keeps the "
        "low bits)",
        (
            rw(
                "(Cast (Cast x t1) t2)",
                "(Cast x t2)",
                '(truncating-cast t1 t2) (= dx (dtype x)) (lossless-cast dx "INT64")',
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "cast-int-via-float-to-half",
        "cast",
        "exact",
        "coreml:merge_consecutive_casts (int -> fp32 -> fp16)",
        "Cast(Cast(x, FLOAT|DOUBLE), FLOAT16) -> Cast(x, FLOAT16) for integer x of 32 or 64 bits (every integer the "
        "first cast rounds overflows FLOAT16 either way; not BFLOAT16)",
        (
            rw(
                '(Cast (Cast x m) "FLOAT16")',
                '(Cast x "FLOAT16")',
                '(dtype-group "float-or-double" m o) (= d (dtype x)) (wide-int d)',
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "cast-sink-reshape",
        "cast",
        "exact",
        "onnxruntime:CastElimination (reshape); coreml:cast_optimization",
        "Cast(Reshape(x, s), t) -> Reshape(Cast(x, t), s)",
        (rw("(Cast (Reshape x s z) t)", "(Reshape (Cast x t) s z)"),),
    ),
    Rule(
        "cast-fp16-arith",
        "cast",
        "exact",
        "eqsat (innocuous double rounding: Figueroa 1995); onnxconverter-common float16 islands",
        "Cast(B(Cast(a, FLOAT), Cast(b, FLOAT)), FLOAT16) -> B(a, b) for fp16 a, b and B in Add/Sub/Mul/Div (and Sqrt; "
        "Pow(., 2) as Mul, the 2 of rank at most a's): fp32 has enough bits that rounding twice equals rounding once",
        NARROW_ARITH,
        ruleset="simplify",
    ),
]
