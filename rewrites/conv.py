"""Conv rules: biases, scales and batch norms folded into convolution weights (TVM FoldScaleAxis, coremltools
fuse_conv_bias/scale/batchnorm, onnxruntime ConvBNFusion/ConvAddFusion/ConvMulFusion), zero pads into conv pads.

    Conv(x, W)                      -> Conv(x, W, zeros)                 (an explicit bias for the folds below,
                                                                         when the output meets a constant or a BN;
                                                                         W constant or not)
    Conv(x, W, B) + c               -> Conv(x, W, B + c)                 c per output channel or scalar
    Conv(x, W, B) - c               -> Conv(x, W, B - c)
    c - Conv(x, W, B)               -> Conv(x, -W, c - B)
    Conv(x, W, B) * c               -> Conv(x, W * c, B * c)             c per output channel or scalar, finite
    Conv(x, W, B) / c               -> Conv(x, W / c, B / c)             c > 0, finite
    BatchNormalization(Conv(x, W, B)) -> Conv(x, W * f, (B - mean) * f + beta),  f = gamma / sqrt(var + eps)
    BatchNormalization(x)           -> x * f + (beta - mean * f)         (inference, per channel)
    x * s + t                       -> BatchNormalization(x, s, t, 0, 1, eps=0, momentum=1)   s, t per channel
                                                                         (float x; eps 0 with momentum 1 marks
                                                                         these: neither decomposed nor folded
                                                                         again, no loop; a loaded BN with eps 0
                                                                         and another momentum folds as any)
    Conv(x * s, W, B)               -> Conv(x, W * s over the input-channel axis, B)   (forward FoldScaleAxis)
    Relu(Conv(x, W, B)) * c         -> Relu(Conv(x, W, B) * c)           c > 0 (backward; LeakyRelu likewise)
    Conv(Relu(x * s))               -> Conv(Relu(x) * s)                 s > 0 (forward; LeakyRelu likewise)
    (Conv(x, W, B) +/- y) * c       -> Conv(x, W, B) * c +/- y * c       (backward FoldScaleAxis through Add/Sub)
    Conv(act(x * s + t))            -> Conv(act((x + t / s) * s))        s > 0, t a constant leaf, act Relu or
                                                                         LeakyRelu (forward; without an activation
                                                                         between, bn-compose already makes x * s + t
                                                                         one op, and the tie made the ILP time out)
    Conv(Pad(x, p, constant 0), W)  -> Conv(x, W, pads + p)              (never MaxPool: its padding is -inf)
    c * x, c + x                    -> x * c, x + c                      c a constant leaf (one operand order for
                                                                         the folds)
    Conv(x, W1, B1), Conv(x, W2, B2), ... -> Out(Split(Conv(x, Concat([W1, W2, ...], 0), Concat([B1, B2, ...], 0)),
                                         1, [C1, C2, ...]), k)          (multi-pattern, TENSAT: any number of
                                                                         convs over one input, identical
                                                                         attributes, group 1)
    act(Out(Split(Conv(...), 1, sizes), k)) -> Out(Split(act(Conv(...)), 1, sizes), k)   (conv-merge-epilogue)

Every fold holds for ConvTranspose too, with its channel mapping: its weights are [C_in, C_out/group, k...], so
an output-channel scale runs along axis 1 within each group and an input-channel scale along axis 0 (a conv's
weights are [C_out, C_in/group, k...]: output-channel scale along axis 0, input-channel scale along axis 1
within each group). The pad merge is Conv only (ConvTranspose pads crop the output). A constant divided BY a
conv is never folded (c / conv is not conv / c). Rules are rank-generic: a per-channel constant is one whose
shape is the output's with every axis but 1 set to 1 (`ones` = shape mapped through min(1, d)). Constant
arithmetic stays symbolic in the e-graph and is evaluated once at lowering. Facts for the nodes these rules
create (analysis ruleset): shape(B(a, ones)) = shape(a); positive(Scalar v > 0), and positivity through
Reshape, Transpose, Sqrt, Reciprocal and products, quotients and sums of positives; finite (no NaN or
infinity) through the ops that cannot make one from finite values but by overflow. Scale folds (output,
division, input) need a finite scale: x / c with a 0 in c, once a product by Reciprocal(c) (div-const-to-mul),
would fold as W * inf, and a sum of products of inf weights is NaN where the original's sum / 0 is +-inf.

conv-merge is TENSAT's multi-pattern for convolutions (TVM CombineParallelConv2D): convs that read the same x with
the same auto_pad, dilations, kernel_shape, pads and strides, group 1, constant weights of one dtype whose shapes
differ only on axis 0 (C_out), become one conv over the weights concatenated on axis 0 (and the biases: all absent,
or all constant, an absent one then being zeros), followed by a Split of its channels; each original conv is unioned
with its projection. Convs are taken in const-rank order of their weights: a conv merges with the next one
(conv-next), and a merged conv grows by the conv next to its last, so each run of consecutive convs gets one merged
form (n (n - 1) / 2 for n convs, the one of all n among them), whatever n is. `fp-reassoc`, as matmul-merge: each
output channel is the same sum in math, but a runtime may pick another algorithm (Winograd, im2col tiling, another
GEMM blocking) for another channel count, which changes the summation order. Whether the merged form is chosen is
the cost model's decision (one launch and one read of x against a Split that copies the outputs).
conv-merge-epilogue moves an activation after the Split before it, so that the merged conv keeps it as an epilogue.
Grouped convs are left out: concatenating their weights on axis 0 interleaves the groups wrongly (a merge would need
a group-wise regrouping of weights and outputs). Known limit: the roofline model credits a fused epilogue to any
consumer of a class that holds the producer, so when the branches end differently (a Relu here, a residual Add
there) the epilogues left after the Split are costed as fused with the original convs their classes still hold
(tests/test_rules_conv.py, the xfail test); exact costing needs the extractor to charge a fusion only when the
producer is chosen.
"""

