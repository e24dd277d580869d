"""Cast rules: no-op casts removed, lossless chains fused; fp16 round trips only when allowed.

    Cast(x, t)                 -> x             when dtype(x) = t
    Cast(Cast(x, t1), t2)      -> Cast(x, t2)   when dtype(x) -> t1 is exact for every value
    Cast(Cast(x, FLOAT16), FLOAT) -> x          (precision-changing: off by default)
"""

from __future__ import annotations

from eqsat.rule import Rule, rw

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
]
