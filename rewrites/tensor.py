"""Tensor rules: Concat and Split (typed list ops: `(Concat list axis)`, `(Out (Split x axis sizes) k)`),
pixel shuffles, stacks and one-hot products.

    TAppend(TNil, r) -> r,  TAppend(TCons(h, t), r) -> TCons(h, TAppend(t, r))      list append (analysis)
    Concat([.., Concat(inner, ax), ..], ax) -> Concat([.., inner.., ..], ax)         nested Concats flattened
    Out(Split(Concat(parts, ax), ax, sizes), k) -> parts[k]      sizes[k] = shape(parts[k])[ax] for every k
    Concat([Transpose(a_i, p)...], ax) -> Transpose(Concat([a_i...], p[ax]), p)      transpose sinking
    Concat([Transpose(a, p), c], ax)   -> Transpose(Concat([a, Transpose(c, p^-1)], p[ax]), p)   one constant c
    Out(Split(Transpose(x, p), ax, sizes), k) -> Transpose(Out(Split(x, p[ax], sizes), k), p)
    Reshape(Out(Split(y, -1, [n_j]), k), [L.., n_k / d, d]) -> Out(Split(Reshape(y, [L.., N / d, d]), -2, [n_j / d]), k)
    Reshape(Out(Split(y, -1, [n_j]), k), [L.., n_k])        -> Out(Split(Reshape(y, [L.., N]), -1, [n_j]), k)
                                      N = sum of n_j, d > 0 dividing every n_j: one Reshape before the Split
                                      instead of one per part (Q/K/V heads)
    Slice(Slice(x, s1, e1, a1, t1), s2, e2, a2, t2) -> Slice(x, s1 + s2, e1 + e2, a1 + a2, t1 + t2)   no shared axis
    Reshape(Transpose(Reshape(x, [N, b, b, C/b², H, W]), [0, 3, 4, 1, 5, 2]), [N, C/b², H b, W b])
                                      -> DepthToSpace(x, b, DCR)
    Reshape(Transpose(Reshape(x, [N, C/b², b, b, H, W]), [0, 1, 4, 2, 5, 3]), [N, C/b², H b, W b])
                                      -> DepthToSpace(x, b, CRD)                     opset >= 11
    Reshape(Transpose(Reshape(x, [N, C, H/b, b, W/b, b]), [0, 3, 5, 1, 2, 4]), [N, C b², H/b, W/b])
                                      -> SpaceToDepth(x, b)
    Reshape(Concat([Unsqueeze(x_i, [a])...], a), shape(x_0) with axis a times n) -> Concat([x_i...], a)
    MatMul(OneHot(i, d, [0, 1], axis=-1), W) -> Where(Unsqueeze(Equal(Clip(i, -d, d-1), i), -1),
                                                      Gather(W, Clip(i, -d, d-1), 0), 0)
                                      W a finite constant [d, N], i INT32/INT64, opset >= 12

Lists of any length are matched by walks over their suffixes (relations computed in the analysis ruleset:
`cat-eq` for splices, `split-walk` for Split sizes, `untransposed` for transposed items, `stacked` for
stacked values); each rewrite is one row that reads its walk's result. List
classes keep list semantics (two list classes are only ever unioned when they are the same list: TAppend
is the append function), so an Opaque node sharing a list with a Concat is never changed by these rules.

Pixel shuffles are matched on shape facts (the Reshape targets may use -1 and 0): x is 4-D and the 6-D
intermediate and the output have exactly the shapes above. They are emitted only for the dtypes ONNX
Runtime's CPU kernels take (float, double, float16; uint8 and int8 from opset 11), so that the result runs.

The one-hot product is exact: with W finite, row i of W times a one-hot row adds exact zeros; OneHot wraps
indices in [-d, -1] as Gather does, and gives a zero row for any index outside [-d, d-1], where Gather
would fail: the Clip keeps Gather in range and the Where restores the zero rows. Non-finite weights are
excluded (0 * inf is NaN in the product: the finite fact comes from the loader).

An interleave (Concat + Reshape + Transpose + Reshape, coremltools detect_concat_interleave) has no
cheaper ONNX form than itself (ONNX has no interleaving Concat): it is not rewritten.
"""

from __future__ import annotations

from eqsat.engine.rule import Rule, fact, need, ones, rw
from eqsat.engine.terms import DTYPE_GROUPS

FAMILY = "tensor"


