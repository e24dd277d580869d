"""Quantization rules: Q/DQ pairs that cancel exactly, zero points canonicalized, per-tensor Q/DQ moved
across layout ops (so that pairs meet), rescale chains merged, and the lossy rewrites only on request.

    QuantizeLinear(DequantizeLinear(x, s, z, a), s, z, a)   -> x        x 8-bit, same scale, zero point and axis
    DequantizeLinear(QuantizeLinear(x, s, z), s, z)         -> Clip(x, (qmin - z) * s, (qmax - z) * s)
                                                               precision-changing: drops the rounding only;
                                                               s, z per tensor, s > 0
    QuantizeLinear(x, s, 0 (UINT8), a)                       -> QuantizeLinear(x, s, -, a)   0: a scalar or a
    DequantizeLinear(x, s, 0 (dtype of x), a)                -> DequantizeLinear(x, s, -, a) per-axis vector of zeros
    Transpose(DequantizeLinear(x, s, z), p)                  -> DequantizeLinear(Transpose(x, p), s, z)   s per tensor
    QuantizeLinear(Transpose(x, p), s, z)                    -> Transpose(QuantizeLinear(x, s, z), p)     s per tensor
    Reshape(DequantizeLinear(x, s, z), shape)                -> DequantizeLinear(Reshape(x, shape), s, z) s per tensor
    QuantizeLinear(Reshape(x, shape), s, z)                  -> Reshape(QuantizeLinear(x, s, z), shape)   s per tensor
    DequantizeLinear(QuantizeLinear(x, s, z UINT8, a), s, z UINT8, a)
                                                             <-> DequantizeLinear(QuantizeLinear(x, s, z - 128 INT8,
                                                             a), s, z - 128 INT8, a)
                                                                any 8-bit z (uint8 0 <-> int8 -128), per tensor or per
                                                                axis
    DequantizeLinear(W, s, z UINT8, a)                       -> DequantizeLinear(Cast(Cast(W, INT32) - 128, INT8), s,
    z - 128 INT8, a)
                                                                W a uint8 constant (folded when lowered)
    DequantizeLinear(QuantizeLinear(DequantizeLinear(x, s1, z1), s2, z2), s2, z2) -> DequantizeLinear(x, s1, z1)
                                                                s1 = k s2 (k a positive integer), the middle clamp never
                                                                triggers; so a rescale chain Q3(DQ(Q2(DQ(x)))) is
                                                                Q3(DQ(x))
                                                                the same with s1 / s2 not an integer:
                                                                precision-changing,
                                                                off by default (the intermediate rounding, <= s2 / 2,
                                                                dropped)

Why Q(DQ(x)) is exact: DQ computes (x - z) * s, Q divides by s, rounds and adds z back. For 8-bit x the
integer n = x - z has |n| <= 255, so the two float32 roundings leave n(1 + e) with |n e| < 255 * 2^-23,
far below 0.5: it rounds back to n, and the saturation is a no-op. The guards: x's dtype holds only
values exact in INT16 (the 8-bit types), the scale is positive and float32 (a float16 scale, opset 19,
overflows n * s above 256; a subnormal float32 scale, below 1.2e-38, would lose bits of n * s: no
quantizer writes one), and the pair's output dtype is x's.

What Q -> DQ computes: DQ(Q(x)) = (clamp(round(x / s) + z, qmin, qmax) - z) * s, i.e. x rounded to the grid
and clamped to [(qmin - z) * s, (qmax - z) * s]. Removing the pair outright would drop the clamp too, which is
arbitrarily wrong for x outside that range; `dq-q-drop` keeps it as a Clip, so the result differs from the
original by the rounding alone, at most s / 2 per element (`precision-changing`, off by default). It needs a
per-tensor scale and zero point (their values are the Clip's bounds) and an integer type with a known range
(8-bit, 16-bit, 4-bit; not the float8 types, which saturate differently). NaN inputs are the one exception to
the s / 2 bound: Q maps NaN to an integer, Clip keeps it NaN. Moving a
per-tensor Q/DQ across Transpose/Reshape is exact (elementwise with one scale and zero point); per-axis
scales would need their axis remapped and are left alone. Q/DQ never fold as constants (see
`eqsat.engine.egraph.NEVER_CONSTANT`): weight DQ nodes stay for the runtimes' QDQ fusions.

Why the zero-point shift is exact: with r = round(x / s), Q to uint8 with zero point z stores
clamp(r + z, 0, 255) and Q to int8 with zero point z - 128 stores clamp(r + z - 128, -128, 127): the same
clamp, offset by 128 (per axis: per channel, the same). DQ subtracts the zero point again, so both pairs give the same
integer n times
the same s: bit-identical, NaN and infinities included (ONNX Runtime and onnx.reference saturate them alike in
both types). The rule matches the DQ-of-Q pair, never a lone Q or DQ (that would change the type a neighbour
sees): a Q that something else also reads (a graph output, an opaque op) stays for that reader, and the DQ's
class gains the int8 pair; every consumer of the DQ sees the same float values. The extractor picks a
form per target (`[quant]` in extract/targets/*.toml: TensorRT takes int8 with zero point 0 only, TFLite-style
NPUs prefer int8). The weight form subtracts 128 from a uint8 constant in int32 (values -128..127, exact in int8);
lowering folds it into an int8 initializer.

Why rescale-merge is exact: DQ(x, s1, z1) is n * s1 in float32, n = x - z1 (|n| <= 255 for 8-bit x). When
s1 = k * s2 exactly for a positive integer k (tested in f64 on the stored float32 values: fmod(s1, s2) = 0,
which is exact), the middle Q computes n * s1 / s2 = n * k with two float32 roundings, a relative error below
2^-23: |n k| <= 65535 (the clamp guard below bounds it by the middle type's range), so the error is below
0.01 and the rounding gives n * k back. The guard (xmin - z1) * k + z2 >= qmin2 and (xmax - z1) * k + z2 <=
qmax2, over every value of x's type, makes the middle saturation a no-op. The middle DQ then computes
(n k) * s2 in float32: the same real number as n * s1, so the same float32 value. s2 must be a normal float32
(>= 2^-126: no bits of n * s2 lost) and s1 below 1e30 (n * s1 finite: an infinity would saturate the middle
Q). Only the middle pair is removed, so the first DQ and the outer Q keep their own parameters (the outer
scale may be per axis). Without an integer ratio the middle Q rounds to the s2 grid: dropping it changes
each value by at most s2 / 2 (`rescale-merge-lossy`, precision-changing); the clamp guard stays, since a
dropped saturation is not a bounded change. The same-scale requantize Q(DQ(x, s, z1), s, z2) is already one
op (an integer shift by z2 - z1, clamped) and has no rule.
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact, rw
from eqsat.engine.terms import FLT_MIN_NORMAL, MAX_SCALE

#: A per-tensor scale: a single-element constant.
PER_TENSOR = "(Scalar sv sd ss)"


def _sink(layout: str, params: str) -> tuple:
    """DQ below `layout` (Transpose/Reshape) moved above it, and Q above it moved below it. The new layout
    node gets the root's shape and x's dtype (Reshape), or the shape-transpose analysis derives both (Transpose)."""
    shape_fact = "(set (dtype t) dx) (set (shape t) sr)" if layout == "Reshape" else ""
    bind = "(= sr (shape __root))" if layout == "Reshape" else ""
    return (
        fact(
            f"(= __root ({layout} (DequantizeLinear x {PER_TENSOR} z a) {params})) (= dx (dtype x)) {bind}",
            f"(let t ({layout} x {params})) {shape_fact} (union __root (DequantizeLinear t {PER_TENSOR} z a))",
        ),
        fact(
            f"(= __root (QuantizeLinear ({layout} y {params}) {PER_TENSOR} z a)) (= dq (dtype __root)) "
            "(= sy (shape y))",
            f"(let q (QuantizeLinear y {PER_TENSOR} z a)) (set (dtype q) dq) (set (shape q) sy) "
            f"(union __root ({layout} q {params}))",
        ),
    )


#: Integer ranges of QuantizeLinear's output types, with their widths (float8 types saturate to their own ranges:
#: left alone): the `quant-range` facts (type, lo, hi, bits) the rules read.
QUANT_RANGES = {
    "UINT8": (0, 255, 8),
    "INT8": (-128, 127, 8),
    "UINT16": (0, 65535, 16),
    "INT16": (-32768, 32767, 16),
    "UINT4": (0, 15, 4),
    "INT4": (-8, 7, 4),
}
#: The shift between the 8-bit types: uint8 zero point z and int8 zero point z - 128 give the same pair.
SHIFT = 128.0
#: `quant-twin` facts (type, twin type, what the twin's zero point adds): the other 8-bit type of the same pair.
TWINS = (("UINT8", "INT8", -SHIFT), ("INT8", "UINT8", SHIFT))


def _quant_facts() -> Egglog:
    """The quant-range and quant-twin tables, asserted once a model has a QuantizeLinear."""
    ranges = [f'(quant-range "{t}" {float(lo)} {float(hi)} {bits})' for t, (lo, hi, bits) in QUANT_RANGES.items()]
    twins = [f'(quant-twin "{t}" "{n}" {shift})' for t, n, shift in TWINS]
    absent = "(zero-point (Absent) 0.0 (vec-empty))"  # an absent zero point is 0 (a Scalar's: constant-terms)
    return fact("(= q (QuantizeLinear x s z a))", " ".join([*ranges, *twins, absent]))


def _dq_q_drop() -> tuple:
    """DQ(Q(x)) -> Clip(x, (qmin - z) * s, (qmax - z) * s) for every output type of quant-range, zero point present
    or absent (0: zero-point). The bounds are computed in f64 from the stored scale and zero point; lowering rounds
    them once to x's dtype (the original computes (qmax - z) * s in the scale's dtype: the same value up to that
    rounding)."""
    return (
        fact(
            f"(= __root (DequantizeLinear q {PER_TENSOR} z a)) (= q (QuantizeLinear x {PER_TENSOR} z a)) "
            "(zero-point z zv zs) (= qt (dtype q)) (quant-range qt lo hi b) (> sv 0.0) (= dx (dtype x)) "
            "(= (dtype __root) dx)",
            "(union __root (Clip x (* (- lo zv) sv) (* (- hi zv) sv)))",
        ),
    )


#: DQ(Q(x, s, z, a), s, z, a), q its Q of type qt (an 8-bit type with a twin nt, z2 = z + sh).
_PAIR = (
    "(= __root (DequantizeLinear q s {dq} a)) (= q (QuantizeLinear x s {q} a)) (= qt (dtype q)) (quant-twin qt nt sh)"
)
_TWIN = "(let q2 (QuantizeLinear x s z2 a)) (set (dtype q2) nt) (union __root (DequantizeLinear q2 s z2 a))"


def _zero_point_shift() -> tuple:
    """DQ(Q(x, s, z, a), s, z, a) with an 8-bit zero point z gets the twin pair in the other 8-bit type with
    z -/+ 128: a scalar z as a new Scalar (an absent zero point is 0 of the pair's type: uint8 on the Q, the
    Q's type on the DQ), a per-axis z (a constant tensor) as a tensor computed at lowering; a new Q gets its
    twin's shape; a uint8 constant W under DQ gets its int8 twin W - 128 with z - 128. The facts of the shifted
    tensors come from the analysis rows (shape-unary for Cast, scalar-broadcast-facts for the rank-0 shift). A
    per-tensor zero point is read through zero-point (a Scalar's value and shape; an absent one is 0 of shape [],
    and a Q without one writes uint8): one row for the DQ's and the Q's, each a Scalar or absent, of one value."""
    return (
        fact(
            f"{_PAIR.format(dq='zd', q='zq')} (zero-point zd zv ds) (zero-point zq zv zs)",
            "(let z2 (Scalar (+ zv sh) nt zs)) " + _TWIN,
        ),
        fact(
            f"{_PAIR.format(dq='z', q='z')} (= z (Const k))",
            '(let z2 (Cast (Add (Cast z "INT32") (Scalar sh "INT32" (vec-empty))) nt)) ' + _TWIN,
        ),
        fact(
            "(= q2 (QuantizeLinear x s z2 a)) (= nt (dtype q2)) (= q (QuantizeLinear x s z a)) (= qt (dtype q)) "
            "(quant-twin qt nt sh) (= sq (shape q))",
            "(set (shape q2) sq)",
        ),
        fact(
            '(= __root (DequantizeLinear w s (Scalar zv "UINT8" zs) a)) (is-const w) (= (dtype w) "UINT8")',
            f'(let w8 (Cast (Sub (Cast w "INT32") (Scalar {SHIFT} "INT32" (vec-empty))) "INT8")) '
            f'(let z2 (Scalar (- zv {SHIFT}) "INT8" zs)) '
            "(union __root (DequantizeLinear w8 s z2 a))",
        ),
    )


def _rescale_merge(exact: bool) -> tuple:
    """DQ(Q(DQ(x, s1, z1, a1), s2, z2, a2), s2, z2, a2) -> DQ(x, s1, z1, a1): per-tensor float32 scales u = s1 and
    v = s2, x of an 8-bit type t1 and the middle grid of 8 or 16 bits (t2, quant-range), the middle clamp a no-op for
    every value of x's type: (lo1 - z1) * u / v + z2 >= lo2, likewise hi; u / v an integer (`exact`) or not. Zero
    points (p = z1, q = z2) present or absent (zero-point: 0, and a Q without one writes uint8)."""
    ratio = "(= (% u v) 0.0)" if exact else "(!= (% u v) 0.0)"
    s1, s2 = '(Scalar u "FLOAT" su)', '(Scalar v "FLOAT" sv)'
    return (
        rw(
            f"(DequantizeLinear m {s2} z2 a2)",
            "d",
            f"(= m (QuantizeLinear d {s2} z2 a2)) (= d (DequantizeLinear x {s1} z1 a1))",
            "(zero-point z1 p ps) (zero-point z2 q qs)",
            "(= t1 (dtype x)) (= t2 (dtype m)) (quant-range t1 l1 h1 8) (quant-range t2 l2 h2 b) (>= b 8)",
            f"(> u 0.0) (< u {MAX_SCALE}) (> v {FLT_MIN_NORMAL}) {ratio}",
            "(>= (+ (* (- l1 p) (/ u v)) q) l2) (<= (+ (* (- h1 p) (/ u v)) q) h2)",
        ),
    )


RULES = [
    Rule(
        "quant-tables",
        "quant",
        "exact",
        "eqsat:analysis",
        "quant-range(type, lo, hi, bits) for QuantizeLinear's integer output types and quant-twin(type, twin, "
        "shift) for the 8-bit pair (the tables dq-q-drop, rescale-merge and qdq-zero-point-shift read)",
        (_quant_facts(),),
        ruleset="analysis",
    ),
    Rule(
        "qdq-cancel",
        "quant",
        "exact",
        "onnxruntime:QDQ DoubleQDQPairsRemover; tflite:quantize-dequantize folding",
        "QuantizeLinear(DequantizeLinear(x, s, z, a), s, z, a) -> x for 8-bit x and a float32 scale s in [2^-126, "
        "1e30] (smaller, (x - z) * s loses bits; larger, it overflows where Q saturates)",
        (
            rw(
                "(QuantizeLinear (DequantizeLinear x s z a) s z a)",
                "x",
                '(= dq (dtype x)) (lossless-cast dq "INT16") (= (dtype __root) dq)',
                f'(= s (Scalar v "FLOAT" sv)) (>= v {FLT_MIN_NORMAL}) (<= v {MAX_SCALE})',
            ),
            rw(
                "(QuantizeLinear (DequantizeLinear x s z a) s z a)",
                "x",
                '(= dq (dtype x)) (lossless-cast dq "INT16") (= (dtype __root) dq)',
                '(= s (Const k)) (= (dtype s) "FLOAT") (moderate s)',
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "dq-q-drop",
        "quant",
        "precision-changing",
        "onnxruntime:QDQ removal (drops the quantization)",
        "DequantizeLinear(QuantizeLinear(x, s, z), s, z) -> Clip(x, (qmin - z) * s, (qmax - z) * s) for a per-tensor "
        "s > 0 and z (values change by the rounding to the grid only: at most s / 2)",
        _dq_q_drop(),
        ruleset="simplify",
    ),
    Rule(
        "qdq-zero-point-default",
        "quant",
        "exact",
        "onnx:QuantizeLinear/DequantizeLinear (zero point defaults to 0)",
        "QuantizeLinear(x, s, 0 of UINT8) -> QuantizeLinear(x, s); DequantizeLinear(x, s, 0 of x's dtype) -> "
        "DequantizeLinear(x, s) (0: a scalar, or a per-axis zero point of zeros)",
        (
            rw("(QuantizeLinear x s z a)", "(QuantizeLinear x s (Absent) a)", "(splat z 0.0)", '(= (dtype z) "UINT8")'),
            rw(
                "(DequantizeLinear x s z a)",
                "(DequantizeLinear x s (Absent) a)",
                "(splat z 0.0)",
                "(= (dtype x) (dtype z))",
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "qdq-sink-transpose",
        "quant",
        "exact",
        "onnxruntime:QDQ propagation (Transpose); glow:sink-transpose",
        "Transpose(DequantizeLinear(x, s, z), p) -> DequantizeLinear(Transpose(x, p), s, z) and "
        "QuantizeLinear(Transpose(y, p), s, z) -> Transpose(QuantizeLinear(y, s, z), p) for a per-tensor scale",
        _sink("Transpose", "p"),
    ),
    Rule(
        "qdq-sink-reshape",
        "quant",
        "exact",
        "onnxruntime:QDQ propagation (Reshape)",
        "Reshape(DequantizeLinear(x, s, z), shape) -> DequantizeLinear(Reshape(x, shape), s, z) and "
        "QuantizeLinear(Reshape(y, shape), s, z) -> Reshape(QuantizeLinear(y, s, z), shape) for a per-tensor scale",
        _sink("Reshape", "shp az"),
    ),
    Rule(
        "qdq-zero-point-shift",
        "quant",
        "exact",
        "onnxruntime:QDQS8ToU8Transformer (int8 Q/DQ pair -> uint8, zero point + 128), in both directions",
        "DequantizeLinear(QuantizeLinear(x, s, z UINT8, a), s, z UINT8, a) <-> the same pair in INT8 with zero point "
        "z - 128 (uint8 0 <-> int8 -128; an absent zero point is the type's 0; per-axis z: computed at lowering); "
        "DequantizeLinear(W, s, z UINT8) -> DequantizeLinear(W - 128 as INT8, s, z - 128 INT8) for a constant W",
        _zero_point_shift(),
    ),
    Rule(
        "rescale-merge",
        "quant",
        "exact",
        "glow:OptimizeQuantization (merge rescale chains)",
        "DequantizeLinear(QuantizeLinear(DequantizeLinear(x, s1, z1), s2, z2), s2, z2) -> DequantizeLinear(x, s1, z1) "
        "for 8-bit x, per-tensor float32 scales with s1 = k s2 (k a positive integer) and no saturation in the middle",
        _rescale_merge(exact=True),
        ruleset="simplify",
    ),
    Rule(
        "rescale-merge-lossy",
        "quant",
        "precision-changing",
        "glow:OptimizeQuantization (merge rescale chains)",
        "DequantizeLinear(QuantizeLinear(DequantizeLinear(x, s1, z1), s2, z2), s2, z2) -> DequantizeLinear(x, s1, z1) "
        "when s1 / s2 is not an integer and the middle never saturates (drops the rounding to the s2 grid: <= s2 / 2)",
        _rescale_merge(exact=False),
        ruleset="simplify",
    ),
]
