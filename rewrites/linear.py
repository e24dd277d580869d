"""Linear rules: MatMul + bias as Gemm, constant biases folded into Gemm's C, per-column scales into the weights.

    MatMul(A, B) + c                -> Gemm(A, B, c)                     A [M, K], B constant [K, N], c constant
                                                                         broadcastable to [M, N]
    MatMul(A, B) - c                -> Gemm(A, B, c, beta=-1)
    Gemm(A, B, C, beta) + c         -> Gemm(A, B, C * beta + c, beta=1)  c constant not enlarging the output
    Gemm(A, B, C, beta) - c         -> Gemm(A, B, C * beta - c, beta=1)
    MatMul(A, B) * s                -> MatMul(A, B * s)                  B constant [K, N], s per column or scalar
    Gemm(A, B, C) * s               -> Gemm(A, B * s, C * s)             s per column (B^T: per row) or scalar

`c - MatMul(A, B)` and `c - Gemm(...)` are not folded (that is -(A B) + c: it would need alpha = -1). A per-column
constant is one whose shape is the output's with every axis but the last set to 1. Gemm takes any dtype MatMul
does from opset 11 on; below that (Gemm-9: floats only) the rules need a FLOAT output. All are `fp-reassoc`:
the bias is added inside the product's accumulation, and the scale multiplies the weights before the sum.
"""

from __future__ import annotations

from eqsat.rule import Egglog, Rule, fact
from rewrites.tensor import tlist

FAMILY = "linear"
#: Gemm accepts MatMul's dtypes from opset 11; before, FLOAT is the common case we accept.
GEMM_OK = ('(= o (model-opset)) (>= o 11)', '(= (dtype y) "FLOAT")')


def ones(s: str) -> str:
    return f'(unstable-vec-map (unstable-fn "min" 1) {s})'


def per_column(c: str, ref: str) -> str:
    """Guards: constant `c` shaped like shape `ref` with every axis but the last set to 1 (binds s_c)."""
    s = f"s_{c}"
    return (f"(is-const {c}) (= {s} (shape {c})) (> (vec-length {s}) 0) (= (vec-length {s}) (vec-length {ref})) "
            f"(= {s} (vec-set {ones(ref)} (- (vec-length {s}) 1) (vec-get {s} (- (vec-length {s}) 1))))")


#: a 2-D MatMul with constant weights whose output has the shape of y (the other operand does not enlarge it).
MATMUL_2D = ("(= mm (MatMul a b)) (= sa (shape a)) (= (vec-length sa) 2) (is-const b) (= sb (shape b)) "
             "(= (vec-length sb) 2) (= sy (shape y)) (= sy (shape mm))")
GEMM = "(= gm (Gemm a b cc alpha beta ta tb)) (= sy (shape y)) (= sy (shape gm))"
#: c is a constant of rank <= 2 (Gemm's C broadcasts unidirectionally to [M, N]).
BIAS = "(is-const c) (= s_c (shape c)) (<= (vec-length s_c) 2)"


def _matmul_to_gemm() -> tuple:
    rules = []
    for ok in GEMM_OK:
        rules.append(fact(f"(= y (Add mm c)) {MATMUL_2D} {BIAS} {ok}", "(union y (Gemm a b c 1.0 1.0 0 0))"))
        rules.append(fact(f"(= y (Sub mm c)) {MATMUL_2D} {BIAS} {ok}", "(union y (Gemm a b c 1.0 -1.0 0 0))"))
    return tuple(rules)


def _gemm_bias() -> tuple:
    rules = []
    for op, sign in (("Add", "1.0"), ("Sub", "-1.0")):
        base = f"(= y ({op} gm c)) {GEMM} {BIAS}"
        rules.append(fact(f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))",
                          f"(union y (Gemm a b c alpha {sign} ta tb))"))
        present = "(= scc (shape cc)) (<= (vec-length scc) 2)"
        rules.append(fact(f"{base} {present} (= beta 1.0)", f"(union y (Gemm a b ({op} cc c) alpha 1.0 ta tb))"))
        rules.append(fact(f"{base} {present} (!= beta 1.0) (= dt (dtype c))",
                          f"(union y (Gemm a b ({op} (Mul cc (Scalar beta dt (vec-of 1))) c) alpha 1.0 ta tb))"))
    return tuple(rules)


def _matmul_scale() -> tuple:
    weight = "(Mul b (Reshape s (vec-of 1 -1) 0))"
    return (fact(f"(= y (Mul mm s)) (= mm (MatMul a b)) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
                 f"(= sy (shape y)) (= sy (shape mm)) {per_column('s', 'sy')}",
                 f"(union y (MatMul a {weight})) (set (shape {weight}) sb)"),)


def _gemm_scale() -> tuple:
    rules = []
    for tb, view in ((0, "(vec-of 1 -1)"), (1, "(vec-of -1 1)")):
        weight = f"(Mul b (Reshape s {view} 0))"
        base = (f"(= y (Mul gm s)) {GEMM} (= tb {tb}) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
                f"(= (vec-length sy) 2) {per_column('s', 'sy')}")
        rules.append(fact(f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))",
                          f"(union y (Gemm a {weight} (Absent) alpha beta ta tb)) (set (shape {weight}) sb)"))
        rules.append(fact(f"{base} (= scc (shape cc))",
                          f"(union y (Gemm a {weight} (Mul cc s) alpha beta ta tb)) (set (shape {weight}) sb)"))
    return tuple(rules)