def tlist(items: list[str], tail: str = "(TNil)") -> str:
    out = tail
    for item in reversed(items):
        out = f"(TCons {item} {out})"
    return out


def _append() -> tuple:
    return (
        fact("(= l (TAppend a r)) (= a (TNil))", "(union (TAppend a r) r)"),
        fact("(= l (TAppend a r)) (= a (TCons h t))", "(union (TAppend a r) (TCons h (TAppend t r)))"),
    )


#: Concat(l ++ r, ax) = Concat(l2 ++ r, ax) for every list r, l a suffix of a Concat's list (cdim-demand walks
#: them): an item that is a Concat along ax spliced in, then the lists that keep a head over such a tail.
CONCAT_MERGE = (
    need("(cdim-demand l ax) (= l (TCons h t)) (= h (Concat il ax))", "(cat-eq l (TAppend il t) ax)"),
    need("(cdim-demand l ax) (= l (TCons h t)) (cat-eq t t2 ax)", "(cat-eq l (TCons h t2) ax)"),
    rw("(Concat l ax)", "(Concat l2 ax)", "(cat-eq l l2 ax)"),
)

#: Out(Split(Concat(l0, ax), ax, sz), k) = l0[k] when every item's size along ax is sz[k]: split-walk(sp, l0, l, k)
#: says the items before suffix l (k of them) fit; split-fits(sp, l0) that all of them do and sz has no more.
SPLIT_CONCAT = (
    need("(= sp (Split c ax sz)) (= c (Concat l0 ax)) (>= ax 0)", "(split-walk sp l0 l0 0)"),
    need(
        "(split-walk sp l0 l k) (= sp (Split c ax sz)) (= l (TCons h t)) (= s (shape h)) (< ax (vec-length s)) "
        "(< k (vec-length sz)) (= (vec-get sz k) (vec-get s ax))",
        "(split-walk sp l0 t (+ k 1))",
    ),
    need("(split-walk sp l0 l k) (= l (TNil)) (= sp (Split c ax sz)) (= k (vec-length sz))", "(split-fits sp l0)"),
    fact("(split-fits sp l0) (split-walk sp l0 l k) (= l (TCons h t))", "(union (Out sp k) h)"),
)

#: untransposed(l, p, la, n): every item of l is Transpose(a, p) (la holds a) or a constant of rank |p| (la holds
#: Transpose(c, p^-1), folded at lowering; n counts them); asked for (tsink-need) for the suffixes of a Concat's
#: list when some item is a Transpose by p (cat-perm). Shared by transpose-sink-concat (n = 0) and -const (n = 1).
CONCAT_TRANSPOSED = (
    fact("(cdim-demand l ax) (= l (TCons h t)) (= h (Transpose a p))", "(cat-perm l p)"),
    fact("(cdim-demand l ax) (= l (TCons h t)) (cat-perm t p)", "(cat-perm l p)"),
    fact("(= y (Concat l ax)) (cat-perm l p)", "(tsink-need l p)"),
    fact("(tsink-need l p) (= l (TCons h t))", "(tsink-need t p)"),
    fact("(tsink-need l p) (= l (TNil))", "(untransposed l p l 0)"),
    fact(
        "(tsink-need l p) (= l (TCons h t)) (= h (Transpose a p)) (untransposed t p ta n)",
        "(untransposed l p (TCons a ta) n)",
    ),
    fact(
        "(tsink-need l p) (= l (TCons h t)) (is-const h) (= (vec-length (shape h)) (vec-length p)) "
        "(= ip (inv-perm p)) (untransposed t p ta n)",
        "(untransposed l p (TCons (Transpose h ip) ta) (+ n 1))",
    ),
)


def _transpose_sink_split() -> tuple:
    return (
        fact(
            "(= o (Out sp k)) (= sp (Split t ax sz)) (= t (Transpose x p)) (>= ax 0) (< ax (vec-length p))",
            "(union o (Transpose (Out (Split x (vec-get p ax) sz) k) p))",
        ),
    )


