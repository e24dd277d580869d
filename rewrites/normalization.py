"""Normalization rules: the exporters' decompositions fused into LayerNormalization / InstanceNormalization,
and the reverse decomposition, so that the extractor picks per target. (Mul + Add by per-channel constants
<-> BatchNormalization lives in the conv family: bn-compose, bn-decompose.)

    Div(Sub(x, m), Sqrt(Add(ReduceMean(Pow(Sub(x, m), 2), ax), eps)))  -> LayerNormalization(x, 1, -, axis=a, eps)
        where m = ReduceMean(x, ax, keepdims=1), ax = the trailing axes a..r-1 (static dims); opset >= 17
        (matched as Mul(d, d) and Div: Pow(d, 2) and Mul(d, Reciprocal(Sqrt(..))) get there by norm-moment-forms)
    (the same moments over contiguous axes that are not trailing)
                                         -> Transpose(LayerNormalization(Transpose(x, p), 1, -), p^-1)
                                            p: the other axes, then the normalized ones
    Mul(LayerNormalization(x, 1, -), g)   -> LayerNormalization(x, g, -)    g constant nd or (1, .., 1) + nd
    Add(LayerNormalization(x, s, -), b)   -> LayerNormalization(x, s, b)    b likewise (nd: the normalized dims)
    LayerNormalization(x, s, b, last axis)
                                         -> Add(Mul(Div(Sub(x, m), Sqrt(Add(ReduceMean(Mul(d, d)), eps))), s), b)
    (the same moments over the spatial axes 2..r-1)   -> InstanceNormalization(x, 1, 0, eps)
    (the same over the axes 1..r-2 of channels-last x) -> Transpose(InstanceNormalization(Transpose(x, C first)), back)
    Mul(InstanceNormalization(x, 1, 0), g)            -> InstanceNormalization(x, g, 0)    g constant (1, C, 1, ...)
    Add(InstanceNormalization(x, s, 0), b)            -> InstanceNormalization(x, s, b)    b constant (1, C, 1, ...)

Canonicalizations that bring other exported forms to the ones above (coremltools' variants):
    Pow(d, 2) -> Mul(d, d),  Mul(d, Reciprocal(Sqrt(v))) -> Div(d, Sqrt(v))   d = x - ReduceMean(x, keepdims)
                                  (also Mul(Reciprocal(Sqrt(v)), d))
    Mul(x, Reciprocal(Sqrt(ve))), Mul(Reciprocal(Sqrt(ve)), x) -> Div(x, Sqrt(ve))   any x (RMSNorm), ve = var + eps
    Pow(ve, -0.5), Div(1, Sqrt(ve))  -> Reciprocal(Sqrt(ve)),  Pow(ve, 0.5) -> Sqrt(ve)   ve = var + eps
    Add(Mul(x, k), Sub(b, Mul(m, k))) -> Add(Mul(Sub(x, m), k), b)     m = ReduceMean(x, keepdims) (folded form;
        also Sub(Mul(x, k), Mul(m, k)) and Add(Mul(x, k), Neg(Mul(m, k))) -> Mul(Sub(x, m), k))
    Mul(Sub(x, m), Mul(g, r))         -> Mul(Mul(Sub(x, m), r), g)      r = Reciprocal(Sqrt(ve)), g constant
    Mul(Add(n, b), g)                 -> Add(Mul(n, g), Mul(b, g))      n = LN(x, 1, -) or IN(x, 1, 0), b, g constants
                                                                        (b * g is folded at lowering)

Fused and decomposed forms stay together in the e-graph; the target's cost model chooses (a target
without a LayerNormalization kernel keeps the primitives). All are `fp-reassoc`: the fused kernels compute
the same formula in another order (onnxruntime's LayerNormalization computes the variance as
E[x^2] - E[x]^2). Constant arithmetic (reshaped gammas) stays symbolic and is
evaluated once at lowering.

Guards: the reductions keep dims over exactly the normalized axes of the same `x`; the affine constants
vary only along the normalized axes (LayerNormalization) or the channel axis (instance/batch norm), so
the fused node cannot broadcast differently; LayerNormalization needs opset 17 (`(model-opset)`); only
FLOAT graphs are fused: the kernels compute in float32, so fusing a FLOAT16 decomposition would drop its
fp16 roundings (precision-changing), and a DOUBLE one would lose precision.
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact, ones

#: LayerNormalization needs opset 17.
OPSET_LN = "(= o (model-opset)) (>= o 17)"
#: The fused kernels compute in float32 (stash_type=1): for FLOAT that is a reordering (fp-reassoc); for
#: FLOAT16 it drops the decomposition's fp16 roundings (precision-changing: not fused); DOUBLE would lose
#: precision.
FUSED_DTYPES = '(= dt "FLOAT")'


#: The relation of each commutative op that holds its operands in both orders (rewrites/analysis.py operand-orders):
#: `(mul-of y a b)` matches y = a * b and y = b * a, as exporters write either.
OPERANDS = {"Mul": "mul-of", "Add": "add-of"}


#: norm-moments(y, x, ax, eps): y = (x - m) / sqrt(ReduceMean((x - m)^2, ax) + eps) with m = ReduceMean(x, ax,
#: keepdims), of x's shape, x FLOAT (the fused kernels compute in float32: FUSED_DTYPES). One canonical form: the
#: exporters' Pow(d, 2) and Mul(d, Reciprocal(std)) are brought to it by norm-moment-forms. Keyed on y's e-class and
#: computed once (analysis), so that the four fusions join one atom instead of repeating the moments.
MOMENTS = fact(
    "(= d (Sub x (ReduceMean x ax 1))) (= y (Div d (Sqrt (Add (ReduceMean (Mul d d) ax 1) (Scalar eps ed es))))) "
    f"(= s (shape x)) (= (shape y) s) (= dt (dtype x)) {FUSED_DTYPES}",
    "(norm-moments y x ax eps)",
)
#: The normalized value of a fusion: its e-class, x, the axes and epsilon.
MOMENTS_OF = "(norm-moments __root x ax eps)"


#: The variance-plus-epsilon of a normalization: Add(ReduceMean(q, ax, keepdims), eps).
_VE = "(= ve (Add (ReduceMean q ax 1) (Scalar eps ed es)))"


def _moment_forms() -> tuple:
    """Pow(d, 2) -> Mul(d, d) and Mul(d, Reciprocal(Sqrt(v))) (either operand order) -> Div(d, Sqrt(v)) for
    d = x - ReduceMean(x): the variants exporters write, in the form the fusions match (the exponent must not
    broadcast d). Any x (RMSNorm: x * rsqrt(mean(x^2) + eps), either operand order) when v is a variance plus
    epsilon (_VE): a Reciprocal has its operand's shape, so Mul and Div broadcast alike."""
    d = "(= d (Sub x (ReduceMean x ax 1)))"
    return (
        fact(f"(= __root (Pow d (Scalar 2.0 pd ps))) {d} (= (shape __root) (shape d))", "(union __root (Mul d d))"),
        # d * rstd as BERT exports it, rstd * d as others (mul-of: either operand order)
        fact(f"(mul-of __root d rq) (= rq (Reciprocal q)) (= q (Sqrt v)) {d}", "(union __root (Div d q))"),
        fact(f"(mul-of __root x rs) (= rs (Reciprocal sd)) (= sd (Sqrt ve)) {_VE}", "(union __root (Div x sd))"),
    )