from __future__ import annotations


from eqsat.engine.rule import Egglog, Rule, fact, ones
from eqsat.rewrites.conv_facts import BN_FOLDS, PER_CHANNEL, broadcast_shape, finite_facts, positive_facts

FAMILY = "conv"
KINDS = ("Conv", "ConvTranspose")


def conv(kind: str, w: str = "w", b: str = "b", x: str = "x") -> str:
    """A `kind` term with input `x`, weights `w`, bias `b`, and its other parameters as variables."""
    if kind == "Conv":
        return f"(Conv {x} {w} {b} ap dl g ks pd st)"
    return f"(ConvTranspose {x} {w} {b} ap dl g ks op os pd st)"


def flat(c: str) -> str:
    return f"(Reshape {c} (vec-of -1) 0)"


def weight_forms(
    axis: str, op: str, v: str, ones_of: str, channels: str | None, same_shape: str = ""
) -> list[tuple[str, str]]:
    """Ways to scale the constant weights `w` of a conv with g groups by the flat vector `v` with `op` (Mul/Div):
    (guards, weight expression) pairs, mutually exclusive, each guard binding sw (WEIGHTS or GROUPED). The views
    along axis 0 and 1 are written from `ones_of`, of w's rank with every dim 1 but maybe dim 1 (a per-channel
    constant's shape, or o, w's all-ones shape). axis "0": along axis 0 (a conv's output channels, a conv
    transpose's input channels), any group. axis "grouped": along axis 1 within each group (a conv's input
    channels, a conv transpose's output channels): a plain broadcast along axis 1 when group == 1; for group > 1,
    `channels` (the constant's axis-1 size: 1, or all the channels of the operand it scales, `same_shape`
    guarding that the product keeps the operand's shape; one element cannot broadcast it) is 1 (a scalar, any
    axis) or more, and the weights are viewed as [g, W0/g, W1, k...] against v as [g, 1, W1, 1...] (gw, gv).
    """
    axis0 = f"({op} w (Reshape {v} (vec-set (vec-set {ones_of} 1 1) 0 -1) 0))"  # actions: v is let-bound
    if ones_of == "o":
        axis0 = f"({op} w (Reshape {v} (vec-set o 0 -1) 0))"
    if axis == "0":
        return [(f"{WEIGHTS} {same_shape}".strip(), axis0)]
    axis1 = f"({op} w (Reshape {v} (vec-set {ones_of} 1 -1) 0))"
    # the grouped form's outer Reshape gets its facts from conv-weight-facts (w's shape and dtype)
    grouped = f"(Reshape ({op} (Reshape w gw 0) (Reshape {v} gv 0)) sw 0)"
    if channels is None:
        return [(f"(= g 1) {WEIGHTS}", axis1), (GROUPED, grouped)]
    scalar = f"({op} w (Reshape {v} (vec-set {ones_of} 0 -1) 0))"  # ones_of has every dim 1 here
    return [
        (f"(= g 1) {WEIGHTS} {same_shape}".strip(), axis1),
        (f"(> g 1) (= {channels} 1) {WEIGHTS}", scalar),
        (f"{GROUPED} (> {channels} 1) {same_shape}".strip(), grouped),
    ]


def weight_facts(guards: str) -> str:
    """The shape fact of new weights nw (the analysis gives their dtype: products and quotients of w have w's), set
    in the actions but for the grouped form (a Reshape to w's shape: conv-weight-facts gives both)."""
    return "" if guards.startswith(GROUPED) else " (set (shape nw) sw)"


OUT_AXIS = {"Conv": "0", "ConvTranspose": "grouped"}
IN_AXIS = {"Conv": "grouped", "ConvTranspose": "0"}
#: Constant conv weights of rank >= 3: binds sw, their shape. Written into each fold's query, keyed on its weight:
#: a relation keyed on the weight that also holds a shared vector (conv-weights(w, o), o the all-ones shape; or
#: views of a flat vector along axis 0 and 1) joined instead makes saturation quadratic in the number of convs
#: (resnet_stack, 200 blocks: 0.35 -> 1.2-1.5 s, measured twice): views are written from a constant's shape or o.
WEIGHTS = "(is-const w) (= sw (shape w)) (>= (vec-length sw) 3)"
#: A grouped conv's constant weights: binds sw (their shape) and the views gw, gv of conv-group-views(w, g,
#: gw, gv): w viewed as [g, W0/g, W1, k...] and a flat vector as [g, 1, W1, 1...], computed once per grouped weight
#: (conv-weight-facts; such a weight has rank >= 3 and is constant).
GROUPED = "(> g 1) (conv-group-views w g gw gv) (= sw (shape w))"
_GROUP_VIEWS = (
    "(conv-group-views w g (vec-append (vec-of g -1) (vec-remove sw 0)) "
    "(vec-append (vec-of g 1 -1) (vec-remove (vec-remove o 0) 0)))"
)
CONV_WEIGHT_FACTS = (
    fact(f"(conv-of y w b g) (> g 1) {WEIGHTS} (= d (dtype w)) (= o {ones('sw')})", _GROUP_VIEWS),
    # a grouped fold's new weights: w's shape and dtype
    fact(
        "(= y (Reshape (Binary b_op (Reshape w gw 0) v) sw 0)) (conv-group-views w g gw gv) (= sw (shape w)) "
        "(= d (dtype w))",
        "(set (shape y) sw) (set (dtype y) d)",
    ),
)
#: b is a present bias (a conv's is 1-D): binds sb. New biases and weights get shape facts, so that folds chain.
BIAS = "(= sb (shape b))"
#: weights constant or not (a graph input): the zero bias and the bias folds hold for any W.
ANY_WEIGHTS = "(= sw (shape w)) (>= (vec-length sw) 3) (= wdt (dtype w))"