#: Reshape(Out(Split(y, ax, sz), k), s, z) with ax y's last axis (rank ry, static width n = sum(sz)), a part of
#: width sz[k] > 0 and an output of rank r >= 2 (shape so); the new target is s with one entry changed. Entries of
#: s keep their meaning for y: a -1 infers the same dim (both totals scale by n / sz[k], as does the changed entry);
#: a 0 at a position below ry - 1 copies a leading dim the part shares with y; a 0 at ry - 1 (which would copy the
#: part's width, not y's) is excluded by the guard at min(ry - 1, r - 1) (positions past the input's rank hold no
#: 0 in a valid model).
_SPLIT_SITE = (
    "(= o (Reshape p s z)) (= p (Out sp k)) (= sp (Split y ax sz)) (= sy (shape y)) (= ry (vec-length sy)) "
    "(= ax (- ry 1)) (= n (vec-get sy ax)) (>= n 0) (= so (shape o)) (= r (vec-length so)) (>= r 2) "
    "(= (vec-length s) r) (>= k 0) (< k (vec-length sz)) (> (vec-get sz k) 0) "
    "(!= (vec-get s (min (- ry 1) (- r 1))) 0)"
)
#: ... computed once in analysis (split-reshape-merge-site: split-reshape(o, s, z, y, sz, k, n)), read by the rewrites;
#: the site also asks for the sizes divided by the output's last dim (the heads form's q)
_SPLIT_NEEDS = "(need-quotients sz (vec-get so (- r 1)))"
_SPLIT_RESHAPE = (
    "(split-reshape o s z y sz k n) (= so (shape o)) (= r (vec-length so)) (= w (vec-get sz k)) (= dt (dtype y))"
)
#: ... heads: so ends [h, d] with h d = sz[k] and d dividing every size (q = sz / d): Reshape(y) ends [n / d, d] and
#: the Split runs along axis r - 2. Element (i, j) of y (i its leading index) is (i, j div d, j mod d) after it; the
#: part k column j - off_k (off_k = d q[0..k) summed) is (i, (j - off_k) div d, j mod d) in the part's Reshape.
_SPLIT_HEADS = "(= d (vec-get so (- r 1))) (> d 0) (= h (vec-get so (- r 2))) (= (* h d) w)"


def _split_reshape() -> tuple:
    """The heads form (a list function divides the sizes) and the whole-width form (the Reshape keeps the part's
    last axis whole and only regroups the leading dims: so[-1] = sz[k], the Split stays on the last axis)."""
    heads = (
        "(let t (vec-set s (- r 2) (/ n d))) (let yr (Reshape y t z)) (set (shape yr) (vec-set so (- r 2) (/ n d))) "
        "(set (dtype yr) dt) (union o (Out (Split yr (- r 2) q) k))"
    )
    whole = (
        "(let t (vec-set s (- r 1) n)) (let yr (Reshape y t z)) (set (shape yr) (vec-set so (- r 1) n)) "
        "(set (dtype yr) dt) (union o (Out (Split yr (- r 1) sz) k))"
    )
    return (
        fact(f"{_SPLIT_RESHAPE} {_SPLIT_HEADS} (= q (quotients sz d))", heads),
        fact(f"{_SPLIT_RESHAPE} (= (vec-get so (- r 1)) w)", whole),
    )


#: dtypes ONNX Runtime's CPU DepthToSpace / SpaceToDepth kernels take, with the first opset that has them.
D2S_DTYPES = DTYPE_GROUPS["DepthToSpace"]
S2D_DTYPES = DTYPE_GROUPS["SpaceToDepth"]

#: Reshape -> Transpose -> Reshape over a 4-D x [n, c, h, w] (sr: the 6-D intermediate shape, sy: the output's),
#: of a dtype the op's kernel takes at the model's opset.
#: The structure is a site computed once in analysis (space-depth-site: space-depth(y, x, r, perm)).
_SHUFFLE_SITE = (
    "(= y (Reshape t s2 z2)) (= t (Transpose r p)) (= r (Reshape x s1 z1)) (= (vec-length (shape x)) 4) "
    "(= (vec-length (shape r)) 6)"
)
_SHUFFLE = (
    "(space-depth y x r {perm}) (= sx (shape x)) (= n (vec-get sx 0)) (= c (vec-get sx 1)) (= h (vec-get sx 2)) "
    "(= w (vec-get sx 3)) (= sr (shape r)) (= sy (shape y)) (= dt (dtype x)) "
    '(dtype-group "{op}" dt since) (= o (model-opset)) (>= o since)'
)