def trailing(a: str, n: str) -> str:
    """The axes a, a+1, ..., a+n-1 as a vector (n must be bound and >= 0)."""
    return f'(unstable-vec-map (unstable-fn "+" {a}) (vec-range {n}))'


def normalized_dims(s: str, a: str, n: str) -> str:
    """s[a], ..., s[a+n-1]: the dims of the axes a.. (a + n <= length of s must hold)."""
    return f'(unstable-vec-map (unstable-fn "vec-get" {s}) {trailing(a, n)})'


#: ln-span(y, x, ax, a, nd, eps): the moments y of x (norm-moments) over contiguous axes ax = a..a+n-1 (axes are
#: normalized, sorted and unique, so they are exactly when they equal a, a+1, ...) with static dims nd there (the
#: scale is a tensor of shape nd), not all 1 (a single element: see _in_core), opset >= 17. Computed once (analysis).
LN_SPAN = fact(
    "(norm-moments y x ax eps) (= s (shape x)) (= r (vec-length s)) (= n (vec-length ax)) (>= n 1) "
    f"(= a (vec-get ax 0)) (>= a 0) (<= (+ a n) r) (= ax {trailing('a', 'n')}) (= nd {normalized_dims('s', 'a', 'n')}) "
    f'(= nd (unstable-vec-map (unstable-fn "max" 1) nd)) (!= nd {ones("nd")}) {OPSET_LN}',
    "(ln-span y x ax a nd eps)",
)
#: The shape and dtype of a LayerNormalization or InstanceNormalization: its input's (for the nodes the fusions
#: create; loaded ones have them from the loader).
NORM_SHAPES = tuple(
    fact(f"(= y {norm}) (= s (shape x)) (= d (dtype x))", "(set (shape y) s) (set (dtype y) d)")
    for norm in ("(LayerNormalization x sc b a eps st)", "(InstanceNormalization x sc b eps)")
)


