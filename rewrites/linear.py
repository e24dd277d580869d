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
with another blocking (any number of products sharing their input, constant weights: each run of consecutive
ones in const-rank order gets one merged form, n (n - 1) / 2 for n products, the one of all n among them; the cost
model decides whether one launch and one read of the input beat the Split).
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact, ones, op_pattern, rw
from eqsat.ops import MATMUL_EPILOGUES as EPILOGUES

FAMILY = "linear"
#: Gemm's float dtypes (dtype-group "gemm", every opset): ONNX allows integer Gemms from opset 11 on, but ONNX
#: Runtime has no integer (nor bfloat16) Gemm kernel, so a MatMul of those types stays a MatMul.
GEMM_OK = '(= dy (dtype y)) (dtype-group "gemm" dy o)'


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
    """MatMul +/- c as one row: the op's sign (additive-sign) is Gemm's beta."""
    return (
        fact(
            f"(= y (Binary op mm c)) (additive op) (additive-sign op sign) {MATMUL_2D} {BIAS} {GEMM_OK}",
            "(union y (Gemm a b c 1.0 sign 0 0))",
        ),
    )


def _gemm_bias() -> tuple:
    """Gemm +/- c, one row per form of C (absent, beta 1, other beta); the op's sign is the new beta (C absent)
    or the op combining C and c."""
    base = f"(= y (Binary op gm c)) (additive op) (additive-sign op sign) {GEMM} {BIAS}"
    present = "(= scc (shape cc)) (<= (vec-length scc) 2)"
    return (
        fact(f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))", "(union y (Gemm a b c alpha sign ta tb))"),
        fact(f"{base} {present} (= beta 1.0)", "(union y (Gemm a b (Binary op cc c) alpha 1.0 ta tb))"),
        fact(
            f"{base} {present} (!= beta 1.0) (= dt (dtype c))",
            "(union y (Gemm a b (Binary op (Mul cc (Scalar beta dt (vec-of 1))) c) alpha 1.0 ta tb))",
        ),
    )


def _const_minus() -> tuple:
    """c - MatMul(A, B) and c - Gemm(A, B, C, alpha, beta): the product's sign goes into alpha."""
    rules = [fact(f"(= y (Sub c mm)) {MATMUL_2D} {BIAS} {GEMM_OK}", "(union y (Gemm a b c -1.0 1.0 0 0))")]
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
        "(let p (MatMul a (Neg b))) (set (shape p) sy) (set (dtype p) db) (union y (Add p c))",  # Neg b: shape-unary
    ),
)


#: per-column(c, r): the constant c, an operand of a Mul or Add whose other operand has shape r, is shaped like r
#: with every axis but the last set to 1 (per output column, or a scalar of r's rank): the guard of the scale folds
#: and matmul-bias-merge, computed once.
PER_COLUMN = (
    fact(f"(= y (Binary op a c)) (scale-or-bias op) (= r (shape a)) {per_column('c', 'r')}", "(per-column c r)"),
)


def _matmul_scale() -> tuple:
    return (
        fact(
            "(= y (Mul mm s)) (= mm (MatMul a b)) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
            "(= sy (shape y)) (= sy (shape mm)) (per-column s sy)",
            "(let nw (Mul b (Reshape s (vec-of 1 -1) 0))) (union y (MatMul a nw)) (set (shape nw) sb)",
        ),
    )


def _gemm_scale() -> tuple:
    """s viewed along B's columns: [1, N] for B [K, N], [N, 1] for transB (B [N, K])."""
    base = (
        f"(= y (Mul gm s)) {GEMM} (>= tb 0) (<= tb 1) (is-const b) (= sb (shape b)) (= (vec-length sb) 2) "
        "(= (vec-length sy) 2) (per-column s sy)"
    )
    weight = "(let nw (Mul b (Reshape s (vec-set (vec-of 1 1) (- 1 tb) -1) 0)))"
    return (
        fact(
            f"{base} (= gm (Gemm a b (Absent) alpha beta ta tb))",
            f"{weight} (union y (Gemm a nw (Absent) alpha beta ta tb)) (set (shape nw) sb)",
        ),
        fact(
            f"{base} (= scc (shape cc))",
            f"{weight} (union y (Gemm a nw (Mul cc s) alpha beta ta tb)) (set (shape nw) sb)",
        ),
    )


