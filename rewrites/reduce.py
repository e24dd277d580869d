"""Reduce rules: sums scaled by the element count as means, and spatial means as global average pools.

    ReduceSum(x, axes) * v          -> ReduceMean(x, axes)       v * N within 1e-6 of 1, N = prod(shape(x)[axes])
    ReduceSum(x, axes) / N          -> ReduceMean(x, axes)       N exactly the number of reduced elements
    ReduceMean(x, [2..r-1], keepdims=1) -> GlobalAveragePool(x)  x of rank r in 3..5
    ReduceMean(x, [2..r-1], keepdims=0) -> Flatten(GlobalAveragePool(x), 1)   x of rank 3 to 5
    GlobalAveragePool(x)            -> ReduceMean(x, [2..r-1], keepdims=1)
    Unsqueeze(R(x, axes, keepdims=0), axes) -> R(x, axes, keepdims=1)    every reduction R; empty axes (all
                                                                         axes) with Unsqueeze [0..r-1]
    R(x, axes, keepdims=1)          -> x                         every reduced dim of x is 1; R Sum, Mean, Max,
                                                                 Min or Prod (of one element: that element)
    R(x, axes, keepdims=1)          -> Abs(x), Mul(x, x), Log(x) likewise, R ReduceL1, ReduceSumSquare, ReduceLogSum
    ArgMax(f(x), axis)              -> ArgMax(x, axis)           f Exp, or Softmax/LogSoftmax on that axis
                                                                 (opset >= 13); ArgMin too; precision-changing

N is the product of the reduced dims (`dims-product`, a function of lists: any number of axes, any rank; an
empty axes list reduces every axis). The scalar is the f64 value of the
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

FAMILY = "reduce"
#: Sums and means of a float dtype (ReduceSum and ReduceMean take four float and four integer types, INT32, INT64,
#: UINT32 and UINT64, whose sums and means are integer arithmetic): one fact of the "float" dtype group.
FLOAT = '(dtype-group "float" dt since)'

#: rs = ReduceSum(x, ax, kd) read by y, float; rx = the axes it reduces (ax, or every axis of x when ax is empty:
#: range(r) is appended only then); N = dims-product(sx, rx), declined when a reduced dim is a symbol.
_SUM = (
    "(= rs (ReduceSum x ax kd)) (= sx (shape x)) (= sy (shape y)) (= sy (shape rs)) "
    f"{FLOAT} (= r (vec-length sx)) (= rx (vec-append ax (vec-range (* r (- 1 (min 1 (vec-length ax)))))))"
)

#: ReduceMean(x, [2..r-1]) for x of rank r in 3..5 (GlobalAveragePool's 1 to 3 spatial dims: ONNX's pools and
#: onnxruntime's kernels are written for those).
_SPATIAL = (
    "(= sx (shape x)) (= r (vec-length sx)) (>= r 3) (<= r 5) (= ax (vec-remove (vec-remove (vec-range r) 0) 0)) "
    f"(= dt (dtype x)) {FLOAT}"
)

#: y = R(x, ax, keepdims=1); rx = the axes it reduces (ax, or every axis when ax is empty), as in _SUM.
_KEPT = (
    "(= y ({op} x ax 1)) (= sx (shape x)) (= r (vec-length sx)) "
    "(= rx (vec-append ax (vec-range (* r (- 1 (min 1 (vec-length ax)))))))"
)
#: ... for R whose value over one element is that element (`element-reduce`: Sum, Mean, Max, Min, Prod; L1, L2,
#: SumSquare, LogSum, LogSumExp are not)
_KEPT_ELEMENT = _KEPT.format(op="Reduce op") + " (element-reduce op)"

#: The number of elements each reduction reduces, asked for once per reduction (reduce-sizes, analysis): the
#: dims-product(sx, rx) the unit-axes and sum-to-mean rules read.
REDUCE_SIZES = fact(
    "(= y (Reduce op x ax kd)) (= sx (shape x)) (= r (vec-length sx))",
    "(need-dims-product sx (vec-append ax (vec-range (* r (- 1 (min 1 (vec-length ax)))))))",
)
#: R(x, axes, keepdims=1) -> x when the product of the reduced dims is 1 (a symbol declines).
UNIT_AXES = (fact(f"{_KEPT_ELEMENT} (= 1 (dims-product sx rx))", "(union y x)"),)


#: The unit-axes guard of a pointwise form: y = R(x, ax, 1) with every reduced dim 1 (`{op}`: R's name).
_UNIT = f"{_KEPT} (= 1 (dims-product sx rx))"

#: R(x, axes, keepdims=1) over dims of size 1 as the pointwise op it then is (one element e: |e|, e * e, log e):
#: one row for the unary forms (reduce-as-unary), one for e * e.
_KEPT_ANY = _KEPT.format(op="Reduce op")
UNIT_AXES_POINTWISE = (
    fact(
        f"{_KEPT_ANY} (unit-pointwise-reduce op) (reduce-as-unary op u) (= 1 (dims-product sx rx))",
        "(union y (Unary u x))",
    ),
    fact(_UNIT.format(op="ReduceSumSquare"), "(union y (Mul x x))"),
)


#: Unsqueeze(R(x, axes, keepdims=0), axes) -> R(x, axes, keepdims=1) for every reduction R (empty axes: all of them).
REDUCE_UNSQUEEZE = (
    rw("(Unsqueeze (Reduce op x ax 0) ax)", "(Reduce op x ax 1)", "(> (vec-length ax) 0)"),
    rw(
        "(Unsqueeze (Reduce op x (vec-empty) 0) e)",
        "(Reduce op x (vec-empty) 1)",
        "(= e (vec-range (vec-length (shape x))))",
    ),
)


def _argmax_monotone() -> tuple:
    rules = []
    for arg in ("ArgMax", "ArgMin"):
        rules.append(rw(f"({arg} (Exp x) ax kd sl)", f"({arg} x ax kd sl)"))
        for soft in ("Softmax", "LogSoftmax"):
            rules.append(rw(f"({arg} ({soft} x ax) ax kd sl)", f"({arg} x ax kd sl)", "(= o (model-opset)) (>= o 13)"))
    return tuple(rules)


RULES = [
    Rule(
        "reduce-sizes",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "asks for dims-product(shape(x), axes) (every axis when axes is empty) for each reduction R(x, axes, kd): the "
        "number of elements reduce-unit-axes, reduce-unit-axes-pointwise and the sum-to-mean rules read",
        (REDUCE_SIZES,),
        ruleset="analysis",
    ),
    Rule(
        "reduce-unit-axes",
        FAMILY,
        "exact",
        "onnxoptimizer:eliminate_nop_reduce (its keepdims form); tvm:SimplifyExpr",
        "R(x, axes, keepdims=1) -> x when every reduced dim of x is 1, for R Sum, Mean, Max, Min and Prod (the "
        "value of one element)",
        UNIT_AXES,
    ),
    Rule(
        "reduce-unit-axes-pointwise",
        FAMILY,
        "exact",
        "onnxoptimizer:eliminate_nop_reduce (its keepdims form); tvm:SimplifyExpr",
        "R(x, axes, keepdims=1) -> Abs(x), Mul(x, x), Log(x) for R ReduceL1, ReduceSumSquare, ReduceLogSum when "
        "every reduced dim of x is 1 (the value of one element; L2 and LogSumExp are left: sqrt(x*x) overflows "
        "and log(exp(x)) rounds)",
        UNIT_AXES_POINTWISE,
    ),
    Rule(
        "reducesum-mul-to-mean",
        FAMILY,
        "fp-reassoc",
        "coreml:fuse_reduce_mean; tvm:SimplifyExpr",
        "ReduceSum(x, axes) * v -> ReduceMean(x, axes) when v * N is within 1e-6 of 1 (N reduced elements, float)",
        (
            fact(
                f"(= y (Mul rs (Scalar v dt s))) {_SUM} (= c (dims-product sx rx)) "
                "(< (abs (- (* v (to-f64 c)) 1.0)) 0.000001)",
                "(union y (ReduceMean x ax kd))",
            ),
        ),
    ),
    Rule(
        "reducesum-div-to-mean",
        FAMILY,
        "exact",
        "coreml:fuse_reduce_mean; tvm:SimplifyExpr",
        "ReduceSum(x, axes) / N -> ReduceMean(x, axes) when N is exactly the number of reduced elements (float)",
        (
            fact(
                f"(= y (Div rs (Scalar v dt s))) {_SUM} (= c (dims-product sx rx)) (= v (to-f64 c))",
                "(union y (ReduceMean x ax kd))",
            ),
        ),
    ),
    Rule(
        "reducemean-to-global-pool",
        FAMILY,
        "exact",
        "onnxruntime:ReduceMean->GlobalAveragePool; coreml:reduce_mean -> global pool",
        "ReduceMean(x, axes 2..r-1, keepdims=1) -> GlobalAveragePool(x) for x of rank r in 3..5; keepdims=0 -> "
        "Flatten(GlobalAveragePool(x), 1)",
        (
            fact(f"(= y (ReduceMean x ax 1)) {_SPATIAL}", "(union y (GlobalAveragePool x))"),
            # keepdims = 0 (Keras/TF exports: the NHWC mean over (1, 2) once its transpose has sunk): Flatten(pool, 1);
            # the pool's spatial dims are 1: min(1, a) for each axis a of ax = 2..r-1
            fact(
                f"(= y (ReduceMean x ax 0)) {_SPATIAL}",
                "(let g (GlobalAveragePool x)) (set (shape g) (vec-append (vec-of (vec-get sx 0) (vec-get sx 1)) "
                '(unstable-vec-map (unstable-fn "min" 1) ax))) (set (dtype g) dt) (union y (Flatten g 1))',
            ),
        ),
    ),
    Rule(
        "global-pool-to-reducemean",
        FAMILY,
        "exact",
        "tvm:SimplifyExpr (global_avg_pool2d as mean)",
        "GlobalAveragePool(x) -> ReduceMean(x, axes 2..r-1, keepdims=1) for x of rank 3 to 5",
        (
            fact(
                "(= y (GlobalAveragePool x)) (= r (vec-length (shape x))) (>= r 3) (<= r 5)",
                "(union y (ReduceMean x (vec-remove (vec-remove (vec-range r) 0) 0) 1))",
            ),
        ),
    ),
    Rule(
        "reduce-unsqueeze-fuse",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_consecutive_reduce_unsqueeze",
        "Unsqueeze(R(x, axes, keepdims=0), axes) -> R(x, axes, keepdims=1) for every reduction R (empty axes: "
        "all axes, Unsqueeze [0..r-1])",
        REDUCE_UNSQUEEZE,
        ruleset="simplify",
    ),
    Rule(
        "argmax-monotone",
        FAMILY,
        "precision-changing",
        "onnxoptimizer:eliminate_nop_monotone_argmax",
        "ArgMax(f(x), axis) -> ArgMax(x, axis) (ArgMin too) for f Exp, or Softmax/LogSoftmax over that axis at "
        "opset >= 13 (floats: f is only non-decreasing, its ties may move the index)",
        _argmax_monotone(),
    ),
]