DEPTH_TO_SPACE = (  # DCR, then CRD (opset >= 11); the 6-D intermediate binds b and cb = C / b²
    fact(
        f"{_SHUFFLE.format(perm='(vec-of 0 3 4 1 5 2)', op='DepthToSpace')} (= b (vec-get sr 1)) (= cb (vec-get sr 3)) "
        "(= sr (vec-of n b b cb h w)) (> b 0) (>= cb 0) (>= h 0) (>= w 0) (= c (* (* b b) cb)) "
        "(= sy (vec-of n cb (* h b) (* w b)))",
        '(union y (DepthToSpace x b "DCR"))',
    ),
    fact(
        f"{_SHUFFLE.format(perm='(vec-of 0 1 4 2 5 3)', op='DepthToSpace')} (>= o 11) (= b (vec-get sr 2)) "
        "(= cb (vec-get sr 1)) (= sr (vec-of n cb b b h w)) (> b 0) (>= cb 0) (>= h 0) (>= w 0) "
        "(= c (* (* b b) cb)) (= sy (vec-of n cb (* h b) (* w b)))",
        '(union y (DepthToSpace x b "CRD"))',
    ),
)
SPACE_TO_DEPTH = (
    fact(
        f"{_SHUFFLE.format(perm='(vec-of 0 3 5 1 2 4)', op='SpaceToDepth')} (= b (vec-get sr 3)) (> b 0) (>= c 0) "
        "(= hb (vec-get sr 2)) (= wb (vec-get sr 4)) (>= hb 0) (>= wb 0) "
        "(= sr (vec-of n c hb b wb b)) "
        "(= h (* hb b)) (= w (* wb b)) (= sy (vec-of n (* c (* b b)) hb wb))",
        "(union y (SpaceToDepth x b))",
    ),
)


#: stacked(l, ua, sx, xs, n): the items of l are Unsqueeze(x_k, ua) of n values x_k of one shape sx, listed in xs
#: (asked for the list of a Concat under a Reshape, and its suffixes).
STACK_RESHAPE = (
    need("(= y (Reshape c s z)) (= c (Concat l a))", "(stack-need l (vec-of a))"),
    need("(stack-need l ua) (= l (TCons h t))", "(stack-need t ua)"),
    need(
        "(stack-need l ua) (= l (TCons h t)) (= t (TNil)) (= h (Unsqueeze x ua)) (= sx (shape x))",
        "(stacked l ua sx (TCons x t) 1)",
    ),
    need(
        "(stack-need l ua) (= l (TCons h t)) (= h (Unsqueeze x ua)) (= sx (shape x)) (stacked t ua sx xs n)",
        "(stacked l ua sx (TCons x xs) (+ n 1))",
    ),
    rw(
        "(Reshape (Concat l a) s z)",
        "(Concat xs a)",
        "(= ua (vec-of a)) (stacked l ua sx xs n) (>= n 2) (>= a 0)",
        "(< a (vec-length sx)) (>= (vec-get sx a) 0) (= (shape __root) (vec-set sx a (* n (vec-get sx a))))",
    ),
)


#: y = Slice(Slice(x, s1, e1, a1, t1), s2, e2, a2, t2) over x of rank r.
_SLICES = "(= y (Slice (Slice x s1 e1 a1 t1) s2 e2 a2 t2)) (= r (vec-length (shape x)))"

#: Slice axes as non-negative ones (axes-at): listed all non-negative, or all negative (+ r); a mixed list has none.
SLICE_AXES = (
    need(
        '(= y (Slice x s e a t)) (= r (vec-length (shape x))) (= a (unstable-vec-map (unstable-fn "max" 0) a))',
        "(axes-at a r a)",
    ),
    need(
        '(= y (Slice x s e a t)) (= r (vec-length (shape x))) (= a (unstable-vec-map (unstable-fn "min" -1) a))',
        '(axes-at a r (unstable-vec-map (unstable-fn "+" r) a))',
    ),
)

#: Slice(Slice(x, ..a1..), ..a2..) -> one Slice over a1 then a2 when no axis is in both (merged(n1, n2) has them
#: all): slices of different axes commute and read the same dims, so bounds and steps mean the same. Axes and
#: steps listed (the same number as the axes: an empty list is the default, not matched).
SLICE_MERGE = (
    need(f"{_SLICES} (axes-at a1 r n1) (axes-at a2 r n2)", "(need-merged n1 n2)"),
    rw(
        "(Slice (Slice x s1 e1 a1 t1) s2 e2 a2 t2)",
        "(Slice x (vec-append s1 s2) (vec-append e1 e2) (vec-append n1 n2) (vec-append t1 t2))",
        "(= r (vec-length (shape x))) (axes-at a1 r n1) (axes-at a2 r n2) (= k1 (vec-length n1)) (> k1 0)",
        "(= k1 (vec-length t1)) (= k2 (vec-length n2)) (> k2 0) (= k2 (vec-length t2))",
        "(= (vec-length (merged n1 n2)) (+ k1 k2))",
    ),
)


