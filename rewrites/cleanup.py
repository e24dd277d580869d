"""Cleanup rules: no-ops and idempotent chains removed, consecutive pads and reshapes merged.

    Relu(Relu(x)) -> Relu(x)
    f(f(x)) -> f(x)               f idempotent: Sign, Abs, Ceil, Floor, Round
    x * 1 -> x, 1 * x -> x        when the constant does not change the shape (1: any constant whose
                                  elements are all 1, the `splat` fact: a scalar, a ones vector)
    x + 0 -> x, 0 + x -> x        likewise (zeros)
    Identity(x) -> x
    Dropout(x) -> x               (inference: no ratio or training_mode inputs)
    Expand(x, shape) -> x         when the output shape is x's
    Reshape(x, shape) -> x        likewise
    Pad(x, 0...0) -> x            any mode
    Flatten(x, axis) -> x         when the output shape is x's (x of rank 2 and axis 1)
    Out(Split(x, axis, [n]), 0) -> x   a Split with one output (its size is the whole axis)
    Slice(x, ...) -> x            when the output shape is x's and every step is positive (a reversal,
                                  step -1, keeps the shape and is not a no-op)
    Pad(Pad(x, p, v), q, v) -> Pad(x, p + q, v)     constant mode, same value, p and q non-negative
    Pad(Pad(x, p, edge), q, edge) -> Pad(x, p + q, edge)   p and q non-negative (the border value is repeated
                                                    either way; reflect and wrap pads do NOT compose so:
                                                    reflect 1 twice gives [1 0 1 2 1 2] on [0 1 2], reflect 2
                                                    gives [2 1 0 1 2 1 0])
    Pad(Pad(x, p, reflect), q, reflect) -> Pad(x, p + q, reflect)   p and q non-negative, no axis padded by both
    V(W(x)) -> Reshape(x, shape(out))               V, W: Reshape then Squeeze / Unsqueeze, or Squeeze / Unsqueeze
                                                    then Reshape; the output shape without 0, at most one symbol
                                                    (as -1; the inner targets' 0 and -1 entries do not matter)
    Reshape(Reshape(x, s), t) -> Reshape(x, t)      t without 0 entries (or allowzero); a 0 (a copy of the
                                                    inner output's dim i) written as that dim's size, or
                                                    kept when that dim is x's dim i (the same symbol)

Common sub-expressions need no rule: the e-graph hash-conses identical typed ops on the same inputs into
one node; nondeterministic ops (RandomNormalLike, ...) are opaque nodes keyed by their position, never merged.
"""

from __future__ import annotations

from eqsat.engine.rule import Egglog, Rule, fact, need, rw


def rw_neutral(lhs: str, rhs: str, *guards: str) -> Egglog:
    """lhs -> rhs for an op that is the identity on `rhs` (x * 1, x + 0, ...), and `lhs` is subsumed.

    Once unioned, lhs is an e-node in its own operand's class (a self-loop: B(y, 1) in class(y)). A rule
    that rewrites B(y, c) (transpose sinking, the conv folds) would match it again with every new member
    of class(y) and never saturate (B(1, Transpose(x)) grew to 200k e-nodes). Subsumed, the neutral node
    stays in the class but is matched by no rule and never extracted: nothing is lost, the class holds rhs.
    """
    return fact(f"(= __root {lhs}) {' '.join(guards)}".strip(), f"(union __root {rhs}) (subsume {lhs})")


def _zeros_like(v: str) -> str:
    return f'(unstable-vec-map (unstable-fn "*" 0) {v})'


def _nonnegative(v: str) -> str:
    """Guard: every entry of the vector `v` is >= 0 (max(0, p) = p)."""
    return f'(= {v} (unstable-vec-map (unstable-fn "max" 0) {v}))'


#: Pad(Pad(x, p, ...), q, ...) with p and q of one length, non-negative (their sum: sum-of(p, q), a function of lists)
_PADS = f"(= (vec-length p) (vec-length q)) {_nonnegative('p')} {_nonnegative('q')}"


