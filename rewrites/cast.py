"""Cast rules: no-op casts removed, lossless chains fused, integer truncation chains fused, casts moved
across Reshape; fp16 round trips only when allowed.

    Cast(x, t)                 -> x             when dtype(x) = t
    Cast(Cast(x, t1), t2)      -> Cast(x, t2)   when dtype(x) -> t1 is exact for every value
    Cast(Cast(x, t1), t2)      -> Cast(x, t2)   x integer, t1 and t2 integer, bits(t2) <= bits(t1)
    Cast(Reshape(x, s), t)     -> Reshape(Cast(x, t), s)
    Cast(Cast(x, FLOAT16), FLOAT) -> x          (precision-changing: off by default)

Integer casts keep the low bits (two's complement wrap, as onnxruntime's static_cast): truncating to t1
and then to a type no wider than t1 keeps the same low bits(t2) bits as truncating to t2 directly, so
int32 -> uint8 -> int8 is Cast(x, INT8), while int32 -> int8 -> int16 is not (the sign of bit 7 is
extended). x must be an integer (or bool) of at most 32 bits (the `lossless-cast x INT64` fact): a float x
truncated to t1 in range but out of t2's range has no defined direct cast. Chains through a float type are
fused only when lossless (int8 -> fp16 -> fp32 is; fp32 -> fp16 -> fp32 and fp32 -> fp16 -> bool are not:
fp16 rounds 1e-8 to 0, so the bool differs). Casts sink through Transpose with the other unary ops
(layout: transpose-sink-unary).
"""

from __future__ import annotations

from eqsat.rule import Rule, rw

#: Integer dtypes and their widths in bits.
INT_BITS = {"INT8": 8, "UINT8": 8, "INT16": 16, "UINT16": 16, "INT32": 32, "UINT32": 32, "INT64": 64, "UINT64": 64}
#: (t1, t2) with Cast(Cast(x, t1), t2) = Cast(x, t2) for every integer x (t1 != t2).
TRUNCATING_PAIRS = tuple((a, b) for a in INT_BITS for b in INT_BITS if a != b and INT_BITS[b] <= INT_BITS[a])

RULES = [
    Rule("cast-noop", "cast", "exact", "onnxoptimizer:eliminate_nop_cast",
         "Cast(x, t) -> x when dtype(x) = t",
         (rw("(Cast x t)", "x", "(= (dtype x) t)"),), ruleset="simplify"),
    Rule("cast-chain-lossless", "cast", "exact", "coreml:merge_consecutive_casts",
         "Cast(Cast(x, t1), t2) -> Cast(x, t2) when every value of dtype(x) is exact in t1",
         (rw("(Cast (Cast x t1) t2)", "(Cast x t2)", "(lossless-cast (dtype x) t1)"),), ruleset="simplify"),
    Rule("cast-fp16-roundtrip", "cast", "precision-changing", "ort:cast-elimination (fp16)",
         "Cast(Cast(x, FLOAT16|BFLOAT16), FLOAT) -> x when dtype(x) = FLOAT (drops the fp16 rounding)",
         (rw('(Cast (Cast x "FLOAT16") "FLOAT")', "x", '(= (dtype x) "FLOAT")'),
          rw('(Cast (Cast x "BFLOAT16") "FLOAT")', "x", '(= (dtype x) "FLOAT")')), ruleset="simplify"),
    Rule("cast-int-truncate-chain", "cast", "exact", "coreml:merge_consecutive_casts (integer truncation)",
         "Cast(Cast(x, t1), t2) -> Cast(x, t2) for integer x, t1, t2 with bits(t2) <= bits(t1) (wrap-around keeps the "
         "low bits)",
         tuple(rw(f'(Cast (Cast x "{a}") "{b}")', f'(Cast x "{b}")', '(= dx (dtype x)) (lossless-cast dx "INT64")')
               for a, b in TRUNCATING_PAIRS), ruleset="simplify"),
    Rule("cast-sink-reshape", "cast", "exact", "onnxruntime:CastElimination (reshape); coreml:cast_optimization",
         "Cast(Reshape(x, s), t) -> Reshape(Cast(x, t), s)",
         (rw("(Cast (Reshape x s z) t)", "(Reshape (Cast x t) s z)"),)),
]