#: MatMul(OneHot(i, d, [0, 1], axis=-1), W) for W a finite constant [d, N] and i of a dtype Gather takes
#: (`dtype-group "gather-index"`: OneHot takes any numeric index, Gather INT32 and INT64 only), opset >= 12.
_ONEHOT_MATMUL = (
    "(= y (MatMul oh wt)) (= oh (OneHot i dep v ax)) (= si (shape i)) (= ax (vec-length si)) "
    '(= it (dtype i)) (dtype-group "gather-index" it since) (= dep (Scalar dv ddt dsh)) (finite wt) (= sw (shape wt)) '
    "(= (vec-length sw) 2) (> (vec-get sw 0) 0) (= dv (to-f64 (vec-get sw 0))) (= (shape v) (vec-of 2)) "
    "(const-value v 0 0.0) (const-value v 1 1.0) (= o (model-opset)) (>= o 12)"
)
#: ... the site, computed once in analysis (onehot-matmul-to-gather-site: onehot-gather(y, i, W, d)), and what the
#: rewrite reads
_ONEHOT_SITE = "(onehot-gather y i wt dv) (= si (shape i)) (= ax (vec-length si)) (= sy (shape y)) (= dt (dtype wt))"
#: ... -> Where(Unsqueeze(Equal(Clip(i, -d, d-1), i), -1), Gather(W, Clip(i, -d, d-1), 0), 0)
_ONEHOT_AS_GATHER = (
    "(let c (Clip i (- 0.0 dv) (- dv 1.0))) (let m (Unsqueeze (Equal c i) (vec-of ax))) "
    "(let g (Gather wt c 0)) (let z (Scalar 0.0 dt (vec-empty))) "
    '(set (shape m) (vec-push si 1)) (set (dtype m) "BOOL") (set (shape g) sy) (set (dtype g) dt) '
    "(union y (Where m g z))"
)


#: Gather(B(a, c), i, 0) for B in Add, Sub, Mul, Div (`arith`): the elementwise ops a Gather moves in front of when
#: their other operand is a scalar or varies along the gathered axis only (a dequantization: Cast, then Sub of a
#: zero point, Mul by a per-row scale).
_GATHERED = "(= y (Gather u i 0)) (= u (Binary op a c)) (arith op)"

#: Gather(B(a, c), i, 0) -> B(Gather(a, i, 0), c') with c' = c for a single-element c of rank at most the output's
#: and a's (of a higher rank than a, c would broadcast the table up before the Gather), and Gather(c, i, 0) for a c
#: of a's rank (any rank) that varies only along axis 0 (of shape [n, 1, .., 1]: its rows gathered have shape
#: shape(i) + [1, .., 1]).
GATHER_BEFORE_ELEMENTWISE = (
    fact(
        f"{_GATHERED} (= c (Scalar v dt sc)) (= sy (shape y)) (<= (vec-length sc) (vec-length sy)) "
        "(<= (vec-length sc) (vec-length (shape a))) (= d (dtype a))",
        "(let g (Gather a i 0)) (set (shape g) sy) (set (dtype g) d) (union y (Binary op g c))",
    ),
    fact(
        "(gather-rows y op a c i) (= si (shape i)) (= sy (shape y)) (= d (dtype a)) (= sc (shape c)) (= dc (dtype c))",
        "(let g (Gather a i 0)) (let gc (Gather c i 0)) (set (shape g) sy) (set (dtype g) d) "
        "(set (shape gc) (vec-append si (vec-remove sc 0))) (set (dtype gc) dc) (union y (Binary op g gc))",
    ),
)
#: The second form's site (gather-before-elementwise-site: gather-rows(y, B, a, c, i), computed once in analysis): c
#: of a's rank varying along axis 0 only; its rows gathered have shape shape(i) + shape(c)[1:] (all 1s).
GATHER_ROWS_SITE = fact(
    f"{_GATHERED} (= sa (shape a)) (> (vec-length sa) 0) (= (shape c) (vec-set {ones('sa')} 0 (vec-get sa 0)))",
    "(gather-rows y op a c i)",
)