def _ln_core() -> Egglog:
    """Moments over the trailing axes a..r-1 (one or several) -> LayerNormalization(axis=a)."""
    return fact(
        "(ln-span __root x ax a nd eps) (= (+ a (vec-length ax)) (vec-length (shape x)))",
        '(let one (Scalar 1.0 "FLOAT" nd)) (union __root (LayerNormalization x one (Absent) a eps 1))',
    )


def _ln_transposed() -> Egglog:
    """Moments over contiguous axes a..a+n-1 that are not the trailing ones -> Transpose(LayerNormalization(
    Transpose(x, p), axis=r-n), p^-1) with p = (the other axes in order) + (the normalized ones): a channels-first
    LayerNorm (ConvNeXt) as one kernel between two transposes; the extractor weighs them against the
    primitives. Same guards as _ln_core (static normalized dims, not all 1; inverse perms exist up to rank 5)."""
    perm = (
        '(vec-append (vec-range a) (vec-append (unstable-vec-map (unstable-fn "+" (+ a n)) '
        "(vec-range (- r (+ a n)))) ax))"
    )
    return fact(
        "(ln-span __root x ax a nd eps) (= r (vec-length (shape x))) (= n (vec-length ax)) (< (+ a n) r) "
        f"(= p {perm}) (= ip (inv-perm p))",
        '(let one (Scalar 1.0 "FLOAT" nd)) '
        "(union __root (Transpose (LayerNormalization (Transpose x p) one (Absent) (- r n) eps 1) ip))",
    )


#: ln-dims(x, a, nd, lead): a LayerNormalization of x over the axes a..r-1 (0 <= a < r = rank of x) normalizes the
#: dims nd = x's dims there; lead = (1, .., 1) + nd (a ones, x's rank). Computed once per LayerNormalization.
LN_DIMS = fact(
    "(= y (LayerNormalization x sc b a eps st)) (= sx (shape x)) (= r (vec-length sx)) (>= a 0) (< a r) "
    f"(= n (- r a)) (= nd {normalized_dims('sx', 'a', 'n')})",
    f"(ln-dims x a nd (vec-append {ones('(vec-range a)')} nd))",
)


