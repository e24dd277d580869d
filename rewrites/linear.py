"""Linear rules: MatMul + bias as Gemm, constant biases folded into Gemm's C, per-column scales into the weights.

    MatMul(A, B) + c                -> Gemm(A, B, c)                     A [M, K], B [K, N] (constant or not: a
                                                                         graph input too), c constant
                                                                         broadcastable to [M, N]
    MatMul(A, B) - c                -> Gemm(A, B, c, beta=-1)
    Gemm(A, B, C, beta) + c         -> Gemm(A, B, C * beta + c, beta=1)  c constant not enlarging the output
    Gemm(A, B, C, beta) - c         -> Gemm(A, B, C * beta - c, beta=1)
    c - MatMul(A, B)                -> Gemm(A, B, c, alpha=-1)           (same guards as MatMul + c)
    c - Gemm(A, B, C, alpha, beta)  -> Gemm(A, B, c - C * beta, alpha=-alpha, beta=1)
    c - MatMul(A, B)                -> MatMul(A, Neg(B)) + c             B, c constants, A of any rank (exact)
    Gemm(Transpose(A, [1, 0]), B, C) -> Gemm(A, B, C, transA = 1 - transA)   (likewise B and transB)
    (MatMul(A, B) +/- c1) +/- c2    -> MatMul(A, B) + (+/-c1 +/- c2)     A of any rank, c1, c2 constants of one shape
                                                                         (or c2 single-element): one bias Add
    MatMul(A, B) * s                -> MatMul(A, B * s)                  B constant [K, N], s per column or scalar
    Gemm(A, B, C) * s               -> Gemm(A, B * s, C * s)             s per column (B^T: per row) or scalar
    MatMul(x, W_k) (+ b_k), k = 1..n -> Out(Split(MatMul(x, Concat(W)) (+ Concat(b)), -1, [N_k]), k)   (TENSAT)
    Gemm(A, B_k, C_k), k = 1..n     -> Out(Split(Gemm(A, Concat(B), Concat(C)), 1, [N_k]), k)   (TENSAT; same
                                                                         alpha, beta, transA, transB)
    act(Out(Split(p, ax, sizes), k)) -> Out(Split(act(p), ax, sizes), k)  p a merged MatMul, Add or Gemm; act
                                                                         Relu, Gelu or Clip (matmul-merge-epilogue)
    Reshape(MatMul(Reshape(x, [P, K]), W), s) -> MatMul(x, W)           x [..., K] of rank >= 3, W [K, N], the output
                                                                         x's shape with N last (tf2onnx Dense pairs)

`c - MatMul(A, B)` is -(A B) + c: Gemm's alpha carries the sign (alpha = -1; a Gemm's alpha is negated and its
C * beta moves into the new constant). A per-column constant is one whose shape is the output's with every axis
but the last set to 1. MatMul becomes Gemm for float, float16 and double outputs only (integer Gemms are ONNX
from opset 11 on, but ONNX Runtime has no kernel for them). All are `fp-reassoc`: the bias is added inside the
product's accumulation, the scale multiplies the weights before the sum, and a merged product may be computed
with another blocking (n = 2 to 4 products sharing their input, constant weights in const-rank order so each
subset is generated once; the cost model decides whether one launch and one read of the input beat the Split).
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact, ones, op_pattern, rw
from eqsat.ops import MATMUL_EPILOGUES as EPILOGUES
from eqsat.rewrites.layout import RESHAPES
from eqsat.rewrites.tensor import tlist

FAMILY = "linear"
#: Gemm's float dtypes (every opset): ONNX allows integer Gemms from opset 11 on, but ONNX Runtime has no integer
#: (nor bfloat16) Gemm kernel, so a MatMul of those types stays a MatMul.
GEMM_OK = tuple(f'(= (dtype y) "{d}")' for d in ("FLOAT", "FLOAT16", "DOUBLE"))


def per_column(c: str, ref: str) -> str:
    """Guards: constant `c` shaped like shape `ref` with every axis but the last set to 1 (binds s_c)."""
    s = f"s_{c}"
    return (
        f"(is-const {c}) (= {s} (shape {c})) (> (vec-length {s}) 0) (= (vec-length {s}) (vec-length {ref})) "
        f"(= {s} (vec-set {ones(ref)} (- (vec-length {s}) 1) (vec-get {s} (- (vec-length {s}) 1))))"
    )


#: a 2-D MatMul (weights constant or not: Gemm takes any B) whose output has the shape of y (the other operand
#: does not enlarge it).
MATMUL_2D = (
    "(= mm (MatMul a b)) (= sa (shape a)) (= (vec-length sa) 2) (= sb (shape b)) "
    "(= (vec-length sb) 2) (= sy (shape y)) (= sy (shape mm))"
)
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
        rules.append(
            fact(f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))", f"(union y (Gemm a b c alpha {sign} ta tb))")
        )
        present = "(= scc (shape cc)) (<= (vec-length scc) 2)"
        rules.append(fact(f"{base} {present} (= beta 1.0)", f"(union y (Gemm a b ({op} cc c) alpha 1.0 ta tb))"))
        rules.append(
            fact(
                f"{base} {present} (!= beta 1.0) (= dt (dtype c))",
                f"(union y (Gemm a b ({op} (Mul cc (Scalar beta dt (vec-of 1))) c) alpha 1.0 ta tb))",
            )
        )
    return tuple(rules)


def _const_minus() -> tuple:
    """c - MatMul(A, B) and c - Gemm(A, B, C, alpha, beta): the product's sign goes into alpha."""
    rules = [fact(f"(= y (Sub c mm)) {MATMUL_2D} {BIAS} {ok}", "(union y (Gemm a b c -1.0 1.0 0 0))") for ok in GEMM_OK]
    base = f"(= y (Sub c gm)) {GEMM} {BIAS}"
    neg = "(* -1.0 alpha)"
    present = "(= scc (shape cc)) (<= (vec-length scc) 2)"
    rules.append(fact(f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))", f"(union y (Gemm a b c {neg} 1.0 ta tb))"))
    rules.append(fact(f"{base} {present} (= beta 1.0)", f"(union y (Gemm a b (Sub c cc) {neg} 1.0 ta tb))"))
    rules.append(
        fact(
            f"{base} {present} (!= beta 1.0) (= dt (dtype c))",
            f"(union y (Gemm a b (Sub c (Mul cc (Scalar beta dt (vec-of 1)))) {neg} 1.0 ta tb))",
        )
    )
    return tuple(rules)