ZERO = "(Scalar 0.0 wdt (vec-of co))"


#: Consumers of a conv output y that a fold rewrites: the zero bias is only built for these.
FOLD_CONSUMERS = (
    "(= p (Binary b_op y c)) (arith b_op) (is-const c)",  # Add, Sub, Mul, Div (op: a ConvTranspose parameter)
    "(= p (Sub c y)) (is-const c)",
    "(= p (BatchNormalization y ga be mu va eps mom))",
)
#: bias-fold-site(y): y, a conv or conv transpose without bias, meets a constant (+, -, *, /) or a batch norm.
BIAS_FOLD_SITES = tuple(
    fact(f"{consumer} (conv-of y w (Absent) g)", "(bias-fold-site y)") for consumer in FOLD_CONSUMERS
)


def _zero_bias() -> tuple:
    return tuple(
        fact(
            f"(bias-fold-site y) (= y {conv(kind, b='(Absent)')}) {ANY_WEIGHTS} (= sy (shape y)) "
            "(> (vec-length sy) 1) (= co (vec-get sy 1)) (>= co 0)",
            f"(let nb {ZERO}) (union y {conv(kind, b='nb')}) (set (shape nb) (vec-of co)) (set (dtype nb) wdt)",
        )
        for kind in KINDS
    )


def _bias_fold() -> tuple:
    """Conv + c, Conv - c into the bias; c - Conv as Conv(x, -W, c - B)."""
    rules = []
    for kind in KINDS:
        base = f"(= cv {conv(kind)}) {BIAS} (= sy (shape y)) (= sy (shape cv)) (per-channel c sy)"
        rules.append(  # Conv + c, Conv - c: Add and Sub (b_op: a ConvTranspose has a parameter op)
            fact(
                f'(= y (Binary b_op cv c)) (arith b_op) (!= b_op "Mul") (!= b_op "Div") {base}',
                f"(let vf {flat('c')}) (let nb (Binary b_op b vf)) "
                f"(union y {conv(kind, 'w', 'nb')}) (set (shape nb) sb)",
            )
        )
        rules.append(
            fact(
                f"(= y (Sub c cv)) {base} {WEIGHTS}",
                f"(let vf {flat('c')}) (let nb (Sub vf b)) (let nw (Neg w)) "
                f"(union y {conv(kind, 'nw', 'nb')}) (set (shape nb) sb)",
            )
        )
    return tuple(rules)


def _output_scale(op: str, guard: str = "") -> tuple:
    """Conv(x, W, B) op c -> Conv(x, W op c, B op c) for c per output channel (or scalar)."""
    rules = []
    for kind in KINDS:
        base = (
            f"(= y ({op} cv c)) (= cv {conv(kind)}) {BIAS} (= sy (shape cv)) (per-channel c sy) (= s_c (shape c)) "
            f"{guard}"
        )
        for extra, weight in weight_forms(OUT_AXIS[kind], op, "vf", "s_c", "(vec-get s_c 1)", "(= sy (shape y))"):
            rules.append(
                fact(
                    f"{base} {extra}",
                    f"(let vf {flat('c')}) (let nw {weight}) (let nb ({op} b vf)) "
                    f"(union y {conv(kind, 'nw', 'nb')}) (set (shape nb) sb)" + weight_facts(extra),
                )
            )
    return tuple(rules)


#: ga, be, mu, va: a batch norm's scale (gamma), bias (beta), mean and variance.
F = "(Div ga (Sqrt (Add va (Scalar eps dt (vec-of 1)))))"  # gamma / sqrt(var + eps), shape [C]
#: constant statistics of one dtype (BatchNormalization-15 allows the scale and the statistics other dtypes
#: than X: those mixed forms are left alone, as the folded arithmetic would mix dtypes).
BN_PARAMS = (
    "(is-const ga) (is-const be) (is-const mu) (is-const va) (= dt (dtype va)) (= dt (dtype mu)) "
    "(= dt (dtype ga)) (= dt (dtype be))"
)
#: A batch norm's parameters pass BN_PARAMS with dtype dt (the analysis rule bn-foldable sets it). Keyed on
#: the parameters, not on the batch norm's e-class: another batch norm in that class may have other ones.
FOLDABLE = "(bn-foldable ga be mu va dt)"


#: The mark of the batch norms bn-compose builds (eps 0, momentum 1: frozen statistics, exact for mean 0 and
#: var 1); egglog has no negation, so "not marked" is two disjoint guards: eps != 0, or eps = 0 with another momentum.
COMPOSED_EPS, COMPOSED_MOMENTUM = 0.0, 1.0
#: (eps, mom) != the mark: |eps - 0| + |mom - 1| is 0 only at the mark (NaN and infinities are not 0; the sum of two
#: absolute values cannot cancel).
NOT_COMPOSED = f"(!= (+ (abs (- eps {COMPOSED_EPS!r})) (abs (- mom {COMPOSED_MOMENTUM!r}))) 0.0)"
#: bn-unmarked(eps, mom): a batch norm's epsilon and momentum are not the mark (computed once: bn-unmarked).
UNMARKED = (fact(f"(= y (BatchNormalization x ga be mu va eps mom)) {NOT_COMPOSED}", "(bn-unmarked eps mom)"),)