def _ln_affine(op: str) -> tuple:
    """Mul(LN(x, 1, -), c) -> LN(x, c', -) and Add(LN(x, s, -), c) -> LN(x, s, c') over the axes a..r-1: c
    varies only along them. c' is c itself when c's shape is the normalized dims nd, else c (of shape
    (1, .., 1) + nd, ln-dims's lead) reshaped to nd (never a Reshape of a c already of shape nd: the decomposition
    and this rule would build ever longer Reshape chains)."""
    ln = (
        "(LayerNormalization x (Scalar 1.0 dt sd) (Absent) a eps st)"
        if op == "Mul"
        else "(LayerNormalization x sc (Absent) a eps st)"
    )
    bind = "" if op == "Mul" else "(= sd (shape sc)) "
    rules = []
    for direct in (True, False):
        cr = "c" if direct else "cr"
        new = (
            f"(LayerNormalization x {cr} (Absent) a eps st)"
            if op == "Mul"
            else f"(LayerNormalization x sc {cr} a eps st)"
        )
        reshape = "" if direct else "(let cr (Reshape c sd 0)) (set (shape cr) sd) (set (dtype cr) ct) "
        shape = "(= (shape c) sd)" if direct else "(> a 0) (= (shape c) lead) (= ct (dtype c))"
        rules.append(
            fact(
                f"({OPERANDS[op]} __root ln c) (= ln {ln}) {bind}(is-const c) (ln-dims x a sd lead) {shape}",
                f"{reshape}(union __root {new})",
            )
        )
    return tuple(rules)


#: The shapes and dtypes of the moments over one axis a (those layernorm-decompose builds): m = ReduceMean(x, [a],
#: keepdims) has x's shape with dim a 1, d = x - m x's shape, v = ReduceMean(d * d, [a], keepdims) m's, and
#: d / sqrt(v + eps) d's (eps a rank-0 Scalar). Keyed on the nodes (analysis), so the decomposition states only
#: the rewrite; loaded moments have these facts already.
_M = "(= d (Sub x m)) (= m (ReduceMean x ax 1))"
_V = "(= v (ReduceMean (Mul d d) ax 1))"
MOMENT_SHAPES = (
    fact(
        f"{_M} (= (vec-length ax) 1) (= a (vec-get ax 0)) (= s (shape x)) (>= a 0) (< a (vec-length s)) "
        "(= dt (dtype x))",
        "(set (shape m) (vec-set s a 1)) (set (dtype m) dt) (set (shape d) s)",
    ),
    fact(f"{_V} {_M} (= sm (shape m)) (= dt (dtype x))", "(set (shape v) sm) (set (dtype v) dt)"),
    fact(f"(= n (Div d (Sqrt (Add v (Scalar e et (vec-empty)))))) {_V} {_M} (= s (shape d))", "(set (shape n) s)"),
)


def _ln_decompose() -> tuple:
    """LayerNormalization over the last axis (FLOAT, stash_type 1) -> primitives; with and without B. The moments'
    facts come from MOMENT_SHAPES, d * d's from shape-binary; only the broadcasting product by the scale is set here
    (without B it joins the LayerNormalization's class, which has its shape)."""
    body = (
        "(let m (ReduceMean x (vec-of a) 1)) (let d (Sub x m)) "
        '(let n (Div d (Sqrt (Add (ReduceMean (Mul d d) (vec-of a) 1) (Scalar eps "FLOAT" (vec-empty)))))) '
        "(let y (Mul n sc)) "
    )
    guard = (
        '(= sx (shape x)) (= a (- (vec-length sx) 1)) (>= a 0) (= (dtype x) "FLOAT") '
        "(= (shape sc) (vec-of (vec-get sx a)))"
    )
    return (
        fact(
            f"(= __root (LayerNormalization x sc b a eps 1)) {guard} (= (shape b) (shape sc))",
            f"{body}(set (shape y) sx) (union __root (Add y b))",
        ),
        fact(f"(= __root (LayerNormalization x sc (Absent) a eps 1)) {guard}", f"{body}(union __root y)"),
    )