#: c - MatMul(A, B) -> MatMul(A, Neg(B)) + c for constant B and c (Neg(B) folds at lowering) and A of any rank
#: (a 1-D A has no Gemm): the constant-last bias Add the targets fuse into the product. Exact: negation is exact
#: and commutes with rounding, so A (-B) = -(A B) and c - p = c + (-p) bit for bit (integers: modulo 2^n).
CONST_MINUS_MATMUL = (
    fact(
        "(= y (Sub c mm)) (= mm (MatMul a b)) (is-const c) (is-const b) (= sy (shape y)) (= sy (shape mm)) "
        "(= sb (shape b)) (= db (dtype b))",
        "(let nb (Neg b)) (set (shape nb) sb) (set (dtype nb) db) (let p (MatMul a nb)) (set (shape p) sy) "
        "(set (dtype p) db) (union y (Add p c))",
    ),
)


def _matmul_scale() -> tuple:
    weight = "(Mul b (Reshape s (vec-of 1 -1) 0))"
    return (
        fact(
            f"(= y (Mul mm s)) (= mm (MatMul a b)) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
            f"(= sy (shape y)) (= sy (shape mm)) {per_column('s', 'sy')}",
            f"(union y (MatMul a {weight})) (set (shape {weight}) sb)",
        ),
    )


def _gemm_scale() -> tuple:
    rules = []
    for tb, view in ((0, "(vec-of 1 -1)"), (1, "(vec-of -1 1)")):
        weight = f"(Mul b (Reshape s {view} 0))"
        base = (
            f"(= y (Mul gm s)) {GEMM} (= tb {tb}) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
            f"(= (vec-length sy) 2) {per_column('s', 'sy')}"
        )
        rules.append(
            fact(
                f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))",
                f"(union y (Gemm a {weight} (Absent) alpha beta ta tb)) (set (shape {weight}) sb)",
            )
        )
        rules.append(
            fact(
                f"{base} (= scc (shape cc))",
                f"(union y (Gemm a {weight} (Mul cc s) alpha beta ta tb)) (set (shape {weight}) sb)",
            )
        )
    return tuple(rules)