def _bn_foldable() -> "Egglog":
    """bn-foldable(gamma, beta, mean, var, dt) for each batch norm whose scale, bias and statistics are constants
    of dtype dt: the folds join this one fact (measured on mobilenet v2: joining the eight atoms of BN_PARAMS next
    to the conv's took egglog 166 ms of a 220 ms saturation, the fact 4 ms)."""
    return fact(f"(= y (BatchNormalization x ga be mu va eps mom)) {BN_PARAMS}", FOLDABLE)


#: bn-scale(y, x, f, t, mean, beta, dt): y = BatchNormalization(x, gamma, beta, mean, var, eps) foldable (bn-foldable,
#: dtype dt) and not bn-compose's mark (bn-unmarked), with its per-channel factor f = gamma / sqrt(var + eps) and shift
#: t = beta - mean * f built once (analysis): the fold and the decomposition join this one atom.
BN_SCALE = fact(
    "(= y (BatchNormalization x ga be mu va eps mom)) (bn-foldable ga be mu va dt) (bn-unmarked eps mom)",
    f"(let f {F}) (bn-scale y x f (Sub be (Mul mu f)) mu be dt)",
)


def _bn_fold() -> tuple:
    """The batch norms bn-compose builds from x * s + t (not bn-unmarked) are left alone: on a conv output, that
    Mul and Add fold already (conv-scale-fold, conv-bias-fold); folding the copy too would only add equivalent
    e-nodes."""
    rules = []
    for kind in KINDS:
        base = f"(bn-scale y cv f t mu be dt) (= cv {conv(kind)}) (= dt (dtype w)) (= dt (dtype b))"
        for extra, weight in weight_forms(OUT_AXIS[kind], "Mul", "f", "o", None):
            rules.append(
                fact(
                    f"{base} {extra}",
                    ("" if extra.startswith(GROUPED) else f"(let o {ones('sw')}) ")
                    + f"(let nw {weight}) (let nb (Add (Mul (Sub b mu) f) be)) "
                    f"(union y {conv(kind, 'nw', 'nb')})" + weight_facts(extra),
                )
            )
    return tuple(rules)


def _bn_decompose() -> tuple:
    """The batch norms bn-compose builds (not bn-unmarked) are not decomposed: that would loop (new constants).
    Nor those conv-bn-fold folds into their Conv (bn-folds 1): the fold's Conv is the decomposition's end too
    (conv-scale-fold, conv-bias-fold), and the Mul and Add on the way doubled rn200's e-graph (9.4k -> 16.6k
    e-nodes, saturation 0.16 of 0.33 s) for the same graph."""
    return (
        fact(
            "(bn-scale y x f t mu be dt) (= (bn-folds y) 0) (= dt (dtype x)) (= sx (shape x)) (> (vec-length sx) 1) "
            "(>= (vec-get sx 1) 0)",
            f"(let o {ones('sx')}) (let view (vec-set o 1 -1)) (let ch (vec-set o 1 (vec-get sx 1))) "
            "(let sc (Reshape f view 0)) (let sh (Reshape t view 0)) (let xs (Mul x sc)) "
            "(union y (Add xs sh)) (set (shape xs) sx) (set (shape sc) ch) (set (shape sh) ch)",
        ),
    )


def _bn_compose() -> Egglog:
    """x * s + t -> BatchNormalization(x, s, t, 0, 1, eps 0, momentum 1) for a float x (dtype-group "float"); s and
    t per channel of x's shape, so x * s and x * s + t have x's shape. The Scalars' facts: scalar-broadcast-facts."""
    return fact(
        '(= y (Add m t)) (= m (Mul x s)) (= dt (dtype x)) (dtype-group "float" dt o) (= sx (shape x)) '
        "(per-channel s sx) (per-channel t sx) (= c (vec-get sx 1)) (>= c 0)",
        "(let v (vec-of c)) (let one (Scalar 1.0 dt v)) "
        f"(let sc (Mul {flat('s')} one)) (let sh (Mul {flat('t')} one)) "
        f"(union y (BatchNormalization x sc sh (Scalar 0.0 dt v) one {COMPOSED_EPS!r} {COMPOSED_MOMENTUM!r})) "
        + "(set (shape sc) v) (set (dtype sc) dt) (set (shape sh) v) (set (dtype sh) dt)",
    )


def _input_scale() -> tuple:
    """Conv(x * s, W, B) -> Conv(x, W scaled along its input-channel axis, B)."""
    rules = []
    for kind in KINDS:
        base = (
            f"(= y {conv(kind, x='xs')}) (= xs (Mul x s)) (= sx (shape x)) (per-channel s sx) (= s_s (shape s)) "
            "(finite s)"
        )
        for extra, weight in weight_forms(IN_AXIS[kind], "Mul", "vf", "s_s", "(vec-get s_s 1)", "(= sx (shape xs))"):
            rules.append(
                fact(
                    f"{base} {extra}",
                    f"(let vf {flat('s')}) (let nw {weight}) (union y {conv(kind, 'nw')})" + weight_facts(extra),
                )
            )
    return tuple(rules)