#: in-site(y, x, k, eps): the moments y of x (norm-moments) over every axis but 0 and the channel axis k, 1 (the
#: spatial axes 2..r-1) or r-1 (channels last: 1..r-2), rank >= 3, a static channel dim, opset >= 6; not over a
#: single element (a first spatial dim of 1): the decomposition is exactly 0 there, while the fused kernels'
#: variance (E[x^2] - E[x]^2) leaves a rounding residue that 1 / sqrt(eps) amplifies (fuzz seed 20003: 3e-5
#: absolute on an output of 0.015). Axes are normalized (sorted and unique), so the first and the last of r-2 of
#: them fix them all: the first axis a is 2 (channel k = 1) or 1 (k = r - 1), the last a + r - 3, and k = 1 + (2 - a)
#: (r - 2) says both.
IN_SITES = (
    fact(
        "(norm-moments y x ax eps) (= s (shape x)) (= r (vec-length s)) (>= r 3) (= (vec-length ax) (- r 2)) "
        "(= a (vec-get ax 0)) (>= a 1) (<= a 2) (= (vec-get ax (- r 3)) (+ a (- r 3))) (> (vec-get s a) 1) "
        "(= k (+ 1 (* (- 2 a) (- r 2)))) (>= (vec-get s k) 0) (= o (model-opset)) (>= o 6)",
        "(in-site y x k eps)",
    ),
)


def _in_core() -> Egglog:
    """Moments over the spatial axes 2..r-1 of an (N, C, ...) tensor -> InstanceNormalization(x, 1, 0, eps)."""
    return fact(
        "(in-site __root x 1 eps) (= s (shape x))",
        '(let cs (vec-of (vec-get s 1))) (let one (Scalar 1.0 "FLOAT" cs)) (let zero (Scalar 0.0 "FLOAT" cs)) '
        "(union __root (InstanceNormalization x one zero eps))",
    )


def _in_channels_last() -> Egglog:
    """Moments over the axes 1..r-2 of a channels-last (N, ..., C) tensor -> Transpose(InstanceNormalization(
    Transpose(x, [0, r-1, 1, ..., r-2])), [0, 2, ..., r-1, 1]): TF's channels-last InstanceNorm as the kernel
    between two transposes."""
    return fact(
        "(in-site __root x k eps) (> k 1) (= s (shape x)) "
        "(= p (vec-append (vec-of 0 k) (vec-remove (vec-range k) 0))) (= ip (inv-perm p))",
        '(let cs (vec-of (vec-get s k))) (let one (Scalar 1.0 "FLOAT" cs)) (let zero (Scalar 0.0 "FLOAT" cs)) '
        "(union __root (Transpose (InstanceNormalization (Transpose x p) one zero eps) ip))",
    )


def _in_affine(op: str) -> tuple:
    """Mul(IN(x, 1, 0), c) -> IN(x, c', 0) and Add(IN(x, s, 0), c) -> IN(x, s, c'): per-channel constants."""
    if op == "Mul":
        inorm, new = (
            "(InstanceNormalization x (Scalar 1.0 dt cs) (Scalar 0.0 dt cs) eps)",
            "(InstanceNormalization x cr (Scalar 0.0 dt cs) eps)",
        )
    else:
        inorm, new = ("(InstanceNormalization x sc (Scalar 0.0 dt cs) eps)", "(InstanceNormalization x sc cr eps)")
    return (
        fact(
            f"({OPERANDS[op]} __root nrm c) (= nrm {inorm}) (is-const c) (= sx (shape x)) (>= (vec-length sx) 3) "
            f"(= (vec-length cs) 1) (= (shape c) (vec-set {ones('sx')} 1 (vec-get cs 0)))",
            f"(let cr (Reshape c cs 0)) (set (shape cr) cs) (set (dtype cr) dt) (union __root {new})",
        ),
    )