def _bias_chain() -> tuple:
    """(mm op1 c1) op2 c2 -> mm op1 (c1 op c2), op Add for one op twice and Sub for mixed ops (additive-chain),
    with the constants combined at lowering, for
    mm = MatMul(A, B) of any rank (matmul-add-to-gemm needs a 2-D A; the targets fuse MatMul + constant Add as
    Gemm does, so an N-D A needs no Reshape to 2-D and back). c1 and c2 have one shape, or c2 is
    single-element of a rank not above c1's: the combined constant has c1's shape (lower-rank constants are
    re-encoded at the output's rank at load, so ranks agree in practice), and the outer op must not enlarge
    the inner one's output."""
    chain = (
        "(= y (Binary op2 z c2)) (= z (Binary op1 mm c1)) (additive-chain op1 op2 op) (= mm (MatMul a b)) "
        "(is-const c1) (is-const c2) (= s1 (shape c1)) (= s2 (shape c2)) (= sy (shape y)) (= sy (shape z))"
    )
    return (
        # one shape: the analysis gives c its shape (and the new sum y's)
        fact(f"{chain} (= s1 s2)", "(union y (Binary op1 mm (Binary op c1 c2)))"),
        fact(
            f"{chain} (!= s1 s2) (= s2 {ones('s2')}) (<= (vec-length s2) (vec-length s1))",
            "(let c (Binary op c1 c2)) (set (shape c) s1) (union y (Binary op1 mm c))",
        ),
    )


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
_FLATTENED = fact(
    "(reshape-of y mm) (= mm (MatMul r w)) (reshape-of r x) (= sx (shape x)) (= n (vec-length sx)) (>= n 3) "
    "(= sr (shape r)) (= (vec-length sr) 2) (= (vec-get sr 1) (vec-get sx (- n 1))) (= sw (shape w)) "
    "(= (vec-length sw) 2) (= (shape y) (vec-set sx (- n 1) (vec-get sw 1)))",
    "(union y (MatMul x w))",
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
        "per-column-facts",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "per-column(c, r) for a constant operand c of Mul/Add shaped like the other operand's shape r with every axis "
        "but the last set to 1 (the relation the scale folds and matmul-bias-merge join)",
        PER_COLUMN,
        ruleset="analysis",
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
        (_FLATTENED,),  # reshape-of: a Reshape to a static or a run-time target (ReshapeDyn)
    ),
]


# ---- multi-pattern merges (TENSAT): products sharing their input, with constant weights ----
# A merge of any number of products, built a pair at a time. An analysis row marks each site (a product over an
# input x with a constant weight, keyed by the weight's const-rank) and each site's next one (`*-next`: the
# least larger const-rank among x's sites of the same kind). A site merges with its next one, and a merged form
# grows by the site next to its last (`merge-tip`); the grown Split extends the smaller one's
# (`split-extends`: its first projections read the same columns). So n sites give one merged form per run of
# consecutive sites in const-rank order (n (n - 1) / 2 forms, the one of all n among them), whatever n is.