RULES = [
    Rule("matmul-add-to-gemm", FAMILY, "fp-reassoc",
         "onnxruntime:MatMulAddFusion; onnxoptimizer:fuse_matmul_add_bias_into_gemm",
         "MatMul(A, B) +/- c -> Gemm(A, B, c, beta=+/-1) for 2-D A, constant B [K, N] and a constant c "
         "broadcastable to [M, N]",
         _matmul_to_gemm()),
    Rule("gemm-bias-fold", FAMILY, "fp-reassoc", "onnxoptimizer:fuse_add_bias_into_conv (Gemm); tvm:FoldConstant",
         "Gemm(A, B, C, beta) +/- c -> Gemm(A, B, C * beta +/- c, beta=1) for a constant c (never c - Gemm)",
         _gemm_bias()),
    Rule("matmul-scale-fold", FAMILY, "fp-reassoc", "tvm:BackwardFoldScaleAxis (dense); coreml:fuse_matmul_weight_bias",
         "MatMul(A, B) * s -> MatMul(A, B * s) for constant 2-D B and s per output column or scalar",
         _matmul_scale()),
    Rule("gemm-scale-fold", FAMILY, "fp-reassoc", "tvm:BackwardFoldScaleAxis (dense)",
         "Gemm(A, B, C) * s -> Gemm(A, B * s, C * s) for constant B and s per output column or scalar "
         "(transB: per row of B)",
         _gemm_scale()),
]


# ---- multi-pattern merges (TENSAT): MatMuls sharing their input, with constant weights ----
#: Most MatMuls merged into one (every sorted subset of 2..MAX_MERGE sharing an input gets one merged form).
MAX_MERGE = 4


def _merge(n: int, bias: bool) -> "Egglog":
    """n MatMuls (x, W_k) with constant 2-D W_k in const-rank order (each subset matched once), plus a
    per-column constant bias b_k each when `bias`: one MatMul (and Add) over Concat(W_k) (and Concat(b_k)),
    Split along the last axis; each original unioned with its projection."""
    ks = range(n)
    last = "(- (vec-length sy0) 1)"
    q = " ".join(f"(= y{k} (MatMul x w{k})) (= w{k} (Const c{k})) (= r{k} (const-rank w{k})) (= sw{k} (shape w{k})) "
                 f"(= (vec-length sw{k}) 2)" for k in ks)
    q += " " + " ".join(f"(< r{k} r{k + 1})" for k in range(n - 1))
    q += " (= sy0 (shape y0)) (>= (vec-length sy0) 1) (= dt (dtype y0))"
    sizes = "(vec-of " + " ".join(f"(vec-get sw{k} 1)" for k in ks) + ")"
    total = "(+ " * (n - 1) + "(vec-get sw0 1)" + "".join(f" (vec-get sw{k} 1))" for k in range(1, n))
    acts = [f"(let wc (Concat {tlist([f'w{k}' for k in ks])} 1))", "(let mm (MatMul x wc))",
            f"(set (shape mm) (vec-set sy0 {last} {total}))", "(set (dtype mm) dt)"]
    top, outs = "mm", [f"y{k}" for k in ks]
    if bias:
        q += " " + " ".join(f"(= z{k} (Add y{k} b{k})) {per_column(f'b{k}', 'sy0')} "
                            f"(= (vec-get s_b{k} {last}) (vec-get sw{k} 1))" for k in ks)
        acts += [f"(let bc (Concat {tlist([f'b{k}' for k in ks])} {last}))", "(let ad (Add mm bc))",
                 f"(set (shape ad) (vec-set sy0 {last} {total}))", "(set (dtype ad) dt)"]
        top, outs = "ad", [f"z{k}" for k in ks]
    acts.append(f"(let sp (Split {top} {last} {sizes}))")
    acts += [f"(union {o} (Out sp {k}))" for k, o in enumerate(outs)]
    return fact(q, " ".join(acts))


RULES += [
    Rule("matmul-merge", FAMILY, "fp-reassoc", "tensat:multi-pattern (matmul with shared input); tvm:CombineParallelDense",
         "MatMul(x, W1), MatMul(x, W2), ... -> Out(Split(MatMul(x, Concat([W1, W2, ...], 1)), -1, [N1, N2, ...]), k) "
         "for constant 2-D W_k (2 to 4 MatMuls)",
         tuple(_merge(n, False) for n in range(2, MAX_MERGE + 1))),
    Rule("matmul-bias-merge", FAMILY, "fp-reassoc", "tensat:multi-pattern; tvm:CombineParallelDense (with bias)",
         "MatMul(x, W_k) + b_k, ... -> Out(Split(MatMul(x, Concat(W)) + Concat(b), -1, [N_k]), k) for constant "
         "2-D W_k and per-column constant b_k (2 to 4 MatMuls)",
         tuple(_merge(n, True) for n in range(2, MAX_MERGE + 1))),
]