def _min1(v: str) -> str:
    """v with every entry capped at 1 (non-negative pads: 1 where the pad is not 0)."""
    return f'(unstable-vec-map (unstable-fn "min" 1) {v})'


#: Two reflect Pads, pads p and q of one length 2r, non-negative; lo/hi: the positions of the begin/end halves.
_REFLECTS = (
    '(= y (Pad (Pad x p v "reflect") q w "reflect")) '
    f'{_PADS} (= h (/ (vec-length p) 2)) (= lo (vec-range h)) (= hi (unstable-vec-map (unstable-fn "+" h) lo))'
)
#: ... with pb/pe (qb/qe): p's (q's) begin and end pads, and pa/qa the per-axis totals.
_HALVES = "(= pb (drop-at p hi)) (= pe (drop-at p lo)) (= qb (drop-at q hi)) (= qe (drop-at q lo))"
_TOTALS = f"{_HALVES} (= pa (sum-of pb pe)) (= qa (sum-of qb qe))"

#: Pad(Pad(x, p, reflect), q, reflect) when no axis is padded by both: each pad reads x's own values along its
#: axes (the other pad leaves those axes as they were), so the two compose into one (per-axis disjointness:
#: the capped totals of p and q never both 1 on an axis).
#: The pads and their per-axis totals are a site computed once in analysis (pad-merge-reflect-site:
#: reflect-pads(y, x, p, q, w, pa, qa)); the merge reads it.
_REFLECT_SITE = "(reflect-pads y x p q w pa qa)"
PAD_MERGE_REFLECT_SITE = (
    need(_REFLECTS, "(need-drop-at p hi) (need-drop-at p lo) (need-drop-at q hi) (need-drop-at q lo)"),
    need(f"{_REFLECTS} {_HALVES}", "(need-sum-of pb pe) (need-sum-of qb qe)"),
    fact(f"{_REFLECTS} {_TOTALS}", _REFLECT_SITE),
)
PAD_MERGE_REFLECT = (
    need(_REFLECT_SITE, f"(need-sum-of {_min1('pa')} {_min1('qa')})"),
    fact(
        f"{_REFLECT_SITE} (= t (sum-of {_min1('pa')} {_min1('qa')})) (vec-not-contains t 2) (= s (sum-of p q))",
        '(union y (Pad x s w "reflect"))',
    ),
)

#: y = V(W(x)) whose shape so has no 0 and at most one symbol: Reshape(x, so with the symbol as -1) (Reshape
#: infers it: y has x's elements). Reshape then Squeeze / Unsqueeze, Squeeze / Unsqueeze then Reshape: the site
#: view-merge(y, x), computed in analysis (reshape-view-merge-site), which also asks for the symbols in y's shape.
_VIEW_NEED = "(view-merge y x) (need-symbol-count so)"
VIEW_MERGE_SITES = (
    fact("(= y (Squeeze (Reshape x s z) a)) (= so (shape y))", _VIEW_NEED),
    fact("(= y (Unsqueeze (Reshape x s z) a)) (= so (shape y))", _VIEW_NEED),
    fact("(= y (Reshape (Squeeze x a) s z)) (= so (shape y))", _VIEW_NEED),
    fact("(= y (Reshape (Unsqueeze x a) s z)) (= so (shape y))", _VIEW_NEED),
)
VIEW_MERGE = fact(
    "(view-merge y x) (= so (shape y)) (vec-not-contains so 0) (<= (symbol-count so) 1)",
    '(union y (Reshape x (unstable-vec-map (unstable-fn "max" -1) so) 0))',
)

#: An outer Reshape with copied dims (allowzero 0) over an inner one: sy the inner output's shape, sx x's.
_ZEROS_OF = "(= y (Reshape x s z)) (= sy (shape y)) (= sx (shape x))"
_ZEROS = f"(= __root (Reshape y t 0)) {_ZEROS_OF}"