#: mm-site(x, r, y, w): y = MatMul(x, w), w a constant 2-D weight of const-rank r.
MM_SITE = fact(
    "(= y (MatMul x w)) (= w (Const c)) (= r (const-rank w)) (= sw (shape w)) (= (vec-length sw) 2)",
    "(mm-site x r y w)",
)
#: mm-bias-site(x, r, z, w, b): z = y + b for a site y and b per column, of w's width.
MM_BIAS_SITE = fact(
    "(mm-site x r y w) (= z (Add y b)) (= sy (shape y)) (per-column b sy) (= s_b (shape b)) "
    "(= (vec-get s_b (- (vec-length sy) 1)) (vec-get (shape w) 1))",
    "(mm-bias-site x r z w b)",
)
MM_NEXT = (
    fact("(mm-site x r y w) (mm-site x q z v) (< r q)", "(set (mm-next x r) q)"),
    fact("(mm-bias-site x r y w b) (mm-bias-site x q z v c) (< r q)", "(set (mm-bias-next x r) q)"),
)
#: Out(Split(p, ax, sizes), k) = Out(Split(p', ax, sizes'), k) when p' is p with columns appended on axis ax.
SPLIT_EXTENDS = fact("(split-extends sp s2) (= o (Out sp k))", "(union o (Out s2 k))")
#: The products matmul-merge and matmul-bias-merge build: dtype(MatMul(a, b)) = dtype(a);
#: shape(MatMul(a, Concat(l, ax))) = a's with its last dim the 2-D weights' width; shape(p + Concat(lb, ax)) =
#: shape(p) for such a p and biases of p's rank, all ones but the last dim, p's width.
MM_FACTS = (
    fact("(= y (MatMul a b)) (= d (dtype a))", "(set (dtype y) d)"),
    fact(
        "(= y (MatMul a b)) (= b (Concat l ax)) (= sa (shape a)) (= n (vec-length sa)) (>= n 1) (= sb (shape b)) "
        "(= (vec-length sb) 2)",
        "(set (shape y) (vec-set sa (- n 1) (vec-get sb 1)))",
    ),
    fact(
        "(= y (Add p c)) (= p (MatMul x (Concat l k))) (= c (Concat lb ax)) (= s (shape p)) (= n (vec-length s)) "
        f"(>= n 1) (= (shape c) (vec-set {ones('s')} (- n 1) (vec-get s (- n 1))))",
        "(set (shape y) s)",
    ),
)
MM_PAIR = fact(
    "(mm-site x r y w) (= q (mm-next x r)) (mm-site x q z v) (= sy (shape y)) (= n (vec-length sy)) (>= n 1) "
    "(= a (vec-get (shape w) 1)) (= b (vec-get (shape v) 1))",
    "(let sp (Split (MatMul x (Concat (TCons w (TCons v (TNil))) 1)) (- n 1) (vec-of a b))) (union y (Out sp 0)) "
    "(union z (Out sp 1)) (merge-tip sp q)",
)
MM_GROW = fact(
    "(merge-tip sp r) (= sp (Split mm ax ns)) (= mm (MatMul x (Concat l 1))) (= q (mm-next x r)) "
    "(mm-site x q y w) (= a (vec-get (shape w) 1))",
    "(let s2 (Split (MatMul x (Concat (TAppend l (TCons w (TNil))) 1)) ax (vec-push ns a))) "
    "(union y (Out s2 (vec-length ns))) (split-extends sp s2) (merge-tip s2 q)",
)
MM_BIAS_PAIR = fact(
    "(mm-bias-site x r y w c) (= q (mm-bias-next x r)) (mm-bias-site x q z v d) (= sy (shape y)) "
    "(= n (vec-length sy)) (= a (vec-get (shape w) 1)) (= b (vec-get (shape v) 1))",
    "(let ad (Add (MatMul x (Concat (TCons w (TCons v (TNil))) 1)) (Concat (TCons c (TCons d (TNil))) (- n 1)))) "
    "(let sp (Split ad (- n 1) (vec-of a b))) (union y (Out sp 0)) (union z (Out sp 1)) (merge-tip sp q)",
)
MM_BIAS_GROW = fact(
    "(merge-tip sp r) (= sp (Split ad ax ns)) (= ad (Add (MatMul x (Concat l 1)) (Concat lb ax))) "
    "(= q (mm-bias-next x r)) (mm-bias-site x q y w b) (= a (vec-get (shape w) 1))",
    "(let a2 (Add (MatMul x (Concat (TAppend l (TCons w (TNil))) 1)) (Concat (TAppend lb (TCons b (TNil))) ax))) "
    "(let s2 (Split a2 ax (vec-push ns a))) (union y (Out s2 (vec-length ns))) (split-extends sp s2) "
    "(merge-tip s2 q)",
)