RULES = [
    Rule(
        "list-append",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "TAppend(TNil, r) -> r and TAppend(TCons(h, t), r) -> TCons(h, TAppend(t, r)) (the list append other "
        "tensor rules build)",
        _append(),
        ruleset="analysis",
    ),
    Rule(
        "concat-merge",
        FAMILY,
        "exact",
        "glow:ConcatNode merging; onnxruntime:ConcatSliceElimination",
        "Concat([a, Concat([b, c], ax), d], ax) -> Concat([a, b, c, d], ax) (lists of any length)",
        CONCAT_MERGE,
        ruleset="simplify",
    ),
    Rule(
        "concat-transposed-items",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "untransposed(l, p, la, n): the items of a Concat's list l are Transpose(a, p) or n constants of rank |p| "
        "(la: the a's and the constants transposed by p^-1), for the transpose-sink-concat rules",
        CONCAT_TRANSPOSED,
        ruleset="analysis",
    ),
    Rule(
        "split-concat",
        FAMILY,
        "exact",
        "glow:SplitConcat; tvm:SimplifyExpr (split of concatenate)",
        "Out(Split(Concat(parts, ax), ax, sizes), k) -> parts[k] when sizes are the parts' sizes along ax",
        SPLIT_CONCAT,
        ruleset="simplify",
    ),
    Rule(
        "transpose-sink-concat",
        FAMILY,
        "exact",
        "glow:sink-transpose (Concat); coremltools:reduce_transposes",
        "Concat([Transpose(a, p), Transpose(b, p), ...], ax) -> Transpose(Concat([a, b, ...], p[ax]), p)",
        (
            rw(
                "(Concat l ax)",
                "(Transpose (Concat la (vec-get p ax)) p)",
                "(untransposed l p la 0) (>= ax 0) (< ax (vec-length p))",
            ),
        ),
    ),
    Rule(
        "transpose-sink-concat-const",
        FAMILY,
        "exact",
        "glow:sink-transpose (Concat); coremltools:reduce_transposes",
        "Concat([Transpose(a, p), ..., c, ...], ax) -> Transpose(Concat([a, ..., Transpose(c, p^-1), ...], p[ax]), p) "
        "for one constant c of the same rank among the items (its Transpose folds at lowering)",
        (
            rw(
                "(Concat l ax)",
                "(Transpose (Concat la (vec-get p ax)) p)",
                "(untransposed l p la 1) (>= ax 0) (< ax (vec-length p))",
            ),
        ),
    ),
    Rule(
        "transpose-sink-split",
        FAMILY,
        "exact",
        "onnxruntime:TransposeOptimizer (Split); coreml:reduce_transposes",
        "Out(Split(Transpose(x, p), ax, sizes), k) -> Transpose(Out(Split(x, p[ax], sizes), k), p)",
        _transpose_sink_split(),
    ),
    Rule(
        "split-reshape-merge",
        FAMILY,
        "exact",
        "onnxruntime:AttentionFusion (packed QKV); tvm:CombineParallelDense (reshaped outputs)",
        "Reshape(Out(Split(y, -1, [n_j]), k), [L.., n_k / d, d]) -> Out(Split(Reshape(y, [L.., N / d, d]), -2, "
        "[n_j / d]), k) when d > 0 divides every n_j (N their sum, static); Reshape(Out(Split(y, -1, sizes), k), "
        "[L.., n_k]) -> Out(Split(Reshape(y, [L.., N]), -1, sizes), k): a static target whose entry at position "
        "min(rank(y), rank(out)) - 1 is not 0, the parts' Reshapes become one (pure data movement)",
        _split_reshape(),
    ),
    Rule(
        "slice-merge",
        FAMILY,
        "exact",
        "onnxoptimizer:fuse_consecutive_slices; tvm:SimplifyExpr (strided_slice)",
        "Slice(Slice(x, s1, e1, a1, t1), s2, e2, a2, t2) -> Slice(x, s1 + s2, e1 + e2, a1 + a2, t1 + t2) (lists "
        "joined) when no axis is sliced twice (axes of one sign each, steps listed)",
        SLICE_AXES + SLICE_MERGE,
    ),
    Rule(
        "depth-to-space",
        FAMILY,
        "exact",
        "openvino:DepthToSpaceFusion; pnnx:fuse_pixel_shuffle",
        "Reshape(Transpose(Reshape(x, 6-D), DCR or CRD perm), 4-D) -> DepthToSpace(x, b, mode) for a 4-D x whose "
        "shapes are exactly a pixel shuffle's (CRD: opset >= 11)",
        DEPTH_TO_SPACE,
    ),
    Rule(
        "space-to-depth",
        FAMILY,
        "exact",
        "onnxruntime:SpaceToDepthFusion (QNN EP node group)",
        "Reshape(Transpose(Reshape(x, [N, C, H/b, b, W/b, b]), [0, 3, 5, 1, 2, 4]), [N, C b², H/b, W/b]) -> "
        "SpaceToDepth(x, b) for a 4-D x",
        SPACE_TO_DEPTH,
    ),
    Rule(
        "space-depth-site",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "space-depth(y, x, r, p) for y = Reshape(Transpose(r, p)), r = Reshape(x) 6-D and x 4-D: the structure "
        "depth-to-space and space-to-depth join (c >= 0 follows from c = b b cb; h, w >= 0 from h = hb b, w = wb b)",
        (fact(_SHUFFLE_SITE, "(space-depth y x r p)"),),
        ruleset="analysis",
    ),
    Rule(
        "stack-reshape-to-concat",
        FAMILY,
        "exact",
        "coreml:replace_stack_reshape",
        "Reshape(Concat([Unsqueeze(x_i, [a])...], a)) -> Concat([x_i...], a) when the Reshape merges axis a with "
        "the next one (n >= 2 x_i of one shape)",
        STACK_RESHAPE,
    ),
    Rule(
        "split-reshape-merge-site",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "split-reshape(o, s, z, y, sz, k, n) for o = Reshape(Out(Split(y, last axis, sz), k), s, z) with y's last "
        "dim n static, a part of width > 0 and an output of rank >= 2: the guard of split-reshape-merge",
        (fact(_SPLIT_SITE, f"(split-reshape o s z y sz k n) {_SPLIT_NEEDS}"),),
        ruleset="analysis",
    ),
    Rule(
        "onehot-matmul-to-gather",
        FAMILY,
        "exact",
        "coreml:fuse_onehot_matmul_to_gather",
        "MatMul(OneHot(i, d, [0, 1], -1), W) -> Where(i in [-d, d-1], Gather(W, Clip(i, -d, d-1)), 0) for a "
        "finite constant W [d, N] and INT32/INT64 i (opset >= 12)",
        (fact(_ONEHOT_SITE, _ONEHOT_AS_GATHER),),
    ),
    Rule(
        "onehot-matmul-to-gather-site",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "onehot-gather(y, i, W, d) for y = MatMul(OneHot(i, d, [0, 1], -1), W), W a finite constant [d, N], i of a "
        "dtype Gather takes, opset >= 12: the guard of onehot-matmul-to-gather",
        (fact(_ONEHOT_MATMUL, "(onehot-gather y i wt dv)"),),
        ruleset="analysis",
    ),
    Rule(
        "gather-before-cast",
        FAMILY,
        "exact",
        "tvm:SimplifyExpr (take of cast); embedding dequantization",
        "Gather(Cast(w, t), i, ax) -> Cast(Gather(w, i, ax), t): cast the gathered rows, not the table",
        (
            fact(
                "(= y (Gather u i ax)) (= u (Cast w t)) (= sy (shape y)) (= dw (dtype w))",
                "(let g (Gather w i ax)) (set (shape g) sy) (set (dtype g) dw) (union y (Cast g t))",
            ),
        ),
    ),
    Rule(
        "gather-before-elementwise",
        FAMILY,
        "exact",
        "tvm:SimplifyExpr (take of elementwise); embedding dequantization",
        "Gather(B(a, c), i, 0) -> B(Gather(a, i, 0), c or Gather(c, i, 0)) for B in Add/Sub/Mul/Div and a "
        "single-element c (of rank at most a's and the output's) or one varying along axis 0 only: dequantize the "
        "gathered rows, not the table",
        GATHER_BEFORE_ELEMENTWISE,
    ),
    Rule(
        "gather-before-elementwise-site",
        FAMILY,
        "exact",
        "eqsat:analysis",
        "gather-rows(y, B, a, c, i) for y = Gather(B(a, c), i, 0), B in Add/Sub/Mul/Div and c of a's rank varying "
        "along axis 0 only: the guard of gather-before-elementwise's second form",
        (GATHER_ROWS_SITE,),
        ruleset="analysis",
    ),
]