def _rsqrt_forms() -> tuple:
    """Pow(ve, -0.5) and Div(1, Sqrt(ve)) -> Reciprocal(Sqrt(ve)), Pow(ve, 0.5) -> Sqrt(ve): the forms the
    fusions match, for ve the variance plus epsilon (the exponent / numerator must not broadcast: the output
    shape is ve's)."""
    return tuple(
        fact(f"(= __root {pattern}) {_VE} (= (shape __root) (shape ve))", f"(union __root {target})")
        for pattern, target in (
            ("(Pow ve (Scalar -0.5 pd ps))", "(Reciprocal (Sqrt ve))"),
            ("(Div (Scalar 1.0 od os) (Sqrt ve))", "(Reciprocal (Sqrt ve))"),
            ("(Pow ve (Scalar 0.5 pd ps))", "(Sqrt ve)"),
        )
    )


def _unfold_shift() -> tuple:
    """x*k + (b - m*k) -> (x - m)*k + b, x*k - m*k and x*k + -(m*k) -> (x - m)*k, for m = ReduceMean(x, ax,
    keepdims=1): the folded form x * (g * rsqrt(var + eps)) + (b - mean * g * rsqrt(var + eps)) (TF's
    batch_normalization) brought back to the moments the fusions match. m keeps x's rank and broadcasts
    into it, so (x - m) has x's shape and (x - m)*k has x*k's (their dtypes: shape-binary's dtype row)."""
    mk = "(Mul m k)"  # as TF and coremltools write it (x * k, mean * k); the sums in either order (add-of)
    return tuple(
        fact(
            f"{pattern} (= m (ReduceMean x ax 1)) (= xk (Mul x k)) (= sx (shape x)) (= sk (shape xk)) "
            f"(= (vec-length (shape m)) (vec-length sx)) (= dt (dtype x)) {FUSED_DTYPES} (= sr (shape __root))",
            "(let d (Sub x m)) (set (shape d) sx) (let dk (Mul d k)) (set (shape dk) sk) "
            + ("(let y (Add dk b)) (set (shape y) sr) (union __root y)" if shifted else "(union __root dk)"),
        )
        for pattern, shifted in (
            (f"(add-of __root xk sb) (= sb (Sub b {mk}))", True),
            (f"(= __root (Sub xk {mk}))", False),
            (f"(add-of __root xk ng) (= ng (Neg {mk}))", False),
        )
    )


def _regroup_scale() -> tuple:
    """(x - m) * (g * r) -> ((x - m) * r) * g for r = Reciprocal(Sqrt(ve)) of m's shape and a constant g:
    the gamma of a folded normalization moved outside, where the scale fusions find it."""
    return (
        fact(
            "(= __root (Mul d k)) (mul-of k g r) (= d (Sub x m)) (= m (ReduceMean x ax 1)) "
            f"(= r (Reciprocal (Sqrt ve))) {_VE} (is-const g) (= (shape r) (shape m)) (= sx (shape x)) "
            f"(= (shape d) sx) (= dt (dtype x)) {FUSED_DTYPES}",
            "(let dr (Mul d r)) (set (shape dr) sx) (set (dtype dr) dt) (union __root (Mul dr g))",
        ),
    )