RULES += [
    Rule(
        "matmul-merge-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "mm-site(x, r, y, W) for MatMul(x, W) with a constant 2-D W of const-rank r; mm-bias-site for such a product "
        "plus a per-column constant; mm-next, mm-bias-next: the next const-rank among an input's sites; "
        "Out(Split(p, ax, s), k) = Out(Split(p', ax, s'), k) for a merged p' extending p (split-extends); the dtype "
        "and shape of a MatMul over concatenated weights (and its bias)",
        (MM_SITE, MM_BIAS_SITE, *MM_NEXT, SPLIT_EXTENDS, *MM_FACTS),
        ruleset="analysis",
    ),
    Rule(
        "matmul-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern (matmul with shared input); tvm:CombineParallelDense",
        "MatMul(x, W1), MatMul(x, W2), ... -> Out(Split(MatMul(x, Concat([W1, W2, ...], 1)), -1, [N1, N2, ...]), k) "
        "for constant 2-D W_k, any number: each run of consecutive sites (const-rank order), grown a site at a time",
        (MM_PAIR, MM_GROW),
    ),
    Rule(
        "matmul-bias-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern; tvm:CombineParallelDense (with bias)",
        "MatMul(x, W_k) + b_k, ... -> Out(Split(MatMul(x, Concat(W)) + Concat(b), -1, [N_k]), k) for constant "
        "2-D W_k and per-column constant b_k, any number: each run of consecutive sites, grown a site at a time",
        (MM_BIAS_PAIR, MM_BIAS_GROW),
    ),
]


#: gemm-site(a, alpha, beta, transA, transB, r, y, w) for y = Gemm(a, w, (Absent), ...), and
#: gemm-bias-site(..., c) for y = Gemm(a, w, c, ...) with c a constant [N]: w a constant of const-rank r, the output
#: 2-D of static width N.
_GEMM_SITE = (
    "(= y (Gemm a w c al be ta tb)) (= w (Const k)) (= r (const-rank w)) (= sy (shape y)) (= (vec-length sy) 2) "
    "(>= (vec-get sy 1) 0) (>= tb 0) (<= tb 1)"
)
GEMM_SITES = (
    fact(f"{_GEMM_SITE} (= c (Absent))", "(gemm-site a al be ta tb r y w)"),
    fact(f"{_GEMM_SITE} (is-const c) (= (shape c) (vec-of (vec-get sy 1)))", "(gemm-bias-site a al be ta tb r y w c)"),
)
GEMM_NEXT = (
    fact(
        "(gemm-site a al be ta tb r y w) (gemm-site a al be ta tb q z v) (< r q)",
        "(set (gemm-next a al be ta tb r) q)",
    ),
    fact(
        "(gemm-bias-site a al be ta tb r y w c) (gemm-bias-site a al be ta tb q z v d) (< r q)",
        "(set (gemm-bias-next a al be ta tb r) q)",
    ),
)


def _gemm_pair(bias: bool) -> Egglog:
    """The site of const-rank r and its next one: one Gemm over Concat(B) (axis 1, or 0 for transB) and
    Concat(C) (or no C), Split along axis 1."""
    site, c, d, cc = ("gemm-site", "", "", "(Absent)")
    if bias:
        site, c, d, cc = ("gemm-bias-site", " c", " d", "(Concat (TCons c (TCons d (TNil))) 0)")
    return fact(
        f"({site} a al be ta tb r y w{c}) (= q ({site[:-4]}next a al be ta tb r)) ({site} a al be ta tb q z v{d}) "
        "(= m (vec-get (shape y) 1)) (= n (vec-get (shape z) 1))",
        f"(let sp (Split (Gemm a (Concat (TCons w (TCons v (TNil))) (- 1 tb)) {cc} al be ta tb) 1 (vec-of m n))) "
        "(union y (Out sp 0)) (union z (Out sp 1)) (merge-tip sp q)",
    )