RULES = [
    Rule(
        "relu-merge",
        "cleanup",
        "exact",
        "coreml:merge_consecutive_relus",
        "Relu(Relu(x)) -> Relu(x)",
        (rw("(Relu (Relu x))", "(Relu x)"),),
        ruleset="simplify",
    ),
    Rule(
        "idempotent-merge",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_consecutive_idempotent_ops",
        "f(f(x)) -> f(x) for idempotent elementwise f (Sign, Abs, Ceil, Floor, Round)",
        (rw("(Unary op (Unary op x))", "(Unary op x)", "(idempotent op)"),),
        ruleset="simplify",
    ),
    Rule(
        "flatten-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_flatten",
        "Flatten(x, axis) -> x when the output shape is x's (x of rank 2 and axis 1, symbols included)",
        (
            rw_neutral("(Flatten x 1)", "x", "(= s (shape x)) (= (vec-length s) 2)"),
            rw_neutral("(Flatten x ax)", "x", "(= (shape __root) (shape x))"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "split-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_split",
        "Out(Split(x, axis, [n]), 0) -> x for a Split with a single output (n is the whole axis)",
        (rw_neutral("(Out (Split x ax sz) 0)", "x", "(= (vec-length sz) 1)", "(= (shape __root) (shape x))"),),
        ruleset="simplify",
    ),
    Rule(
        "mul-one",
        "cleanup",
        "exact",
        "coreml:noop_elimination",
        "x * 1 -> x (1 a scalar or a tensor of ones) when the output shape is x's",
        (
            rw_neutral("(Mul x c)", "x", "(splat c 1.0)", "(= (shape __root) (shape x))"),
            rw_neutral("(Mul c x)", "x", "(splat c 1.0)", "(= (shape __root) (shape x))"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "add-zero",
        "cleanup",
        "fp-reassoc",
        "coreml:noop_elimination",
        "x + 0 -> x (0 a scalar or a tensor of zeros) when the output shape is x's (not exact for a float x of -0: "
        "IEEE's -0 + 0 is +0; the sign of a zero is all it changes)",
        (
            rw_neutral("(Add x c)", "x", "(splat c 0.0)", "(= (shape __root) (shape x))"),
            rw_neutral("(Add c x)", "x", "(splat c 0.0)", "(= (shape __root) (shape x))"),
        ),
        ruleset="simplify",
    ),
    Rule(
        "identity-remove",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_identity",
        "Identity(x) -> x",
        (rw_neutral("(Identity x)", "x"),),
        ruleset="simplify",
    ),
    Rule(
        "dropout-remove",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_dropout",
        "Dropout(x, ratio) -> x in inference (no training_mode input)",
        (rw_neutral("(Dropout x r)", "x"),),
        ruleset="simplify",
    ),
    Rule(
        "expand-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_expand",
        "Expand(x, shape) -> x when the output shape is x's",
        (rw_neutral("(Expand x s)", "x", "(= (shape __root) (shape x))"),),
        ruleset="simplify",
    ),
    Rule(
        "reshape-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_reshape",
        "Reshape(x, shape) -> x when the output shape is x's",
        (rw_neutral("(Reshape x s z)", "x", "(= (shape __root) (shape x))"),),
        ruleset="simplify",
    ),
    Rule(
        "pad-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_pad",
        "Pad(x, pads all 0) -> x (any mode)",
        (rw_neutral("(Pad x p v m)", "x", f"(= p {_zeros_like('p')})"),),
        ruleset="simplify",
    ),
    Rule(
        "slice-noop",
        "cleanup",
        "exact",
        "onnxoptimizer:eliminate_nop_slice",
        "Slice(x) -> x when the output shape is x's and every step is positive",
        (
            rw_neutral(
                "(Slice x st en ax sp)",
                "x",
                "(= (shape __root) (shape x))",
                '(= sp (unstable-vec-map (unstable-fn "max" 1) sp))',
            ),
        ),
        ruleset="simplify",
    ),
    Rule(
        "pad-merge",
        "cleanup",
        "exact",
        "onnxoptimizer:fuse_pad_into_pad; tvm:SimplifyExpr (pad)",
        "Pad(Pad(x, p, v, constant), q, v, constant) -> Pad(x, p + q, v, constant) for non-negative p, q",
        (rw('(Pad (Pad x p v "constant") q v "constant")', '(Pad x s v "constant")', _PADS, "(= s (sum-of p q))"),),
        ruleset="simplify",
    ),
    Rule(
        "pad-merge-sums",
        "cleanup",
        "exact",
        "eqsat:analysis",
        "asks for sum-of(p, q) for each Pad(Pad(x, p), q) of one mode and pads of one length: the sum pad-merge, "
        "pad-merge-edge and pad-merge-reflect read",
        (fact("(= y (Pad (Pad x p v m) q w m)) (= (vec-length p) (vec-length q))", "(need-sum-of p q)"),),
        ruleset="analysis",
    ),
    Rule(
        "pad-merge-edge",
        "cleanup",
        "exact",
        "onnxoptimizer:fuse_pad_into_pad (edge); tvm:SimplifyExpr (pad)",
        "Pad(Pad(x, p, edge), q, edge) -> Pad(x, p + q, edge) for non-negative p, q (not reflect or wrap: "
        "a reflection of a reflect-padded tensor reflects the padding)",
        (rw('(Pad (Pad x p v "edge") q w "edge")', '(Pad x s w "edge")', _PADS, "(= s (sum-of p q))"),),
        ruleset="simplify",
    ),
    Rule(
        "reshape-view-merge",
        "cleanup",
        "exact",
        "onnxoptimizer:fuse_consecutive_reshapes (with squeeze/unsqueeze); tvm:SimplifyExpr (reshape chains)",
        "Squeeze/Unsqueeze(Reshape(x)) and Reshape(Squeeze/Unsqueeze(x)) -> Reshape(x, shape(out)) when the output "
        "shape has no 0 and at most one symbol (written -1: Reshape infers it)",
        (VIEW_MERGE,),
        ruleset="simplify",
    ),
    Rule(
        "reshape-view-merge-site",
        "cleanup",
        "exact",
        "eqsat:analysis",
        "view-merge(y, x) for y = Squeeze/Unsqueeze(Reshape(x)) or Reshape(Squeeze/Unsqueeze(x)) (the site "
        "reshape-view-merge joins; the symbols of y's shape asked for)",
        VIEW_MERGE_SITES,
        ruleset="analysis",
    ),
    Rule(
        "pad-merge-reflect",
        "cleanup",
        "exact",
        "onnxoptimizer:fuse_pad_into_pad (reflect, disjoint axes); tvm:SimplifyExpr (pad)",
        "Pad(Pad(x, p, reflect), q, reflect) -> Pad(x, p + q, reflect) for non-negative p, q padding disjoint axes "
        "(on a shared axis the second reflects the first's padding)",
        PAD_MERGE_REFLECT,
        ruleset="simplify",
    ),
    Rule(
        "pad-merge-reflect-site",
        "cleanup",
        "exact",
        "eqsat:analysis",
        "reflect-pads(y, x, p, q, w, pa, qa) for y = Pad(Pad(x, p, reflect), q, w, reflect) with p, q non-negative "
        "of one length, pa and qa their per-axis totals: what pad-merge-reflect reads",
        PAD_MERGE_REFLECT_SITE,
        ruleset="analysis",
    ),
    Rule(
        "reshape-merge",
        "cleanup",
        "exact",
        "onnxoptimizer:fuse_consecutive_reshapes",
        "Reshape(Reshape(x, s), t) -> Reshape(x, t) when t has no 0 entry (or allowzero = 1); a 0 in t (a copy of "
        "the inner output's dim i) becomes that dim when it is a size, or stays when it is x's dim i (the same symbol)",
        (
            rw("(Reshape (Reshape x s z) t w)", "(Reshape x t w)", "(vec-not-contains t 0)"),
            rw("(Reshape (Reshape x s z) t 1)", "(Reshape x t 1)"),
            need(f"{_ZEROS} (vec-contains t 0)", "(need-zeros-resolved t sy sx)"),
            rw("(Reshape y t 0)", "(Reshape x r 0)", f"{_ZEROS_OF} (vec-contains t 0) (= r (zeros-resolved t sy sx))"),
        ),
        ruleset="simplify",
    ),
]