def _bias_chain() -> tuple:
    """(mm op1 c1) op2 c2 -> mm + c or mm - c with c the constants combined (evaluated at lowering), for
    mm = MatMul(A, B) of any rank (matmul-add-to-gemm needs a 2-D A; the targets fuse MatMul + constant Add as
    Gemm does, so an N-D A needs no Reshape to 2-D and back). c1 and c2 have one shape, or c2 is
    single-element of a rank not above c1's: the combined constant has c1's shape (lower-rank constants are
    re-encoded at the output's rank at load, so ranks agree in practice), and the outer op must not enlarge
    the inner one's output."""
    combos = {
        ("Add", "Add"): ("Add", "(Add c1 c2)"),
        ("Add", "Sub"): ("Add", "(Sub c1 c2)"),
        ("Sub", "Add"): ("Add", "(Sub c2 c1)"),
        ("Sub", "Sub"): ("Sub", "(Add c1 c2)"),
    }
    shapes = (("(= s1 s2)", "s1"), (f"(!= s1 s2) (= s2 {ones('s2')}) (<= (vec-length s2) (vec-length s1))", "s1"))
    rules = []
    for (inner, outer), (op, combined) in combos.items():
        for guard, sc in shapes:
            rules.append(
                fact(
                    f"(= y ({outer} z c2)) (= z ({inner} mm c1)) (= mm (MatMul a b)) (is-const c1) (is-const c2) "
                    f"(= s1 (shape c1)) (= s2 (shape c2)) (= sy (shape y)) (= sy (shape z)) (= d1 (dtype c1)) {guard}",
                    f"(let c {combined}) (set (shape c) {sc}) (set (dtype c) d1) "
                    f"(let new ({op} mm c)) (set (shape new) sy) (set (dtype new) d1) (union y new)",
                )
            )
    return tuple(rules)


def _gemm_transpose() -> tuple:
    swap = "(= (vec-length p) 2) (= p (vec-of 1 0))"
    return (
        rw(
            "(Gemm (Transpose a p) b c alpha beta ta tb)",
            "(Gemm a b c alpha beta (- 1 ta) tb)",
            swap,
            "(>= ta 0) (<= ta 1)",
        ),
        rw(
            "(Gemm a (Transpose b p) c alpha beta ta tb)",
            "(Gemm a b c alpha beta ta (- 1 tb))",
            swap,
            "(>= tb 0) (<= tb 1)",
        ),
    )


#: Reshape(MatMul(Reshape(x, [P, K]), W), [d0, .., N]): x of rank n >= 3 whose last dim is K, W [K, N], and the
#: output x's shape with its last dim N. A Reshape to [P, K] with K x's last dim flattens x's leading dims (row-major
#: order), and the outer one restores them: row i of the product is row i of x times W either way.
_FLATTENED = (
    "(= y {outer}) (= mm (MatMul r w)) (= r {inner}) (= sx (shape x)) (= n (vec-length sx)) (>= n 3) "
    "(= sr (shape r)) (= (vec-length sr) 2) (= (vec-get sr 1) (vec-get sx (- n 1))) (= sw (shape w)) "
    "(= (vec-length sw) 2) (= (shape y) (vec-set sx (- n 1) (vec-get sw 1)))"
)


def _flattened_matmul() -> tuple:
    return tuple(
        fact(
            _FLATTENED.format(outer=outer.format(x="mm", k=2), inner=inner.format(x="x", k=1)), "(union y (MatMul x w))"
        )
        for outer in RESHAPES
        for inner in RESHAPES
    )