def _gemm_grow(bias: bool) -> Egglog:
    """A merged Gemm whose last site has const-rank r, grown by the next site."""
    site, c, cc, c2 = ("gemm-site", "", "(Absent)", "(Absent)")
    if bias:
        site, c, cc, c2 = ("gemm-bias-site", " c", "(Concat lc 0)", "(Concat (TAppend lc (TCons c (TNil))) 0)")
    return fact(
        f"(merge-tip sp r) (= sp (Split gm 1 ns)) (= gm (Gemm a (Concat l ax) {cc} al be ta tb)) "
        f"(= q ({site[:-4]}next a al be ta tb r)) ({site} a al be ta tb q y w{c}) (= n (vec-get (shape y) 1))",
        f"(let s2 (Split (Gemm a (Concat (TAppend l (TCons w (TNil))) ax) {c2} al be ta tb) 1 (vec-push ns n))) "
        "(union y (Out s2 (vec-length ns))) (split-extends sp s2) (merge-tip s2 q)",
    )


#: dtype(Gemm(a, ...)) = dtype(a); shape(Gemm(a, Concat(l, ax), ...)) = [M, N] read from a and the weights as
#: transA and transB say (the Gemms gemm-merge builds).
GEMM_FACTS = (
    fact("(= y (Gemm a b c al be ta tb)) (= d (dtype a))", "(set (dtype y) d)"),
    fact(
        "(= y (Gemm a b c al be ta tb)) (= b (Concat l ax)) (= sa (shape a)) (= (vec-length sa) 2) (= sb (shape b)) "
        "(= (vec-length sb) 2) (>= ta 0) (<= ta 1) (>= tb 0) (<= tb 1)",
        "(set (shape y) (vec-of (vec-get sa ta) (vec-get sb (- 1 tb))))",
    ),
)


# EPILOGUES: activations a MatMul or Gemm runs as its epilogue on some target (extract/targets/*.toml `fused`).


def _epilogue() -> tuple:
    """act(Out(Split(p, ax, sizes), k)) -> Out(Split(act(p), ax, sizes), k) for a Split a merge made (merge-tip:
    matmul-merge, matmul-bias-merge, gemm-merge; conv-merge's too, whose own epilogue rule covers its
    activations): the merged product keeps the activation as its epilogue (after the Split, the activation would
    be costed as fused with the original product its class still holds, though no runtime fuses it). One row per
    activation, not per activation and product."""
    return tuple(
        fact(
            f"(= y {op_pattern(act, 'o')}) (= o (Out sp k)) (merge-tip sp q) (= sp (Split p ax sz))",
            f"(union y (Out (Split {op_pattern(act, 'p')} ax sz) k))",
        )
        for act in EPILOGUES
    )


RULES += [
    Rule(
        "gemm-merge-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "gemm-site(A, alpha, beta, transA, transB, r, y, B, C) for Gemm(A, B, C) with a constant B of const-rank r, "
        "a 2-D output and C absent (gemm-bias-site: C constant 1-D); gemm-next, gemm-bias-next: the next const-rank "
        "among A's sites; the dtype and shape of a Gemm over concatenated weights",
        (*GEMM_SITES, *GEMM_NEXT, *GEMM_FACTS),
        ruleset="analysis",
    ),
    Rule(
        "gemm-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern (gemm with shared input); tvm:CombineParallelDense",
        "Gemm(A, B1, C1), Gemm(A, B2, C2), ... -> Out(Split(Gemm(A, Concat(B, 1 or 0 for transB), Concat(C)), 1, "
        "[N1, N2, ...]), k) for equal alpha, beta, transA, transB, constant B_k and C_k all absent or all 1-D, any "
        "number: each run of consecutive sites (const-rank order), grown a site at a time",
        tuple(row(bias) for bias in (False, True) for row in (_gemm_pair, _gemm_grow)),
    ),
    Rule(
        "matmul-merge-epilogue",
        FAMILY,
        "exact",
        "tensat:multi-pattern; tvm:CombineParallelDense (activation)",
        "act(Out(Split(p, ax, sizes), k)) -> Out(Split(act(p), ax, sizes), k) for the Split of a merge (p a merged "
        "MatMul, Gemm or MatMul plus bias) and act Relu, Gelu or Clip: the merged product keeps its epilogue",
        _epilogue(),
    ),
]