#: conv-of(y, w, b, g): y is a Conv or ConvTranspose with weights w, bias b (maybe Absent) and g groups;
#: conv-input(x): x is the input of one. Keyed on the conv's e-class and on its input's: the scale moves, the bias
#: fold sites and the grouped weight views join them instead of one row per kind.
CONV_OF = tuple(fact(f"(= y {conv(kind)})", "(conv-of y w b g) (conv-input x)") for kind in KINDS)


def _through_activation(act: str, params: str) -> tuple:
    """act(Conv) * c -> act(Conv * c) (backward) and Conv(act(x * s)) -> Conv(act(x) * s) (forward), c, s > 0."""
    return (
        fact(
            f"(= y (Mul a c)) (= a ({act} cv{params})) (conv-of cv w cb cg) (is-const c) (positive c) (= sy (shape y))",
            f"(union y ({act} (Mul cv c){params})) (set (shape (Mul cv c)) sy)",
        ),
        fact(
            f"(conv-input r) (= r ({act} xs{params})) (= xs (Mul x s)) (is-const s) (positive s) (= sr (shape r))",
            f"(union r (Mul ({act} x{params}) s)) (set (shape (Mul ({act} x{params}) s)) sr)",
        ),
    )


def _scale_through_add() -> tuple:
    """(Conv +/- o) * c -> Conv * c +/- o * c (backward); x * s + t -> (x + t / s) * s (forward, s > 0)."""
    rules = []
    # a sum in either operand order (add-of: the conv's term written first), a difference in each
    for inner, out in (
        ("(add-of a cv o)", "(Add (Mul cv c) (Mul o c))"),
        ("(= a (Sub cv o))", "(Sub (Mul cv c) (Mul o c))"),
        ("(= a (Sub o cv))", "(Sub (Mul o c) (Mul cv c))"),
    ):
        rules.append(
            fact(
                f"(= y (Mul a c)) {inner} (conv-of cv w cb cg) (is-const w) (is-const c) "
                "(= sy (shape y)) (= sy (shape a)) (= sy (shape cv))",
                f"(union y {out}) (set (shape (Mul cv c)) sy)",
            )
        )
    hoisted = "(Mul (Add x (Div t s)) s)"
    for act in ("Relu", "LeakyRelu"):  # t a constant leaf: a Const or a Scalar (const-leaf)
        feeds = f"(conv-input r) (= r ({act} m{' alpha' if act == 'LeakyRelu' else ''}))"
        rules.append(
            fact(
                f"{feeds} (= m (Add xs t)) (= xs (Mul x s)) (const-leaf t) (is-const s) (positive s) "
                "(= sx (shape x)) (= sx (shape m)) (= sx (shape xs))",
                f"(union m {hoisted}) (set (shape (Add x (Div t s))) sx)",
            )
        )
    return tuple(rules)


#: conv-pad(y, x, sp): y = Conv(Pad(x, pp, constant 0), ...) with auto_pad NOTSET, pp 0 on N and C (before and
#: after) and non-negative (any rank: h = |pp| / 2 axes); sp: pp's spatial pads (begins, ends), as Conv lays out pads.
#: The site also asks for the sum of the conv's own pads pc and sp (conv-pad-merge reads it).
_PAD_SITE = fact(
    '(= y (Conv xp w b "NOTSET" dl g ks pc st)) (= xp (Pad x pp 0.0 "constant")) (= h (/ (vec-length pp) 2)) '
    "(>= h 3) (= (vec-length pp) (* 2 h)) (= (vec-get pp 0) 0) (= (vec-get pp 1) 0) (= (vec-get pp h) 0) "
    '(= (vec-get pp (+ h 1)) 0) (= pp (unstable-vec-map (unstable-fn "max" 0) pp))',
    "(let sp (vec-remove (vec-remove (vec-remove (vec-remove pp (+ h 1)) h) 1) 0)) (conv-pad y xp x sp) "
    "(need-sum-of pc sp)",
)
_PAD_CONV = '(conv-pad y xp x sp) (= y (Conv xp w b "NOTSET" dl g ks pc st))'


def _pad_merge() -> tuple:
    """The conv's own pads pc (none, or one per spatial begin and end) plus the Pad's (sum-of, a list function)."""
    return (
        fact(f"{_PAD_CONV} (= pc (vec-empty))", '(union y (Conv x w b "NOTSET" dl g ks sp st))'),
        fact(f"{_PAD_CONV} (= s (sum-of pc sp))", '(union y (Conv x w b "NOTSET" dl g ks s st))'),
    )


#: Constant leaves (const-leaf: a Const or a Scalar) and a Const's Transpose.
LEAVES = ("(const-leaf c)", "(= c (Transpose (Const k) p))")
#: Add and Mul: the arithmetic ops (arith) but Sub and Div.
COMMUTATIVE = '(arith op) (!= op "Sub") (!= op "Div")'


def _const_last() -> tuple:
    """Constant leaves (and layout's transposed leaves) only: constant arithmetic that rules build is written
    constant-last already, and swapping every constant-constant product would double those terms."""
    return tuple(
        fact(
            f"(= y (Binary op c x)) {COMMUTATIVE} {leaf} (= sy (shape y))",
            "(union y (Binary op x c)) (set (shape (Binary op x c)) sy)",
        )
        for leaf in LEAVES
    )


# ---- multi-pattern merge (TENSAT): convs sharing their input, with constant weights ----
# Any number of convs, built a pair at a time as the linear merges are (rewrites/linear.py): each site (conv-site)
# merges with the next one of its input and attributes (conv-next, conv-bias-next: the least larger const-rank
# among the sites whose weights agree but on axis 0), and a merged conv grows by the site next to its last
# (merge-tip), its Split extending the smaller one's (split-extends).

