"""Pool rules: explicit padding folded into the pool's own pads.

    AveragePool(Pad(x, p, constant 0), pads, count_include_pad=1) -> AveragePool(x, pads + spatial p)
    MaxPool(Pad(x, p, constant -inf), pads)                       -> MaxPool(x, pads + spatial p)

Conditions (both): p pads only the spatial axes (0 on N and C, before and after) and is non-negative (a negative
pad crops), the pool has auto_pad NOTSET, ceil_mode 0 (ceil mode admits windows that run past the end padding,
which the runtimes size differently) and no dilation, and every summed pad stays below its kernel size (what
the runtimes require of pool pads: a window then always holds an element of x). Pad's pads and value are an
attribute before opset 11 and inputs from then on: the term language reads both (a Pad with an `axes` input,
opset 18, stays opaque).

Why these values: AveragePool with count_include_pad = 1 averages padded positions as zeros over the whole kernel,
exactly what it computes over an explicit zero Pad; with count_include_pad = 0 the divisor counts only x's
elements, so a zero Pad (counted) differs from the pool's own padding (not counted): declined. MaxPool's own
padding is -inf (never the maximum): only a -inf Pad folds. onnxoptimizer's fuse_pad_into_pool and onnxruntime's
PadFusion also fold a ZERO Pad into MaxPool, which is wrong wherever a window's values are all negative (the
explicit zero is the maximum there; the pool's padding is not): tests/test_rules_pool.py checks it does not fire.
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, fact

FAMILY = "pool"
#: Ranks of the padded input (1 to 3 spatial axes).
POOL_RANKS = (3, 4, 5)


def _no_dilation(dl: str) -> str:
    """Guard: dilations absent or all 1."""
    return f'(= {dl} (unstable-vec-map (unstable-fn "max" 1) (unstable-vec-map (unstable-fn "min" 1) {dl})))'


def _pad_pool(op: str, value: str, tail: str) -> tuple:
    """op(Pad(x, pp, value), NOTSET, ceil 0, dl, ks, pc, st, *tail) -> op(x, ..., pc + spatial pp, ...) per rank."""
    rules = []
    for r in POOL_RANKS:
        n = r - 2
        zero = " ".join(f"(= (vec-get pp {i}) 0)" for i in (0, 1, r, r + 1))
        nonneg = " ".join(f"(>= (vec-get pp {i}) 0)" for i in [*range(2, r), *range(r + 2, 2 * r)])
        spatial = [f"(vec-get pp {2 + i})" for i in range(n)] + [f"(vec-get pp {r + 2 + i})" for i in range(n)]
        base = (
            f'(= y ({op} xp "NOTSET" 0 dl ks pc st {tail})) (= xp (Pad x pp {value} "constant")) '
            f"(= (vec-length pp) {2 * r}) (= (vec-length ks) {n}) {zero} {nonneg} {_no_dilation('dl')}"
        )
        for summed, guard in (
            (spatial, "(= pc (vec-empty))"),
            ([f"(+ (vec-get pc {i}) {p})" for i, p in enumerate(spatial)], f"(= (vec-length pc) {2 * n})"),
        ):
            below = " ".join(f"(< {summed[i]} (vec-get ks {i % n}))" for i in range(2 * n))
            rules.append(
                fact(
                    f"{base} {guard} {below}",
                    f'(union y ({op} x "NOTSET" 0 dl ks (vec-of {" ".join(summed)}) st {tail}))',
                )
            )
    return tuple(rules)


RULES = [
    Rule(
        "pad-avgpool-merge",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_pad_into_pool; onnxruntime:PadFusion",
        "AveragePool(Pad(x, p, constant 0), pads, count_include_pad=1) -> AveragePool(x, pads + spatial p) for p 0 on "
        "N and C and non-negative, auto_pad NOTSET, ceil_mode 0, no dilation, summed pads below the kernel",
        _pad_pool("AveragePool", "0.0", "1"),
        ruleset="simplify",
    ),
    Rule(
        "pad-maxpool-merge",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_pad_into_pool (-inf pads only)",
        "MaxPool(Pad(x, p, constant -inf), pads) -> MaxPool(x, pads + spatial p) (same conditions; a zero Pad never: "
        "MaxPool pads with -inf)",
        _pad_pool("MaxPool", "-inf", "so"),
        ruleset="simplify",
    ),
]
