"""Quantization rules: Q/DQ pairs that cancel exactly, zero points canonicalized, per-tensor Q/DQ moved
across layout ops (so that pairs meet), and the lossy Q -> DQ removal only on request.

    QuantizeLinear(DequantizeLinear(x, s, z, a), s, z, a)   -> x        x 8-bit, same scale, zero point and axis
    DequantizeLinear(QuantizeLinear(x, s, z), s, z)         -> Clip(x, (qmin - z) * s, (qmax - z) * s)
                                                               precision-changing: drops the rounding only;
                                                               s, z per tensor, s > 0
    QuantizeLinear(x, s, 0 (UINT8), a)                       -> QuantizeLinear(x, s, -, a)
    DequantizeLinear(x, s, 0 (dtype of x), a)                -> DequantizeLinear(x, s, -, a)
    Transpose(DequantizeLinear(x, s, z), p)                  -> DequantizeLinear(Transpose(x, p), s, z)   s per tensor
    QuantizeLinear(Transpose(x, p), s, z)                    -> Transpose(QuantizeLinear(x, s, z), p)     s per tensor
    Reshape(DequantizeLinear(x, s, z), shape)                -> DequantizeLinear(Reshape(x, shape), s, z) s per tensor
    QuantizeLinear(Reshape(x, shape), s, z)                  -> Reshape(QuantizeLinear(x, s, z), shape)   s per tensor

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
`eqsat.egraph.NEVER_CONSTANT`): weight DQ nodes stay for the runtimes' QDQ fusions.
"""

from __future__ import annotations

from eqsat.rule import Rule, fact, rw

#: A per-tensor scale: a single-element constant.
PER_TENSOR = "(Scalar sv sd ss)"


def _sink(layout: str, params: str) -> tuple:
    """DQ below `layout` (Transpose/Reshape) moved above it, and Q above it moved below it. The new layout
    node gets the root's shape (Reshape) or the shape-transpose analysis derives it (Transpose)."""
    shape_fact = "(set (shape t) sr)" if layout == "Reshape" else ""
    bind = "(= sr (shape __root))" if layout == "Reshape" else ""
    return (
        fact(f"(= __root ({layout} (DequantizeLinear x {PER_TENSOR} z a) {params})) (= dx (dtype x)) {bind}",
             f"(let t ({layout} x {params})) (set (dtype t) dx) {shape_fact} "
             f"(union __root (DequantizeLinear t {PER_TENSOR} z a))"),
        fact(f"(= __root (QuantizeLinear ({layout} y {params}) {PER_TENSOR} z a)) (= dq (dtype __root)) "
             "(= sy (shape y))",
             f"(let q (QuantizeLinear y {PER_TENSOR} z a)) (set (dtype q) dq) (set (shape q) sy) "
             f"(union __root ({layout} q {params}))"),
    )


#: Integer ranges of QuantizeLinear's output types (float8 types saturate to their own ranges: left alone).
QUANT_RANGES = {"UINT8": (0, 255), "INT8": (-128, 127), "UINT16": (0, 65535), "INT16": (-32768, 32767),
                "UINT4": (0, 15), "INT4": (-8, 7)}


def _dq_q_drop() -> tuple:
    """DQ(Q(x)) -> Clip(x, (qmin - z) * s, (qmax - z) * s): one rule per output type, zero point present or
    absent (0). The bounds are computed in f64 from the stored scale and zero point; lowering rounds them once
    to x's dtype (the original computes (qmax - z) * s in the scale's dtype: the same value up to that rounding)."""
    rules = []
    for qt, (lo, hi) in QUANT_RANGES.items():
        for zp, zv in (("(Scalar zv zd zs)", "zv"), ("(Absent)", "0.0")):
            q = f"(QuantizeLinear x {PER_TENSOR} {zp} a)"
            clip = f"(Clip x (* (- {float(lo)} {zv}) sv) (* (- {float(hi)} {zv}) sv))"
            rules.append(fact(f"(= __root (DequantizeLinear q {PER_TENSOR} {zp} a)) (= q {q}) (= (dtype q) \"{qt}\") "
                              "(> sv 0.0) (= dx (dtype x)) (= (dtype __root) dx)",
                              f"(union __root {clip})"))
    return tuple(rules)


RULES = [
    Rule("qdq-cancel", "quant", "exact", "onnxruntime:QDQ DoubleQDQPairsRemover; tflite:quantize-dequantize folding",
         "QuantizeLinear(DequantizeLinear(x, s, z, a), s, z, a) -> x for 8-bit x and a positive float32 scale s",
         (rw("(QuantizeLinear (DequantizeLinear x s z a) s z a)", "x",
             "(= dq (dtype x)) (lossless-cast dq \"INT16\") (= (dtype __root) dq) (positive s)",
             "(= (dtype s) \"FLOAT\")"),),
         ruleset="simplify"),
    Rule("dq-q-drop", "quant", "precision-changing", "onnxruntime:QDQ removal (drops the quantization)",
         "DequantizeLinear(QuantizeLinear(x, s, z), s, z) -> Clip(x, (qmin - z) * s, (qmax - z) * s) for a per-tensor "
         "s > 0 and z (values change by the rounding to the grid only: at most s / 2)",
         _dq_q_drop(), ruleset="simplify"),
    Rule("qdq-zero-point-default", "quant", "exact", "onnx:QuantizeLinear/DequantizeLinear (zero point defaults to 0)",
         "QuantizeLinear(x, s, 0 of UINT8) -> QuantizeLinear(x, s); DequantizeLinear(x, s, 0 of x's dtype) -> "
         "DequantizeLinear(x, s)",
         (rw('(QuantizeLinear x s (Scalar 0.0 "UINT8" sz) a)', "(QuantizeLinear x s (Absent) a)"),
          rw("(DequantizeLinear x s (Scalar 0.0 dz sz) a)", "(DequantizeLinear x s (Absent) a)", "(= (dtype x) dz)")),
         ruleset="simplify"),
    Rule("qdq-sink-transpose", "quant", "exact", "onnxruntime:QDQ propagation (Transpose); glow:sink-transpose",
         "Transpose(DequantizeLinear(x, s, z), p) -> DequantizeLinear(Transpose(x, p), s, z) and "
         "QuantizeLinear(Transpose(y, p), s, z) -> Transpose(QuantizeLinear(y, s, z), p) for a per-tensor scale",
         _sink("Transpose", "p")),
    Rule("qdq-sink-reshape", "quant", "exact", "onnxruntime:QDQ propagation (Reshape)",
         "Reshape(DequantizeLinear(x, s, z), shape) -> DequantizeLinear(Reshape(x, shape), s, z) and "
         "QuantizeLinear(Reshape(y, shape), s, z) -> Reshape(QuantizeLinear(y, s, z), shape) for a per-tensor scale",
         _sink("Reshape", "shp az")),
]