#: Sites whose weights agree but on C_out (axis 0) and in dtype: the next one's const-rank.
_NEXT = (
    "(conv-site x ap dl ks pd st r y w {b}) (conv-site x ap dl ks pd st q z v {c}) (< r q) (= sw (shape w)) "
    "(>= (vec-length sw) 3) (= (vec-remove sw 0) (vec-remove (shape v) 0)) (= dt (dtype w)) (= dt (dtype v))"
)
CONV_NEXT = (
    fact(_NEXT.format(b="(Absent)", c="(Absent)"), "(set (conv-next x ap dl ks pd st r) q)"),
    fact(
        f"{_NEXT.format(b='b', c='c')} (is-const b) (is-const c) (= (dtype b) dt) (= (dtype c) dt)",
        "(set (conv-bias-next x ap dl ks pd st r) q)",
    ),
    fact("(= y (Conv x w b ap dl g ks pd st)) (= d (dtype x))", "(set (dtype y) d)"),
    # a conv over concatenated weights: the output of a conv of x by the first of them, with their C_out summed
    fact(
        "(= m (Conv x wc bc ap dl 1 ks pd st)) (= wc (Concat (TCons h t) 0)) (= y (Conv x h b ap dl 1 ks pd st)) "
        "(= sy (shape y)) (>= (vec-length sy) 2) (= sw (shape wc))",
        "(set (shape m) (vec-set sy 1 (vec-get sw 0)))",
    ),
)


def _merge_pair(bias: bool) -> Egglog:
    """The site of const-rank r and its next one: one conv over Concat(W, 0) (and Concat(B, 0)), Split along
    axis 1."""
    nxt, b, c, bc = ("conv-next", "(Absent)", "(Absent)", "(Absent)")
    if bias:
        nxt, b, c, bc = ("conv-bias-next", "b) (is-const b", "c) (is-const c", "(Concat (TCons b (TCons c (TNil))) 0)")
    return fact(
        f"(conv-site x ap dl ks pd st r y w {b}) (= q ({nxt} x ap dl ks pd st r)) "
        f"(conv-site x ap dl ks pd st q z v {c}) (= m (vec-get (shape w) 0)) (= n (vec-get (shape v) 0))",
        f"(let sp (Split (Conv x (Concat (TCons w (TCons v (TNil))) 0) {bc} ap dl 1 ks pd st) 1 (vec-of m n))) "
        "(union y (Out sp 0)) (union z (Out sp 1)) (merge-tip sp q)",
    )


def _merge_grow(bias: bool) -> Egglog:
    """A merged conv whose last site has const-rank r, grown by the next site."""
    nxt, b, bc, b2 = ("conv-next", "(Absent)", "(Absent)", "(Absent)")
    if bias:
        nxt, b, bc, b2 = (
            "conv-bias-next",
            "b) (is-const b",
            "(Concat lb 0)",
            "(Concat (TAppend lb (TCons b (TNil))) 0)",
        )
    return fact(
        f"(merge-tip sp r) (= sp (Split mc 1 ns)) (= mc (Conv x (Concat l 0) {bc} ap dl 1 ks pd st)) "
        f"(= q ({nxt} x ap dl ks pd st r)) (conv-site x ap dl ks pd st q y w {b}) (= n (vec-get (shape w) 0))",
        f"(let s2 (Split (Conv x (Concat (TAppend l (TCons w (TNil))) 0) {b2} ap dl 1 ks pd st) 1 (vec-push ns n))) "
        "(union y (Out s2 (vec-length ns))) (split-extends sp s2) (merge-tip s2 q)",
    )


def _merge_sites() -> "Egglog":
    """conv-site(x, attributes, rank of w, y, w, b) for each group-1 conv with loaded constant weights whose x
    several convs of the input graph read (`conv-fanout`, from the loader): the merges
    join this small relation (a class holds several Conv e-nodes once folds ran: joining them directly multiplies
    them per merged conv)."""
    return fact(
        "(conv-fanout x) (= y (Conv x w b ap dl 1 ks pd st)) (= w (Const c)) (= r (const-rank w))",
        "(conv-site x ap dl ks pd st r y w b)",
    )


def _merge_zero_bias() -> "Egglog":
    """A bias-less conv next to a mergeable conv with a constant bias gets an explicit zero bias (so that the
    biased merge covers it)."""
    return fact(
        "(conv-site x ap dl ks pd st r y w ab) (= ab (Absent)) (conv-site x ap dl ks pd st rv z v b) "
        "(is-const b) (!= r rv) (= sw (shape w)) (= sv (shape v)) "
        "(>= (vec-length sw) 3) (= (vec-remove sw 0) (vec-remove sv 0)) (= dt (dtype w)) (= dt (dtype v))",
        "(let co (vec-get sw 0)) (let nb (Scalar 0.0 dt (vec-of co))) "
        "(union y (Conv x w nb ap dl 1 ks pd st)) (set (shape nb) (vec-of co)) (set (dtype nb) dt)",
    )


# conv-epilogue (op fact): activations a conv runs as its epilogue on some target (extract/targets/*.toml `fused`).