def _distribute_affine() -> tuple:
    """(n + b) * g -> n*g + b*g for n = LN(x, 1, -) or IN(x, 1, 0) and constants b, g of one shape that
    broadcast into n's (b*g is evaluated at lowering): the scale and bias fusions then take both. Constant-first
    operands (b + n, g * (n + b)) are turned constant-last by const-operand-last (conv family)."""
    norms = (
        "(LayerNormalization x (Scalar 1.0 dt sd) (Absent) a eps st)",
        "(InstanceNormalization x (Scalar 1.0 dt sd) (Scalar 0.0 dt sd) eps)",
    )
    return tuple(
        fact(
            f"(= __root {mul}) (= nb {add}) (= nrm {norm}) (is-const b) (is-const g) (= sb (shape b)) "
            "(= sb (shape g)) (= sn (shape nrm)) (= (shape nb) sn) (= (shape __root) sn) (= bt (dtype b))",
            "(let ng (Mul nrm g)) (set (shape ng) sn) (set (dtype ng) dt) "
            "(let bg (Mul b g)) (set (shape bg) sb) (set (dtype bg) bt) (union __root (Add ng bg))",
        )
        for norm in norms
        for add in ("(Add nrm b)",)
        for mul in ("(Mul nb g)",)
    )


RULES = [
    Rule(
        "layernorm-fuse",
        "normalization",
        "fp-reassoc",
        "onnxruntime:LayerNormFusion; coreml:fuse_layernorm_or_instancenorm",
        "Div(Sub(x, mean), Sqrt(Add(ReduceMean(Pow(Sub(x, mean), 2)), eps))) -> LayerNormalization(x, 1, -, eps) "
        "over the trailing axes a..r-1 (one or several, static dims; Pow / Reciprocal variants via norm-moment-forms), "
        "keepdims, opset >= 17",
        (_ln_core(),),
    ),
    Rule(
        "layernorm-fuse-transposed",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "the LayerNorm moments over contiguous non-trailing axes (a channels-first LayerNorm) -> "
        "Transpose(LayerNormalization(Transpose(x, normalized axes last)), back), static normalized dims, opset >= 17",
        (_ln_transposed(),),
    ),
    Rule(
        "norm-moment-sites",
        "normalization",
        "exact",
        "eqsat:analysis",
        "norm-moments(y, x, axes, eps) for y = (x - mean) / sqrt(mean((x - mean)^2) + eps) over the same axes, "
        "keepdims, of x's shape, x FLOAT (the relation the LayerNorm and InstanceNorm fusions join)",
        (MOMENTS,),
        ruleset="analysis",
    ),
    Rule(
        "norm-sites",
        "normalization",
        "exact",
        "eqsat:analysis",
        "ln-span(y, x, axes, a, dims, eps) for LayerNorm moments over contiguous axes a.. with static dims, not all 1, "
        "opset >= 17; in-site(y, x, channel axis, eps) for InstanceNorm moments over every axis but 0 and the "
        "channel axis (1, or r-1: channels last), opset >= 6 (the relations the fusions join)",
        (LN_SPAN, *IN_SITES),
        ruleset="analysis",
    ),
    Rule(
        "norm-moment-shapes",
        "normalization",
        "exact",
        "eqsat:analysis",
        "shapes and dtypes of the moments over one axis: ReduceMean(x, [a], keepdims) x's with dim a 1, x - mean x's, "
        "the variance the mean's, (x - mean) / sqrt(var + eps) x's (the nodes layernorm-decompose creates)",
        MOMENT_SHAPES,
        ruleset="analysis",
    ),
    Rule(
        "norm-shapes",
        "normalization",
        "exact",
        "eqsat:analysis",
        "shape and dtype of LayerNormalization(x, ...) and InstanceNormalization(x, ...): x's (the nodes the fusions "
        "create)",
        NORM_SHAPES,
        ruleset="analysis",
    ),
    Rule(
        "layernorm-dims",
        "normalization",
        "exact",
        "eqsat:analysis",
        "ln-dims(x, a, dims, (1, .., 1) + dims) for each LayerNormalization of x over the axes a..: the normalized "
        "dims the affine fusions compare constants with",
        (LN_DIMS,),
        ruleset="analysis",
    ),
    Rule(
        "layernorm-fuse-scale",
        "normalization",
        "fp-reassoc",
        "onnxruntime:LayerNormFusion; coreml:fuse_layernorm_or_instancenorm",
        "Mul(LayerNormalization(x, 1, -), g) -> LayerNormalization(x, g, -) for a constant g of shape (1, ..., 1, D)",
        _ln_affine("Mul"),
    ),
    Rule(
        "layernorm-fuse-bias",
        "normalization",
        "fp-reassoc",
        "onnxruntime:LayerNormFusion; coreml:fuse_layernorm_or_instancenorm",
        "Add(LayerNormalization(x, s, -), b) -> LayerNormalization(x, s, b) for a constant b of shape (1, ..., 1, D)",
        _ln_affine("Add"),
    ),
    Rule(
        "layernorm-decompose",
        "normalization",
        "fp-reassoc",
        "onnx:LayerNormalization function body",
        "LayerNormalization(x, s, b) over the last axis (FLOAT) -> "
        "Add(Mul(Div(Sub(x, mean), Sqrt(Add(var, eps))), s), b)",
        _ln_decompose(),
    ),
    Rule(
        "instancenorm-fuse",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "Div(Sub(x, mean), Sqrt(Add(var, eps))) over the spatial axes 2..r-1 -> InstanceNormalization(x, 1, 0, eps)",
        (_in_core(),),
    ),
    Rule(
        "instancenorm-fuse-channels-last",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "the InstanceNorm moments over the axes 1..r-2 of a channels-last tensor -> Transpose(InstanceNormalization("
        "Transpose(x, channels first)), back) for a static channel dim",
        (_in_channels_last(),),
    ),
    Rule(
        "instancenorm-fuse-affine",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "Mul(InstanceNormalization(x, 1, 0), g) -> InstanceNormalization(x, g, 0); "
        "Add(InstanceNormalization(x, s, 0), b) -> InstanceNormalization(x, s, b) for per-channel constants",
        _in_affine("Mul") + _in_affine("Add"),
    ),
    Rule(
        "norm-moment-forms",
        "normalization",
        "fp-reassoc",
        "onnxruntime:LayerNormFusion (its pattern variants)",
        "Pow(d, 2) -> Mul(d, d) and Mul(d, Reciprocal(Sqrt(v))) (either order) -> Div(d, Sqrt(v)) for "
        "d = x - ReduceMean(x), and x * Reciprocal(Sqrt(v + eps)) -> x / Sqrt(v + eps) for any x (RMSNorm): one "
        "rounding of 1/s fewer, so fp-reassoc; the exporters' variants in the one form the LayerNorm/InstanceNorm "
        "fusions match",
        _moment_forms(),
    ),
    Rule(
        "norm-rsqrt-forms",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "Pow(v + eps, -0.5) and Div(1, Sqrt(v + eps)) -> Reciprocal(Sqrt(v + eps)), Pow(v + eps, 0.5) -> "
        "Sqrt(v + eps) for a variance v = ReduceMean(., keepdims) (Pow: pow and sqrt round differently; Div: exact)",
        _rsqrt_forms(),
    ),
    Rule(
        "norm-unfold-shift",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "x*k + (b - m*k) -> (x - m)*k + b; x*k - m*k and x*k + -(m*k) -> (x - m)*k for m = ReduceMean(x, "
        "keepdims): the folded normalization x*(g*rsqrt(v+eps)) + (b - m*g*rsqrt(v+eps))",
        _unfold_shift(),
    ),
    Rule(
        "norm-regroup-scale",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "(x - m) * (g * Reciprocal(Sqrt(v + eps))) -> ((x - m) * Reciprocal(Sqrt(v + eps))) * g for a constant g",
        _regroup_scale(),
    ),
    Rule(
        "norm-distribute-affine",
        "normalization",
        "fp-reassoc",
        "coreml:fuse_layernorm_or_instancenorm",
        "(n + b) * g -> n*g + b*g for n = LayerNormalization(x, 1, -) or InstanceNormalization(x, 1, 0) and "
        "constants b, g of one shape (b*g is folded at lowering)",
        _distribute_affine(),
    ),
]