RULES = [
    Rule(
        "gemm-transpose-fold",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_transpose_into_gemm",
        "Gemm(Transpose(A, [1, 0]), B, C) -> Gemm(A, B, C, transA toggled), likewise B and transB (the same "
        "products: Gemm's flags read the operand transposed)",
        _gemm_transpose(),
        ruleset="simplify",
    ),
    Rule(
        "matmul-add-to-gemm",
        FAMILY,
        "fp-reassoc",
        "onnxruntime:MatMulAddFusion; onnxoptimizer:fuse_matmul_add_bias_into_gemm",
        "MatMul(A, B) +/- c -> Gemm(A, B, c, beta=+/-1) for 2-D A and B [K, N] (constant or not) and a constant c "
        "broadcastable to [M, N]",
        _matmul_to_gemm(),
    ),
    Rule(
        "gemm-bias-fold",
        FAMILY,
        "fp-reassoc",
        "onnxoptimizer:fuse_add_bias_into_conv (Gemm); tvm:FoldConstant",
        "Gemm(A, B, C, beta) +/- c -> Gemm(A, B, C * beta +/- c, beta=1) for a constant c (c - Gemm: "
        "const-minus-linear)",
        _gemm_bias(),
    ),
    Rule(
        "const-minus-linear",
        FAMILY,
        "fp-reassoc",
        "onnxoptimizer:fuse_matmul_add_bias_into_gemm (c - MatMul)",
        "c - MatMul(A, B) -> Gemm(A, B, c, alpha=-1) and c - Gemm(A, B, C, alpha, beta) -> Gemm(A, B, c - C * beta, "
        "alpha=-alpha, beta=1) for a constant c not enlarging the output (MatMul: 2-D A and B)",
        _const_minus(),
    ),
    Rule(
        "const-minus-matmul",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_matmul_add_bias_into_gemm (c - MatMul, any rank)",
        "c - MatMul(A, B) -> MatMul(A, Neg(B)) + c for constant B and c not enlarging the output, A of any rank "
        "(1-D too: no Gemm there); the bias Add is the form the targets fuse (c + MatMul is made MatMul + c by "
        "const-operand-last)",
        CONST_MINUS_MATMUL,
    ),
    Rule(
        "matmul-bias-chain",
        FAMILY,
        "fp-reassoc",
        "coreml:fuse_matmul_weight_bias; onnxruntime:MatMulAddFusion",
        "(MatMul(A, B) +/- c1) +/- c2 -> MatMul(A, B) +/- c for A of any rank and constants c1, c2 combined into c "
        "at lowering (one shape, or c2 single-element): x + c1 + c2 and x + (c1 + c2) round differently",
        _bias_chain(),
    ),
    Rule(
        "matmul-scale-fold",
        FAMILY,
        "fp-reassoc",
        "tvm:BackwardFoldScaleAxis (dense); coreml:fuse_matmul_weight_bias",
        "MatMul(A, B) * s -> MatMul(A, B * s) for constant 2-D B and s per output column or scalar",
        _matmul_scale(),
    ),
    Rule(
        "gemm-scale-fold",
        FAMILY,
        "fp-reassoc",
        "tvm:BackwardFoldScaleAxis (dense)",
        "Gemm(A, B, C) * s -> Gemm(A, B * s, C * s) for constant B and s per output column or scalar "
        "(transB: per row of B)",
        _gemm_scale(),
    ),
    Rule(
        "matmul-unflatten",
        FAMILY,
        "fp-reassoc",
        "tf2onnx Dense (Reshape -> MatMul -> Reshape); onnxruntime:MatMul (N-D input, 2-D weights)",
        "Reshape(MatMul(Reshape(x, [P, K]), W), s) -> MatMul(x, W) for x [..., K] of rank >= 3, W [K, N] and s x's "
        "shape with N last (targets static or run-time): the same rows, possibly computed with another blocking",
        _flattened_matmul(),
    ),
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
    q = " ".join(
        f"(= y{k} (MatMul x w{k})) (= w{k} (Const c{k})) (= r{k} (const-rank w{k})) (= sw{k} (shape w{k})) "
        f"(= (vec-length sw{k}) 2)"
        for k in ks
    )
    q += " " + " ".join(f"(< r{k} r{k + 1})" for k in range(n - 1))
    q += " (= sy0 (shape y0)) (>= (vec-length sy0) 1) (= dt (dtype y0))"
    sizes = "(vec-of " + " ".join(f"(vec-get sw{k} 1)" for k in ks) + ")"
    total = "(+ " * (n - 1) + "(vec-get sw0 1)" + "".join(f" (vec-get sw{k} 1))" for k in range(1, n))
    acts = [
        f"(let wc (Concat {tlist([f'w{k}' for k in ks])} 1))",
        "(let mm (MatMul x wc))",
        f"(set (shape mm) (vec-set sy0 {last} {total}))",
        "(set (dtype mm) dt)",
    ]
    top, outs = "mm", [f"y{k}" for k in ks]
    if bias:
        q += " " + " ".join(
            f"(= z{k} (Add y{k} b{k})) {per_column(f'b{k}', 'sy0')} (= (vec-get s_b{k} {last}) (vec-get sw{k} 1))"
            for k in ks
        )
        acts += [
            f"(let bc (Concat {tlist([f'b{k}' for k in ks])} {last}))",
            "(let ad (Add mm bc))",
            f"(set (shape ad) (vec-set sy0 {last} {total}))",
            "(set (dtype ad) dt)",
        ]
        top, outs = "ad", [f"z{k}" for k in ks]
    acts.append(f"(let sp (Split {top} {last} {sizes}))")
    acts += [f"(union {o} (Out sp {k}))" for k, o in enumerate(outs)]
    return fact(q, " ".join(acts))


RULES += [
    Rule(
        "matmul-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern (matmul with shared input); tvm:CombineParallelDense",
        "MatMul(x, W1), MatMul(x, W2), ... -> Out(Split(MatMul(x, Concat([W1, W2, ...], 1)), -1, [N1, N2, ...]), k) "
        "for constant 2-D W_k (2 to 4 MatMuls)",
        tuple(_merge(n, False) for n in range(2, MAX_MERGE + 1)),
    ),
    Rule(
        "matmul-bias-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern; tvm:CombineParallelDense (with bias)",
        "MatMul(x, W_k) + b_k, ... -> Out(Split(MatMul(x, Concat(W)) + Concat(b), -1, [N_k]), k) for constant "
        "2-D W_k and per-column constant b_k (2 to 4 MatMuls)",
        tuple(_merge(n, True) for n in range(2, MAX_MERGE + 1)),
    ),
]


def _gemm_merge(n: int, bias: bool) -> "Egglog":
    """n Gemms (A, B_k, C_k) with the same alpha, beta, transA, transB, constant B_k in const-rank order, and C_k
    all absent or all constant 1-D of N_k elements: one Gemm over Concat(B_k) (axis 1, or 0 for transB) and
    Concat(C_k), Split along axis 1; each original unioned with its projection."""
    ks = range(n)
    c = [f"c{k}" if bias else "(Absent)" for k in ks]
    q = " ".join(
        f"(= y{k} (Gemm a w{k} {c[k]} alpha beta ta tb)) (= w{k} (Const k{k})) "
        f"(= r{k} (const-rank w{k})) (= sy{k} (shape y{k})) (= (vec-length sy{k}) 2) "
        f"(>= (vec-get sy{k} 1) 0)"
        for k in ks
    )
    q += " " + " ".join(f"(< r{k} r{k + 1})" for k in range(n - 1)) + " (>= tb 0) (<= tb 1) (= dt (dtype y0))"
    if bias:
        q += " " + " ".join(f"(is-const c{k}) (= sc{k} (shape c{k})) (= sc{k} (vec-of (vec-get sy{k} 1)))" for k in ks)
    sizes = "(vec-of " + " ".join(f"(vec-get sy{k} 1)" for k in ks) + ")"
    total = "(+ " * (n - 1) + "(vec-get sy0 1)" + "".join(f" (vec-get sy{k} 1))" for k in range(1, n))
    acts = [
        f"(let wc (Concat {tlist([f'w{k}' for k in ks])} (- 1 tb)))",
        f"(let cc (Concat {tlist(c)} 0))" if bias else "(let cc (Absent))",
        "(let gm (Gemm a wc cc alpha beta ta tb))",
        f"(set (shape gm) (vec-of (vec-get sy0 0) {total}))",
        "(set (dtype gm) dt)",
        f"(let sp (Split gm 1 {sizes}))",
    ]
    acts += [f"(union y{k} (Out sp {k}))" for k in ks]
    return fact(q, " ".join(acts))


# EPILOGUES: activations a MatMul or Gemm runs as its epilogue on some target (extract/targets/*.toml `fused`).


def _epilogue(producer: str) -> tuple:
    """act(Out(Split(p, ax, sizes), k)) -> Out(Split(act(p), ax, sizes), k) for a merged `producer` p: the merged
    product keeps the activation as its epilogue (after the Split, the activation would be costed as fused with
    the original product its class still holds, though no runtime fuses it)."""
    return tuple(
        fact(
            f"(= y {op_pattern(act, 'o')}) (= o (Out sp k)) (= sp (Split p ax sz)) (= p {producer})",
            f"(union y (Out (Split {op_pattern(act, 'p')} ax sz) k))",
        )
        for act in EPILOGUES
    )


RULES += [
    Rule(
        "gemm-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern (gemm with shared input); tvm:CombineParallelDense",
        "Gemm(A, B1, C1), Gemm(A, B2, C2), ... -> Out(Split(Gemm(A, Concat(B, 1 or 0 for transB), Concat(C)), 1, "
        "[N1, N2, ...]), k) for equal alpha, beta, transA, transB, constant B_k and C_k all absent or all 1-D "
        "(2 to 4 Gemms)",
        tuple(_gemm_merge(n, bias) for bias in (False, True) for n in range(2, MAX_MERGE + 1)),
    ),
    Rule(
        "matmul-merge-epilogue",
        FAMILY,
        "exact",
        "tensat:multi-pattern; tvm:CombineParallelDense (activation)",
        "act(Out(Split(p, ax, sizes), k)) -> Out(Split(act(p), ax, sizes), k) for p a MatMul, Gemm or Add (a merged "
        "product and its bias) and act Relu, Gelu or Clip: the merged product keeps its epilogue",
        tuple(e for p in ("(MatMul u v)", "(Add u v)", "(Gemm u v w al be ta tb)") for e in _epilogue(p)),
    ),
]