def _merge_epilogue() -> tuple:
    """act(Out(Split(Conv(...), 1, sizes), k)) -> Out(Split(act(Conv(...)), 1, sizes), k): the merged conv keeps
    its activation as an epilogue (without this form, an activation after the Split is costed as fused with the
    original conv its class still holds, though no runtime fuses it). One row per unary family, its op guarded by
    the op fact conv-epilogue."""
    split = "(= o (Out sp k)) (= sp (Split mc 1 sz)) (= mc (Conv x w b ap dl g ks pd st))"
    return (
        fact(f"(= y (Unary op o)) (conv-epilogue op) {split}", "(union y (Out (Split (Unary op mc) 1 sz) k))"),
        fact(f"(= y (UnaryF op o a1)) (conv-epilogue op) {split}", "(union y (Out (Split (UnaryF op mc a1) 1 sz) k))"),
        fact(
            f"(= y (UnaryFF op o a1 a2)) (conv-epilogue op) {split}",
            "(union y (Out (Split (UnaryFF op mc a1 a2) 1 sz) k))",
        ),
    )


RULES = [
    Rule(
        "conv-merge-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "conv-site(x, attributes, rank of W, y, W, B) for each group-1 Conv with a loaded constant W whose input x "
        "several input Convs read (the relation conv-merge joins)",
        (_merge_sites(),),
        ruleset="analysis",
    ),
    Rule(
        "conv-merge-order",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "conv-next, conv-bias-next: the next const-rank among the conv sites of one input and attributes whose "
        "weights agree but on C_out (the order conv-merge grows in); dtype(Conv(x, ...)) = dtype(x); the shape of a "
        "conv over concatenated weights",
        CONV_NEXT,
        ruleset="analysis",
    ),
    Rule(
        "bias-fold-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "bias-fold-site(y) for a Conv or ConvTranspose y without bias read by an Add/Sub/Mul/Div with a constant or by "
        "a BatchNormalization (the relation conv-zero-bias joins)",
        BIAS_FOLD_SITES,
        ruleset="analysis",
    ),
    Rule(
        "conv-zero-bias",
        FAMILY,
        "exact",
        "onnxruntime:ConvAddFusion (bias creation)",
        "Conv(x, W) -> Conv(x, W, zeros[C_out]) when its output meets a constant (+, -, *, /) or a "
        "BatchNormalization, so that the folds see a bias (Conv and ConvTranspose)",
        _zero_bias(),
    ),
    Rule(
        "conv-bias-fold",
        FAMILY,
        "fp-reassoc",
        "onnxruntime:ConvAddFusion; coreml:fuse_conv_bias",
        "Conv(x, W, B) +/- c -> Conv(x, W, B +/- c) and c - Conv(x, W, B) -> Conv(x, -W, c - B) for c per output "
        "channel or scalar (Conv and ConvTranspose)",
        _bias_fold(),
    ),
    Rule(
        "conv-scale-fold",
        FAMILY,
        "fp-reassoc",
        "tvm:BackwardFoldScaleAxis; onnxruntime:ConvMulFusion; coreml:fuse_conv_scale",
        "Conv(x, W, B) * c -> Conv(x, W * c, B * c) for c per output channel or scalar (ConvTranspose: W axis 1 "
        "per group)",
        _output_scale("Mul", guard="(finite c)"),
    ),
    Rule(
        "conv-div-fold",
        FAMILY,
        "fp-reassoc",
        "tvm:BackwardFoldScaleAxis; coreml:fuse_conv_scale",
        "Conv(x, W, B) / c -> Conv(x, W / c, B / c) for a positive c per output channel or scalar (never c / Conv)",
        _output_scale("Div", guard="(positive c) (finite c)"),
    ),
    Rule(
        "bn-foldable",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "bn-foldable(scale, bias, mean, variance, dtype) for each BatchNormalization whose four parameters are "
        "constants of one dtype (the relation conv-bn-fold and bn-decompose join)",
        (_bn_foldable(),),
        ruleset="analysis",
    ),
    Rule(
        "bn-unmarked",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "bn-unmarked(eps, momentum) for each BatchNormalization that is not bn-compose's mark (eps 0 with momentum "
        "1): the two disjoint guards computed once (egglog has no negation), joined by conv-bn-fold and bn-decompose",
        UNMARKED,
        ruleset="analysis",
    ),
    Rule(
        "bn-scale-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "bn-scale(y, x, f, t, mean, beta, dtype) for each foldable, unmarked BatchNormalization y of x, with its "
        "factor f = gamma / sqrt(var + eps) and shift t = beta - mean * f (the relation conv-bn-fold and "
        "bn-decompose join)",
        (BN_SCALE,),
        ruleset="analysis",
    ),
    Rule(
        "bn-conv-folds",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "bn-folds(y) = 1 for each foldable batch norm y whose input class holds a Conv conv-bn-fold folds it into, "
        "else 0 (the guard that keeps bn-decompose off those)",
        BN_FOLDS,
        ruleset="analysis",
    ),
    Rule(
        "conv-bn-fold",
        FAMILY,
        "fp-reassoc",
        "onnxruntime:ConvBNFusion; coreml:fuse_conv_batchnorm",
        "BatchNormalization(Conv(x, W, B)) -> Conv(x, W * f, (B - mean) * f + beta), f = gamma / sqrt(var + eps) "
        "(Conv and ConvTranspose, grouped included)",
        _bn_fold(),
    ),
    Rule(
        "bn-decompose",
        FAMILY,
        "fp-reassoc",
        "tvm:SimplifyInference; glow:lowerBatchNormalizationNode",
        "BatchNormalization(x) -> x * f + (beta - mean * f) with f = gamma / sqrt(var + eps) per channel",
        _bn_decompose(),
    ),
    Rule(
        "bn-compose",
        FAMILY,
        "exact",
        "coreml:fuse_mul_add_to_batchnorm (inverse of tvm:SimplifyInference)",
        "x * s + t -> BatchNormalization(x, s, t, mean 0, var 1, eps 0, momentum 1) for s, t per channel (axis 1) "
        "or scalar",
        (_bn_compose(),),
    ),
    Rule(
        "conv-input-scale-fold",
        FAMILY,
        "fp-reassoc",
        "tvm:ForwardFoldScaleAxis",
        "Conv(x * s, W, B) -> Conv(x, W * s along the input-channel axis, B) for s per input channel or scalar "
        "(grouped and depthwise mapped per group; ConvTranspose: W axis 0)",
        _input_scale(),
    ),
    Rule(
        "scale-through-relu",
        FAMILY,
        "exact",
        "tvm:FoldScaleAxis (relu)",
        "Relu(Conv) * c -> Relu(Conv * c) and Conv(Relu(x * s)) -> Conv(Relu(x) * s) for positive constants c, s",
        _through_activation("Relu", ""),
    ),
    Rule(
        "scale-through-leaky-relu",
        FAMILY,
        "fp-reassoc",
        "tvm:FoldScaleAxis (leaky_relu)",
        "LeakyRelu(Conv) * c -> LeakyRelu(Conv * c) and Conv(LeakyRelu(x * s)) -> Conv(LeakyRelu(x) * s), c, s > 0",
        _through_activation("LeakyRelu", " alpha"),
    ),
    Rule(
        "scale-through-add",
        FAMILY,
        "fp-reassoc",
        "tvm:FoldScaleAxis (add)",
        "(Conv +/- y) * c -> Conv * c +/- y * c (backward); x * s + t -> (x + t / s) * s for a positive s and a "
        "constant leaf t when it feeds a Conv through Relu/LeakyRelu (forward)",
        _scale_through_add(),
    ),
    Rule(
        "conv-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "conv-of(y, W, b, g) for each Conv or ConvTranspose y with weights W, bias b and g groups, conv-input(x) for "
        "its input x (the relations the scale moves, the bias sites and the grouped weight views join)",
        CONV_OF,
        ruleset="analysis",
    ),
    Rule(
        "conv-pad-sites",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "conv-pad(y, Pad(x, p), x, spatial p) for Conv(Pad(x, p, constant 0)) with auto_pad NOTSET and p 0 on N and C, "
        "non-negative (any rank: the relation conv-pad-merge joins)",
        (_PAD_SITE,),
        ruleset="analysis",
    ),
    Rule(
        "conv-pad-merge",
        FAMILY,
        "exact",
        "onnxruntime:PadFusion; tvm:FoldExplicitPadding",
        "Conv(Pad(x, p, constant 0), W, B, pads) -> Conv(x, W, B, pads + spatial p) when p is 0 on N and C and "
        "non-negative (Conv only: not MaxPool, whose padding is -inf)",
        _pad_merge(),
    ),
    Rule(
        "const-operand-last",
        FAMILY,
        "exact",
        "coreml:canonicalize (constant operand second)",
        "c * x -> x * c and c + x -> x + c for a constant leaf c, or a transposed one (the folds match one "
        "operand order)",
        _const_last(),
    ),
    Rule(
        "conv-merge",
        FAMILY,
        "fp-reassoc",
        "tensat:multi-pattern (conv with shared input); tvm:CombineParallelConv2D",
        "Conv(x, W1, B1), Conv(x, W2, B2), ... -> Out(Split(Conv(x, Concat(W, 0), Concat(B, 0)), 1, [C1, C2, ...]), "
        "k) for group-1 convs with identical attributes, constant weights and constant or absent biases, any number: "
        "each run of consecutive sites (const-rank order), grown a site at a time",
        (*(row(bias) for bias in (False, True) for row in (_merge_pair, _merge_grow)), _merge_zero_bias()),
    ),
    Rule(
        "conv-merge-epilogue",
        FAMILY,
        "exact",
        "tensat:multi-pattern; tvm:CombineParallelConv2D (activation)",
        "act(Out(Split(Conv(...), 1, sizes), k)) -> Out(Split(act(Conv(...)), 1, sizes), k) for act Relu, LeakyRelu, "
        "Clip, Sigmoid, Tanh or HardSigmoid: a merged conv keeps its activation as an epilogue",
        _merge_epilogue(),
    ),
    Rule(
        "conv-weight-facts",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "conv-group-views(W, g, ...) for a grouped constant conv weight of rank >= 3: the views the conv folds "
        "scale it with",
        CONV_WEIGHT_FACTS,
        ruleset="analysis",
    ),
    Rule(
        "per-channel-facts",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "per-channel(c, r) for a constant operand c of Add/Sub/Mul/Div shaped like the other operand's shape r with "
        "every axis but 1 set to 1 (the relation the conv folds and bn-compose join)",
        PER_CHANNEL,
        ruleset="analysis",
    ),
    Rule(
        "scale-broadcast-shape",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "shape(B(a, b)) = shape(a) for Add/Sub/Mul/Div when b is all ones at a's rank (and symmetrically)",
        broadcast_shape(),
        ruleset="analysis",
    ),
    Rule(
        "scale-finite-facts",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "finite(c) for a finite Scalar; through Reshape/Transpose/Neg/Abs/Identity, Add/Sub/Mul of finites, and "
        "Sqrt/Reciprocal/Div by a positive finite (the guard of the conv scale folds: never W * inf)",
        finite_facts(),
        ruleset="analysis",
    ),
    Rule(
        "scale-positive-facts",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "positive(Scalar v) for v > 0; positive through Reshape/Transpose/Sqrt/Reciprocal and Mul/Div/Add of positives",
        positive_facts(),
        ruleset="analysis",
    ),
]
