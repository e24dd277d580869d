"""Pool rules: explicit padding folded into the pool's own pads.

    AveragePool(Pad(x, p, constant 0), pads, count_include_pad=1) -> AveragePool(x, pads + spatial p)
    MaxPool(Pad(x, p, constant -inf), pads)                       -> MaxPool(x, pads + spatial p)

Conditions (both): p pads only the spatial axes (0 on N and C, before and after) and is non-negative (a negative
pad crops), the pool has auto_pad NOTSET, ceil_mode 0 (ceil mode admits windows that run past the end padding,
which the runtimes size differently) and no dilation, and every summed pad stays below its kernel size (what
the runtimes require of pool pads: a window then always holds an element of x). Pad's pads and value are an
attribute before opset 11 and inputs from then on: the term language reads both (a Pad with an `axes` input,
opset 18, stays opaque). Any rank: the checks read the vectors (vec-remove for the spatial pads, a map for
"every pad >= 0", the list function sum-of for the summed pads and their distance to the kernel), computed once
per pool in the analysis rows of pad-pool-sites.

Why these values: AveragePool with count_include_pad = 1 averages padded positions as zeros over the whole kernel,
exactly what it computes over an explicit zero Pad; with count_include_pad = 0 the divisor counts only x's
elements, so a zero Pad (counted) differs from the pool's own padding (not counted): declined. MaxPool's own
padding is -inf (never the maximum): only a -inf Pad folds. onnxoptimizer's fuse_pad_into_pool and onnxruntime's
PadFusion also fold a ZERO Pad into MaxPool, which is wrong wherever a window's values are all negative (the
explicit zero is the maximum there; the pool's padding is not): tests/test_rules_pool.py checks it does not fire.
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact

FAMILY = "pool"


def _map(fn: str, arg: int, v: str) -> str:
    """v with fn(arg, .) applied to each element."""
    return f'(unstable-vec-map (unstable-fn "{fn}" {arg}) {v})'


#: pp pads x [N, C, spatial...] (n = |ks| spatial axes) on the spatial axes only (0 on N and C, before and after)
#: and never crops (every pad >= 0); dl is absent or all 1 (no dilation); sp: pp's spatial pads (begins, ends).
_CHECKS = (
    "(= n (vec-length ks)) (= (vec-length pp) (+ 4 (* 2 n))) (= (vec-get pp 0) 0) (= (vec-get pp 1) 0) "
    f"(= (vec-get pp (+ n 2)) 0) (= (vec-get pp (+ n 3)) 0) (= pp {_map('max', 0, 'pp')}) "
    f"(= dl {_map('max', 1, _map('min', 1, 'dl'))}) "
    "(= sp (vec-remove (vec-remove (vec-remove (vec-remove pp (+ n 3)) (+ n 2)) 1) 0))"
)
_SITE = "(pool-pad y xp dl ks pc x sp)"
#: pool-pad(y, xp, dl, ks, pc, x, sp): y pools xp = Pad(x, pp) (a zero Pad under an AveragePool counting pads, a
#: -inf one under a MaxPool) with auto_pad NOTSET, ceil_mode 0, dilations dl, kernel ks and pads pc; sp: pp's
#: spatial pads. pool-sum(..., s): s the pads the pool would have (pc + sp). Each row that sets a relation also
#: asks for the sum the next step reads: pc + sp, and the kernel sizes (twice) minus s.
_SUM_NEED = "(need-sum-of pc sp)"


def _pool_sum(s: str) -> str:
    return f"(pool-sum y xp dl ks pc x {s}) (need-sum-of (vec-append ks ks) {_map('*', -1, s)})"


SITES = (
    fact(
        f'(= y (AveragePool xp "NOTSET" 0 dl ks pc st 1)) (= xp (Pad x pp 0.0 "constant")) {_CHECKS}',
        f"{_SITE} {_SUM_NEED}",
    ),
    fact(
        f'(= y (MaxPool xp "NOTSET" 0 dl ks pc st so)) (= xp (Pad x pp -inf "constant")) {_CHECKS}',
        f"{_SITE} {_SUM_NEED}",
    ),
    fact(f"{_SITE} (= pc (vec-empty))", _pool_sum("sp")),
    fact(f"{_SITE} (= s (sum-of pc sp))", _pool_sum("s")),
)


def _pad_pool(pool: str, merged: str) -> Egglog:
    """pool -> merged (the same pool over x with pads s) when every summed pad s[i] is below its kernel size
    ks[i mod n]: ks (twice) - s is at least 1 everywhere."""
    return fact(
        f"(pool-sum y xp dl ks pc x s) (= y {pool}) (= d (sum-of (vec-append ks ks) {_map('*', -1, 's')})) "
        f"(= d {_map('max', 1, 'd')})",
        f"(union y {merged})",
    )


RULES = [
    Rule(
        "pad-pool-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "pool-pad(y, ...) for AveragePool(Pad(x, p, constant 0), count_include_pad=1) and MaxPool(Pad(x, p, constant "
        "-inf)) with p 0 on N and C and non-negative, auto_pad NOTSET, ceil_mode 0, no dilation (any rank); "
        "pool-sum: the pads the merged pool would have",
        SITES,
        ruleset="analysis",
    ),
    Rule(
        "pad-avgpool-merge",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_pad_into_pool; onnxruntime:PadFusion",
        "AveragePool(Pad(x, p, constant 0), pads, count_include_pad=1) -> AveragePool(x, pads + spatial p) for p 0 on "
        "N and C and non-negative, auto_pad NOTSET, ceil_mode 0, no dilation, summed pads below the kernel",
        (
            _pad_pool(
                '(AveragePool xp "NOTSET" 0 dl ks pc st 1)',
                '(AveragePool x "NOTSET" 0 dl ks s st 1)',
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "pad-maxpool-merge",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_pad_into_pool (-inf pads only)",
        "MaxPool(Pad(x, p, constant -inf), pads) -> MaxPool(x, pads + spatial p) (same conditions; a zero Pad never: "
        "MaxPool pads with -inf)",
        (_pad_pool('(MaxPool xp "NOTSET" 0 dl ks pc st so)', '(MaxPool x "NOTSET" 0 dl ks s st so)'),),
        ruleset="simplify",
    ),
]
