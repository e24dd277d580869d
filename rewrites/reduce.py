"""Reduce rules: sums scaled by the element count as means, and spatial means as global average pools.

    ReduceSum(x, axes) * v          -> ReduceMean(x, axes)       v * N within 1e-6 of 1, N = prod(shape(x)[axes])
    ReduceSum(x, axes) / N          -> ReduceMean(x, axes)       N exactly the number of reduced elements
    ReduceMean(x, [2..r-1], keepdims=1) -> GlobalAveragePool(x)  x of rank r >= 3
    ReduceMean(x, [2..r-1], keepdims=0) -> Flatten(GlobalAveragePool(x), 1)   x of rank 3 to 5
    GlobalAveragePool(x)            -> ReduceMean(x, [2..r-1], keepdims=1)
    Unsqueeze(R(x, axes, keepdims=0), axes) -> R(x, axes, keepdims=1)    every reduction R; empty axes (all
                                                                         axes) with Unsqueeze [0..r-1]
    ArgMax(f(x), axis)              -> ArgMax(x, axis)           f Exp, or Softmax/LogSoftmax on that axis
                                                                 (opset >= 13); ArgMin too; precision-changing

N is computed from shape facts, one rule per number of reduced axes (and, for an empty axes list, which
reduces every axis, one per rank): egglog has no fold over vectors. The scalar is the f64 value of the
constant (as stored in its dtype): 1/N stored as float32 is within 1e-6 of 1/N; a float16 1/N only matches
when N is a power of two. Integer sums are left alone (a mean of integers truncates differently).
Mean and global average pool exist in both forms so that the target's cost model picks one.

Reduce + Unsqueeze: axes are normalized at load (non-negative and sorted, the reduction's against its input
rank, the Unsqueeze's against its output rank, which is that same rank), so equal axes are one vector. An empty
axes list (noop_with_empty_axes = 0; a node with noop_with_empty_axes = 1 stays opaque) reduces every axis: the
Unsqueeze must then restore all r of them.

ArgMax through monotone ops: Exp, Softmax and LogSoftmax (over the ArgMax axis, opset >= 13; before 13 Softmax
normalizes over the flattened trailing axes) are strictly increasing in real arithmetic, but in floats only
non-decreasing: Exp and Softmax underflow to 0, Exp overflows to inf (float16 from x > 11), and rounding maps
close values to one. Such a tie makes ArgMax return the first (or, with select_last_index, the last) tied index
where x had a strict maximum elsewhere. The rule is therefore `precision-changing` (off by default): the
rewritten ArgMax is the argmax of the exact function, which the original computes only when no tie occurs.
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, fact, rw
from eqsat.engine.terms import OPS

FAMILY = "reduce"
MAX_AXES = 4      # ReduceSum over 1..4 listed axes
MAX_RANK = 5      # ReduceSum over all axes of a rank 1..5 tensor
#: Sums and means of these dtypes are integer arithmetic (ReduceSum's integer types).
NOT_FLOAT = '(!= dt "INT32") (!= dt "INT64") (!= dt "UINT32") (!= dt "UINT64")'


def _count(n_axes: int | None, rank: int | None) -> tuple[str, str]:
    """(guards, N): the number of elements reduced, for `n_axes` listed (sorted, non-negative) axes or, when
    `n_axes` is None, for every axis of a rank-`rank` tensor."""
    if n_axes is not None:
        dims = [f"(vec-get sx (vec-get ax {j}))" for j in range(n_axes)]
        guards = f"(= (vec-length ax) {n_axes}) (< (vec-get ax {n_axes - 1}) (vec-length sx))"
    else:
        dims = [f"(vec-get sx {j})" for j in range(rank)]
        guards = f"(= ax (vec-empty)) (= (vec-length sx) {rank})"
    guards += " " + " ".join(f"(>= {d} 0)" for d in dims)  # N is a product of sizes, never of symbols
    n = dims[0]
    for d in dims[1:]:
        n = f"(* {n} {d})"
    return guards, n


def _cases() -> list[tuple[str, str]]:
    return ([_count(k, None) for k in range(1, MAX_AXES + 1)]
            + [_count(None, r) for r in range(1, MAX_RANK + 1)])


_SUM = ("(= rs (ReduceSum x ax kd)) (= sx (shape x)) (= sy (shape y)) (= sy (shape rs)) "
        f"{NOT_FLOAT}")


def _sum_times_reciprocal() -> tuple:
    return tuple(fact(f"(= y (Mul rs (Scalar v dt s))) {_SUM} {guards} "
                      f"(< (abs (- (* v (to-f64 {n})) 1.0)) 0.000001)",
                      "(union y (ReduceMean x ax kd))") for guards, n in _cases())


def _sum_over_count() -> tuple:
    return tuple(fact(f"(= y (Div rs (Scalar v dt s))) {_SUM} {guards} (= v (to-f64 {n}))",
                      "(union y (ReduceMean x ax kd))") for guards, n in _cases())


def _mean_to_pool() -> tuple:
    """keepdims = 1: the pool itself; keepdims = 0 (Keras/TF exports: the NHWC mean over (1, 2) once its
    transpose has sunk): Flatten(pool, 1), shape (N, C), the pool getting its (N, C, 1, ...) shape fact."""
    spatial = "(= sx (shape x)) (= r (vec-length sx)) (>= r 3) (= (vec-length ax) (- r 2)) " \
              f"(= (vec-get ax 0) 2) (= (vec-get ax (- r 3)) (- r 1)) (= dt (dtype x)) {NOT_FLOAT}"
    flat = tuple(fact(f"(= y (ReduceMean x ax 0)) {spatial} (= r {r})",
                      f"(let gap (GlobalAveragePool x)) (set (shape gap) (vec-of (vec-get sx 0) (vec-get sx 1) "
                      f"{' '.join(['1'] * (r - 2))})) (set (dtype gap) dt) (union y (Flatten gap 1))")
                 for r in (3, 4, 5))
    return (fact(f"(= y (ReduceMean x ax 1)) {spatial}", "(union y (GlobalAveragePool x))"),) + flat


def _pool_to_mean() -> tuple:
    return tuple(fact(f"(= y (GlobalAveragePool x)) (= sx (shape x)) (= (vec-length sx) {r})",
                      f"(union y (ReduceMean x (vec-of {' '.join(str(a) for a in range(2, r))}) 1))")
                 for r in (3, 4, 5))


#: Every reduction of the term language (ReduceSum, ReduceMean, ..., ReduceL1, ReduceLogSumExp).
REDUCTIONS = tuple(sorted(op for op in OPS if op.startswith("Reduce")))
MAX_UNSQUEEZE_RANK = 6


def _reduce_unsqueeze() -> tuple:
    rules = [rw(f"(Unsqueeze ({op} x ax 0) ax)", f"({op} x ax 1)", "(> (vec-length ax) 0)") for op in REDUCTIONS]
    for r in range(1, MAX_UNSQUEEZE_RANK + 1):
        every = f"(vec-of {' '.join(map(str, range(r)))})"
        rules += [rw(f"(Unsqueeze ({op} x (vec-empty) 0) {every})", f"({op} x (vec-empty) 1)",
                     f"(= (vec-length (shape x)) {r})") for op in REDUCTIONS]
    return tuple(rules)


def _argmax_monotone() -> tuple:
    rules = []
    for arg in ("ArgMax", "ArgMin"):
        rules.append(rw(f"({arg} (Exp x) ax kd sl)", f"({arg} x ax kd sl)"))
        for soft in ("Softmax", "LogSoftmax"):
            rules.append(rw(f"({arg} ({soft} x ax) ax kd sl)", f"({arg} x ax kd sl)", "(= o (model-opset)) (>= o 13)"))
    return tuple(rules)


RULES = [
    Rule("reducesum-mul-to-mean", FAMILY, "fp-reassoc", "coreml:fuse_reduce_mean; tvm:SimplifyExpr",
         "ReduceSum(x, axes) * v -> ReduceMean(x, axes) when v * N is within 1e-6 of 1 (N reduced elements, float)",
         _sum_times_reciprocal()),
    Rule("reducesum-div-to-mean", FAMILY, "exact", "coreml:fuse_reduce_mean; tvm:SimplifyExpr",
         "ReduceSum(x, axes) / N -> ReduceMean(x, axes) when N is exactly the number of reduced elements (float)",
         _sum_over_count()),
    Rule("reducemean-to-global-pool", FAMILY, "exact", "onnxruntime:ReduceMean->GlobalAveragePool; "
         "coreml:reduce_mean -> global pool",
         "ReduceMean(x, axes 2..r-1, keepdims=1) -> GlobalAveragePool(x) for x of rank r >= 3; keepdims=0 -> "
         "Flatten(GlobalAveragePool(x), 1) (rank 3 to 5)",
         _mean_to_pool()),
    Rule("global-pool-to-reducemean", FAMILY, "exact", "tvm:SimplifyExpr (global_avg_pool2d as mean)",
         "GlobalAveragePool(x) -> ReduceMean(x, axes 2..r-1, keepdims=1) for x of rank 3 to 5",
         _pool_to_mean()),
    Rule("reduce-unsqueeze-fuse", FAMILY, "exact", "onnxoptimizer:fuse_consecutive_reduce_unsqueeze",
         "Unsqueeze(R(x, axes, keepdims=0), axes) -> R(x, axes, keepdims=1) for every reduction R (empty axes: "
         "all axes, Unsqueeze [0..r-1])",
         _reduce_unsqueeze(), ruleset="simplify"),
    Rule("argmax-monotone", FAMILY, "precision-changing", "onnxoptimizer:eliminate_nop_monotone_argmax",
         "ArgMax(f(x), axis) -> ArgMax(x, axis) (ArgMin too) for f Exp, or Softmax/LogSoftmax over that axis at "
         "opset >= 13 (floats: f is only non-decreasing, its ties may move the index)",
         _argmax_monotone()),
]
