"""The term language: one egglog sort `T` for tensors and one constructor per modelled ONNX op.

Which ONNX ops eqsat understands and how each maps to a term is the op table, `eqsat.ops.OPS` (re-exported
here): tensor inputs first (ONNX input order), then static parameters (attributes, and inputs that must be
constant such as Reshape's shape or Clip's bounds), each with its egglog kind and ONNX default.
Everything else becomes an `Opaque` node that no rule rewrites and lowering restores unchanged.
The parameterless elementwise unary and binary ops and the reductions share one constructor per family
(GENERIC: `(Unary "Relu" x)`, `(Binary "Add" a b)`, `(Reduce "ReduceSum" x axes keepdims)`), as do the elementwise
unary ops with parameters, one family per signature (`(UnaryF "LeakyRelu" x a)`, `(UnaryFF "Clip" x lo hi)`,
`(UnaryS "Cast" x t)`), so that one rule row covers every op of a family, guarded by the op facts (OP_FACTS:
`(idempotent "Abs")`, `(arith "Add")`, ...).

Leaves and helpers: `(Input "name")`, `(Const "key")` (an initializer, keyed by content hash so equal
constants are one term), `(Scalar value "DTYPE" shape)` (single-element constants, value as f64 so
rules can test it), `(Absent)` (a missing optional input), `(Opaque "key" inputs)` of sort `N` with
`(Out n k)` projections, `TCons`/`TNil` lists, `(ReshapeDyn x target allowzero)` (a Reshape whose target is
computed at run time), and the unextractable handle `(Ref i)`.

Facts: `shape`, `dtype` (primitive-valued, no merge: a conflict is an unsound rule), `positive`
(constants whose values are all > 0), `finite` (`Const` tensors with no NaN or infinity: every integer
one), `safe-reciprocal` (float `Const` tensors whose nonzero elements all have finite reciprocals in their
dtype), `moderate` (float `Const` tensors whose elements all lie in [2^-126, 1e30]), `const-value` (element k,
flattened, of a `Const` of at most SMALL_CONST elements, as f64),
`splat` (a constant whose elements all equal one value, as f64: a `Scalar`'s value, a
`Const` of zeros or ones; rules that match a neutral element read it),
`conv-fanout` (values two or more input Convs read: where conv-merge may join),
`inv-perm` (inverse permutations), `lossless-cast` (dtype pairs whose conversion is exact for every value),
`truncating-cast` (integer pairs (t1, t2), t2 no wider: Cast to t1 then t2 is Cast to t2), `wide-int`
(integers of 32 or 64 bits), `dtype-group` (DTYPE_GROUPS: the dtypes a kernel takes, from an opset), `float-max`,
`reassoc-floor` (REASSOC_FLOOR).
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from typing import Any, Iterable, Mapping, Sequence

# The op table (eqsat.ops, the base layer) is re-exported: the term language's ops and their categories.
from eqsat.ops import BINARY as BINARY
from eqsat.ops import NONDETERMINISTIC as NONDETERMINISTIC
from eqsat.ops import OPS as OPS
from eqsat.ops import UNARY as UNARY
from eqsat.ops import OpSpec as OpSpec
from eqsat.ops import Param as Param
from eqsat import ops as _ops

#: Constructors that never become ONNX nodes (leaves, lists, projections): free in every cost model.
PLUMBING_OPS = frozenset({"Input", "Const", "Scalar", "Absent", "TCons", "TNil", "Out"})

#: Generic constructors: one egglog constructor per family of ops with one signature, the op's ONNX name its first
#: argument: `(Unary "Relu" x)`, `(Binary "Add" a b)`, `(Reduce "ReduceSum" x axes keepdims)`. Rules write
#: `(Relu x)` as before (eqsat.engine.rule renders it) or, for every op of a family, `(Unary op x)` guarded by an
#: OP_FACTS relation; decoding (eqsat.engine.egraph) gives each row back its op's name.
#: The elementwise unary ops with parameters (PARAM_UNARY) are one family per signature: `(UnaryF "LeakyRelu" x
#: alpha)`, `(UnaryFF "Clip" x lo hi)`, `(UnaryS "Cast" x to)`.
PARAM_UNARY_FAMILIES = {("T", "f64"): "UnaryF", ("T", "f64", "f64"): "UnaryFF", ("T", "String"): "UnaryS"}
GENERIC: dict[str, tuple[str, ...]] = {
    "Unary": tuple(op for op in OPS if op in UNARY),
    "Binary": tuple(op for op in OPS if op in BINARY),
    "Reduce": _ops.AXES_REDUCTIONS,
    **{
        family: tuple(op for op in _ops.PARAM_UNARY if OPS[op].signature == signature)
        for signature, family in PARAM_UNARY_FAMILIES.items()
    },
}
#: The generic constructor of each op that has one.
GENERIC_OF: dict[str, str] = {op: family for family, ops in GENERIC.items() for op in ops}
assert all(len({OPS[op].signature for op in ops}) == 1 for ops in GENERIC.values()), "a family shares one signature"
assert set(_ops.PARAM_UNARY) <= set(GENERIC_OF), "every elementwise unary op with parameters is in a family"

#: `additive-sign` facts: x op c = x + sign * c for the additive ops.
ADDITIVE_SIGN = {"Add": 1.0, "Sub": -1.0}
#: Op facts (`(name "Op")`, standard facts): the op classes generic rules guard on, one relation each, derived
#: from the op table's traits.
OP_FACTS: dict[str, tuple[str, ...]] = {
    # U(x) has x's dtype (IsNaN gives BOOL, Cast its `to`): the ops of every unary family
    "same-dtype-unary": tuple(
        op
        for family in ("Unary", *PARAM_UNARY_FAMILIES.values())
        for op in GENERIC[family]
        if op not in ("IsNaN", "Cast")
    ),
    # B(a, b) has a's dtype (comparisons give BOOL; And/Or/Xor get none from the analysis)
    "same-dtype-binary": tuple(
        op for op in GENERIC["Binary"] if op not in _ops.COMPARISONS and op not in _ops.BOOL_BINARY
    ),
    "comparison": tuple(op for op in _ops.COMPARISONS if op in BINARY),
    # unary ops lowering folds: their constant inputs make a constant (is-const)
    "const-foldable": _ops.CONST_FOLDABLE_UNARY,
    # U(U(x)) = U(x) for every value
    "idempotent": _ops.IDEMPOTENT,
    # the four arithmetic ops (broadcast sinks, reshaped biases, gathered dequantizations, fp16 narrowing)
    "arith": _ops.ARITHMETIC,
    # reductions of a set of axes whose order does not matter (remapped through a transpose)
    "axes-reduce": _ops.TRANSPOSE_REDUCTIONS,
    # reductions whose value over one element is that element
    "element-reduce": _ops.ELEMENT_REDUCTIONS,
    # the parameterless activations a conv runs as its epilogue (conv-merge-epilogue)
    "conv-epilogue": tuple(op for op in _ops.CONV_EPILOGUES if op in GENERIC_OF),
    # the ops of a per-column scale or bias (per-column facts)
    "scale-or-bias": ("Mul", "Add"),
    # B(a, a) = a (And, Or; not Xor)
    "bool-idempotent": tuple(op for op in _ops.BOOL_BINARY if op != "Xor"),
    # reductions that are a pointwise op over one element (|e|, e * e, log e)
    "unit-pointwise-reduce": tuple(
        op
        for op in _ops.AXES_REDUCTIONS
        if op not in _ops.ELEMENT_REDUCTIONS and op not in ("ReduceL2", "ReduceLogSumExp")
    ),
    # erf and tanh: the cores of the Gelu forms 1 + erf(...) and 1 + tanh(...) (gelu-forms)
    "gelu-core": ("Erf", "Tanh"),
    # -x and |x|: finite for finite x (finite-facts)
    "sign-unary": ("Neg", "Abs"),
    # sqrt(x) and 1/x: positive for positive x, finite for finite positive x (finite-facts, positive-facts)
    "positive-unary": ("Sqrt", "Reciprocal"),
    # Add and Sub (the rows that read additive-sign or additive-chain guard on it too: the rule closure reads
    # op facts)
    "additive": tuple(ADDITIVE_SIGN),
}
assert all(op in OPS for ops in OP_FACTS.values() for op in ops)

#: Constructors that are not ONNX ops, with their signatures and result sorts.
SPECIAL: dict[str, tuple[tuple[str, ...], str]] = {
    "Ref": (("i64",), "T"),
    "Input": (("String",), "T"),
    "Const": (("String",), "T"),
    "Scalar": (("f64", "String", "IVec"), "T"),
    "Absent": ((), "T"),
    "TNil": ((), "TL"),
    "TCons": (("T", "TL"), "TL"),
    "Opaque": (("String", "TL"), "N"),
    "Out": (("N", "i64"), "T"),
    # Typed tensor-list ops: Concat over a list (axis non-negative), Split into sizes along an axis
    # (multi-output: its results are `(Out n k)`), and TAppend, the list append the tensor rules build
    # (always unioned with its TCons form by `tensor-list-append`; never extracted).
    "Concat": (("TL", "i64"), "T"),
    "Split": (("T", "i64", "IVec"), "N"),
    # Reshape to a target computed at run time (its tensor input): rules read the shape facts, not the target
    "ReshapeDyn": (("T", "T", "i64"), "T"),
    "TAppend": (("TL", "TL"), "TL"),
}

#: Functions of lists, computed on demand (`need-<name>` relations) by the analysis rule list-functions
#: (rewrites/analysis.py): name -> (argument sorts, result sort).
LIST_FUNCTIONS: dict[str, tuple[str, str]] = {
    "elements": ("IVec", "ISet"),  # the set of a vector's elements
    "merged": ("IVec IVec", "IVec"),  # the elements of a and b in increasing order (once each)
    "drop-at": ("IVec IVec", "IVec"),  # v without the positions in ix (ix increasing)
    "ones-at": ("IVec IVec", "IVec"),  # v with the positions in ix set to 1
    "index-map": ("IVec", "IVec"),  # m with m[k[i]] = i (k increasing, non-negative)
    "dims-product": ("IVec IVec", "i64"),  # the product of v[ix] when each is a size (>= 0)
    "sum-of": ("IVec IVec", "IVec"),  # a + b elementwise (equal lengths)
    "symbol-count": ("IVec", "i64"),  # how many entries of a shape are symbols (negative)
    "zeros-resolved": ("IVec IVec IVec", "IVec"),  # t's 0s (copies of dims sy) as sizes, or as 0s copying sx
    "quotients": ("IVec i64", "IVec"),  # v[i] / d, when d > 0 divides every v[i] >= 0 (else no value)
    "data-order": ("IVec IVec", "i64"),  # the last p[i] with s[p[i]] != 1 when those increase along p (-1: none)
}

#: Constructors whose ONNX op has another name (what reports show): the op lowering writes for them.
ONNX_NAMES = {"ReshapeDyn": "Reshape"}

#: Typed ops that are not in OPS (their inputs are lists or their result is an N).
LIST_OPS = frozenset({"Concat", "Split"})

#: Dtype pairs (from, to) where every value of `from` is exactly representable in `to`.
_EXACT_RANGES = {
    "BOOL": [
        "UINT8",
        "INT8",
        "UINT16",
        "INT16",
        "UINT32",
        "INT32",
        "UINT64",
        "INT64",
        "FLOAT16",
        "BFLOAT16",
        "FLOAT",
        "DOUBLE",
    ],
    "UINT8": ["UINT16", "INT16", "UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE"],
    "INT8": ["INT16", "INT32", "INT64", "FLOAT16", "BFLOAT16", "FLOAT", "DOUBLE"],
    "UINT16": ["UINT32", "INT32", "UINT64", "INT64", "FLOAT", "DOUBLE"],
    "INT16": ["INT32", "INT64", "FLOAT", "DOUBLE"],
    "UINT32": ["UINT64", "INT64", "DOUBLE"],
    "INT32": ["INT64", "DOUBLE"],
    "FLOAT16": ["FLOAT", "DOUBLE"],
    "BFLOAT16": ["FLOAT", "DOUBLE"],
    "FLOAT": ["DOUBLE"],
}
LOSSLESS_CASTS: tuple[tuple[str, str], ...] = tuple((a, b) for a, bs in _EXACT_RANGES.items() for b in bs)

#: Integer dtypes and their widths in bits.
INT_BITS = {"INT8": 8, "UINT8": 8, "INT16": 16, "UINT16": 16, "INT32": 32, "UINT32": 32, "INT64": 64, "UINT64": 64}
#: (t1, t2) with Cast(Cast(x, t1), t2) = Cast(x, t2) for every integer x (t1 != t2): wrap-around keeps the low bits.
TRUNCATING_CASTS: tuple[tuple[str, str], ...] = tuple(
    (a, b) for a in INT_BITS for b in INT_BITS if a != b and INT_BITS[b] <= INT_BITS[a]
)
#: Integers a float cast may round (narrower ones are exact in FLOAT).
WIDE_INTS = ("INT32", "UINT32", "INT64", "UINT64")
#: `additive-chain` facts: (x op1 c1) op2 c2 = x op1 (c1 op c2) (the same op twice adds the constants, mixed
#: ops subtract them).
ADDITIVE_CHAIN = {(a, b): "Add" if a == b else "Sub" for a in ADDITIVE_SIGN for b in ADDITIVE_SIGN}
#: `reduce-as-unary` facts: R(x, axes, keepdims=1) over reduced dims of 1 is U(x).
REDUCE_AS_UNARY = {"ReduceL1": "Abs", "ReduceLogSum": "Log"}
#: Standard fact tables with a column naming an op that a rule may create (the rule closure reads them): the
#: column and the ops it holds.
OP_TABLES: dict[str, tuple[int, frozenset[str]]] = {
    "additive-chain": (2, frozenset(ADDITIVE_CHAIN.values())),
    "reduce-as-unary": (1, frozenset(REDUCE_AS_UNARY.values())),
}
#: The functions of lists whose value at empty arguments is a constant: standard facts (their recursions in
#: rewrites/analysis.py end there) instead of a base row each.
LIST_BASES = {
    "elements": "(set (elements (vec-empty)) (set-empty))",
    "index-map": "(set (index-map (vec-empty)) (vec-empty))",
    "sum-of": "(set (sum-of (vec-empty) (vec-empty)) (vec-empty))",
    "symbol-count": "(set (symbol-count (vec-empty)) 0)",
}

#: Dtype groups (`dtype-group` facts: group, dtype, first opset): the dtypes ONNX Runtime's CPU kernel of an op
#: takes (DepthToSpace, SpaceToDepth), those the fused activations run exactly or in higher precision
#: (activation), those whose tensor constants may be inverted (tensor-reciprocal: those of them that are
#: `safe-reciprocal`), Gather's index dtypes (gather-index), the floats (float: bn-compose) and those ONNX Runtime
#: has a Gemm kernel for (gemm: no integer nor bfloat16 one).
DTYPE_GROUPS: dict[str, tuple[tuple[str, int], ...]] = {
    "DepthToSpace": (("FLOAT", 1), ("DOUBLE", 1), ("FLOAT16", 1), ("UINT8", 11), ("INT8", 11)),
    "SpaceToDepth": (("FLOAT", 1), ("DOUBLE", 1), ("FLOAT16", 1), ("UINT8", 1), ("INT8", 1)),
    "activation": (("FLOAT", 1), ("FLOAT16", 1)),
    "tensor-reciprocal": (("FLOAT", 1), ("DOUBLE", 1)),
    "gather-index": (("INT64", 1), ("INT32", 1)),
    "float": (("FLOAT", 1), ("FLOAT16", 1), ("DOUBLE", 1), ("BFLOAT16", 1)),
    "gemm": (("FLOAT", 1), ("FLOAT16", 1), ("DOUBLE", 1)),
    "float-or-double": (("FLOAT", 1), ("DOUBLE", 1)),
}
#: Float dtypes with their largest finite value (`float-max`): 1 / c must not exceed it.
FLOAT_MAX = {"FLOAT": 3.4028234663852886e38, "FLOAT16": 65504.0, "DOUBLE": 1.7976931348623157e308}
#: The smallest normal float32, and the largest quantization scale rules take: n * s stays finite and keeps all its
#: bits for every 8-bit n (`moderate` constants lie within; rewrites/quant.py).
FLT_MIN_NORMAL = 1.1754943508222875e-38
MAX_SCALE = 1.0e30
#: `reassoc-floor` facts: the least |c| mul-scalar-reassoc may move out of a product in a dtype, (a * c) * b ->
#: (a * b) * c. FLOAT16's range is small enough that a * b may overflow where a * c did not (300 * 300, c = 0.125):
#: only |c| >= 1 there. The wide floats leave orders of magnitude of headroom; integers wrap and associate exactly.
REASSOC_FLOOR = {"FLOAT16": 1.0} | dict.fromkeys(
    ("FLOAT", "DOUBLE", "BFLOAT16", "INT8", "UINT8", "INT16", "UINT16", "INT32", "UINT32", "INT64", "UINT64"), 0.0
)

#: `Const` tensors of at most this many elements get `const-value` facts (OneHot's [off, on] values).
SMALL_CONST = 8

#: Inverse permutations are asserted for every perm up to STANDARD_PERM_RANK (standard facts: 33), up to
#: MAX_PERM_RANK (120 more: `perm_facts`) once a backend meets a model that holds a value or a perm of that rank
#: (eqsat.engine.prepared.reach_perm_rank), and above it for the model's own perms (`model_facts`).
STANDARD_PERM_RANK = 4
MAX_PERM_RANK = 5


def egg_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def egg_float(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    text = repr(float(x))
    return text if ("." in text or "e" in text or "inf" in text) else text + ".0"


def egg_ints(xs: Sequence[int]) -> str:
    return "(vec-of " + " ".join(str(int(x)) for x in xs) + ")" if len(xs) else "(vec-empty)"


def egg_value(kind: str, value: Any) -> str:
    if kind == "int":
        return str(int(value))
    if kind == "ints":
        return egg_ints(value)
    if kind == "float":
        return egg_float(value)
    return egg_str(str(value))


def inverse_perm(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


#: Shape facts' static dims are checked against each other up to this rank (`dim-index`).
MAX_CHECKED_RANK = 16


#: Declared by every backend whatever its rules name (`declared`): the sorts, the handles and leaves every encoding
#: loads (eqsat.engine.encode), the facts it sets on every value (`model-opset` included), and those decoding reads
#: (eqsat.engine.egraph.DECODED_FACTS).
CORE = (
    *("IVec", "ISet", "IFn", "T", "TL", "N"),
    *("Ref", "Input", "Const", "Scalar", "Absent"),
    *("shape", "shape-met", "dtype", "rewritten", "model-opset"),
)
#: The head of an s-expression: a name `declared` may know.
_HEAD = re.compile(r"\(([\w-]+)")
#: The name a declaration declares.
_DECLARES = re.compile(r"\((?:sort|constructor|function|relation) ([\w-]+)")


def heads(texts: Iterable[str]) -> set[str]:
    """The names at the heads of the s-expressions of egglog `texts` (what `declared` is asked for)."""
    return set(_HEAD.findall("\n".join(texts)))


def declarations() -> str:
    """The egglog program that declares every sort, constructor and fact table (a backend declares those
    `declared` picks; Backend.declare adds eqsat.engine.bulk's vector table, Backend.load_rows a load table)."""
    return "\n".join(_declaration_lines().values())


def declared(names: Iterable[str] | None = None) -> dict[str, str]:
    """What a backend declares to run egglog text naming `names` (`heads`): name -> declaration, in declaration
    order. The sorts and CORE tables always; of the others those named: a constructor, function or relation, and
    for an op its family's constructor (`Relu`: `Unary`, eqsat.engine.rule.render). None: every declaration.
    Names nothing declares (primitives, rule and ruleset names, variables) are ignored. A table no rule names is
    read by no rule; loading a model declares what it builds (eqsat.engine.backend.Backend.load, load_rows)."""
    table = _declaration_lines()
    if names is None:
        return dict(table)
    wanted = {*CORE, *(GENERIC_OF.get(name, name) for name in names)}
    return {name: line for name, line in table.items() if name in wanted}


@functools.lru_cache(maxsize=1)
def _declaration_lines() -> dict[str, str]:
    """Every declaration by the name it declares, in declaration order."""
    found = {}
    for line in _all_declarations():
        match = _DECLARES.match(line)
        assert match is not None, line
        found[match[1]] = line
    return found


def _all_declarations() -> list[str]:
    """Every sort, constructor and fact table, one declaration a line."""
    lines = [
        "(sort IVec (Vec i64))",
        "(sort ISet (Set i64))",
        "(sort IFn (UnstableFn (i64) i64))",
        "(sort T)",
        "(sort TL)",
        "(sort N)",
    ]
    for name, (args, sort) in SPECIAL.items():
        if sort == "T" or name in ("TNil", "TCons", "Opaque", "Out", "Split", "TAppend"):
            lines.append(f"(constructor {name} ({' '.join(args)}) {sort})")
    for spec in OPS.values():
        if spec.name not in GENERIC_OF:
            lines.append(f"(constructor {spec.name} ({' '.join(spec.signature)}) T)")
    for family, ops in GENERIC.items():
        lines.append(f"(constructor {family} (String {' '.join(OPS[ops[0]].signature)}) T)")
    lines += [f"(relation {name} (String))" for name in OP_FACTS]
    lines += [
        # shape facts: the first one an e-class gets is read by the rules; every one it gets is in shape-met
        # (symbols that meet there are unified by eqsat.engine.unify); static dims and ranks that differ panic
        "(function shape (T) IVec :merge old)",
        "(relation shape-met (T IVec))",
        "(function shape-dim (T i64) i64 :no-merge)",
        "(function shape-rank (T) i64 :no-merge)",
        "(relation dim-index (i64))",
        "(function dtype (T) String :no-merge)",
        "(relation positive (T))",
        "(relation is-const (T))",
        "(relation const-leaf (T))",
        # a per-tensor zero point's value and shape: a Scalar's; an absent one's 0.0 and [] (rewrites/quant.py)
        "(relation zero-point (T f64 IVec))",
        "(relation finite (T))",
        # a float Const whose nonzero elements all have finite reciprocals in its dtype (no tiny subnormal: x / 0
        # and x * (1 / 0) agree)
        "(relation safe-reciprocal (T))",
        # a float Const whose elements all lie in [2^-126, 1e30] (float32's smallest normal to MODERATE_MAX): a
        # quantization scale that neither loses bits nor overflows on an 8-bit grid (rewrites/quant.py qdq-cancel)
        "(relation moderate (T))",
        "(relation const-value (T i64 f64))",
        "(relation splat (T f64))",
        "(function inv-perm (IVec) IVec :no-merge)",
        "(relation lossless-cast (String String))",
        "(relation truncating-cast (String String))",
        "(relation wide-int (String))",
        "(relation dtype-group (String String i64))",
        "(function float-max (String) f64 :no-merge)",
        "(function reassoc-floor (String) f64 :no-merge)",
        "(relation conv-fanout (T))",
        # y is a Reshape of x, by a static or a run-time target (rewrites/analysis.py reshape-facts)
        "(relation reshape-of (T T))",
        # y has x's elements rearranged: a static Reshape or a Transpose of x (reshape-facts)
        "(relation view-of (T T))",
        # y = a * b and y = a + b, each product and sum in both operand orders (rewrites/analysis.py operand-orders)
        "(relation mul-of (T T T))",
        "(relation add-of (T T T))",
        # a Slice's axes a over an input of rank r, non-negative (rewrites/tensor.py: all of one sign)
        "(relation axes-at (IVec i64 IVec))",
        "(relation conv-site (T String IVec IVec IVec IVec i64 T T T))",
        "(relation bn-foldable (T T T T String))",
        "(function model-opset () i64 :no-merge)",
        "(relation rewritten (T String))",
        # Concat shapes: cdim(l, ax) = sum of shape(h)[ax] over the list, computed on demand
        "(relation cdim-demand (TL i64))",
        "(function cdim (TL i64) i64 :no-merge)",
        "(relation const-list (TL))",
        # Concat list walks (rewrites/tensor.py): splices, Split sizes, transposed and stacked items
        "(relation cat-eq (TL TL i64))",
        "(relation split-walk (N TL TL i64))",
        "(relation split-fits (N TL))",
        "(relation cat-perm (TL IVec))",
        "(relation tsink-need (TL IVec))",
        "(relation untransposed (TL IVec TL i64))",
        "(relation stack-need (TL IVec))",
        "(relation stacked (TL IVec IVec TL i64))",
        # Gelu forms (rewrites/activation.py): the h a fusion asks for, and y = x * 0.5 * h
        "(relation gelu-h (T))",
        "(relation gelu-half (T T T))",
        # an order on constants (by content key, first seen first) for rules that pick sorted subsets
        "(function const-rank (T) i64 :merge (min old new))",
        # merges of products sharing an input (rewrites/linear.py, conv.py): sites, each site's next one (least
        # larger const-rank), the last site of a merged Split, and Splits of a merged product that extend another
        "(relation mm-site (T i64 T T))",
        "(relation mm-bias-site (T i64 T T T))",
        "(function mm-next (T i64) i64 :merge (min old new))",
        "(function mm-bias-next (T i64) i64 :merge (min old new))",
        "(relation gemm-site (T f64 f64 i64 i64 i64 T T))",
        "(relation gemm-bias-site (T f64 f64 i64 i64 i64 T T T))",
        "(function gemm-next (T f64 f64 i64 i64 i64) i64 :merge (min old new))",
        "(function gemm-bias-next (T f64 f64 i64 i64 i64) i64 :merge (min old new))",
        "(function conv-next (T String IVec IVec IVec IVec i64) i64 :merge (min old new))",
        "(function conv-bias-next (T String IVec IVec IVec IVec i64) i64 :merge (min old new))",
        "(relation merge-tip (N i64))",
        "(relation split-extends (N N))",
        # pools over a Pad (rewrites/pool.py): the site, and the pads a merged pool would have
        "(relation pool-pad (T T IVec IVec IVec T IVec))",
        "(relation pool-sum (T T IVec IVec IVec T IVec))",
        # a constant shaped like r with every axis but 1 set to 1 (rewrites/conv.py)
        "(relation per-channel (T IVec))",
        "(relation per-column (T IVec))",
        "(relation conv-pad (T T T IVec))",
        "(relation conv-group-views (T i64 IVec IVec))",
        "(relation bn-unmarked (f64 f64))",
        "(relation ln-dims (T i64 IVec IVec))",
        "(relation bias-fold-site (T))",
        # conv and normalization guards computed once (rewrites/conv.py, conv_facts.py, normalization.py)
        "(relation norm-moments (T T IVec f64))",
        "(relation ln-span (T T IVec i64 IVec f64))",
        "(relation in-site (T T i64 f64))",
        "(relation bn-scale (T T T T T T String))",
        "(function bn-folds (T) i64 :merge (max old new))",
        "(relation conv-of (T T T i64))",
        "(relation conv-input (T))",
        # QuantizeLinear's integer types and the 8-bit twin types (rewrites/quant.py)
        "(relation quant-range (String f64 f64 i64))",
        "(relation quant-twin (String String f64))",
        # the sign of an additive op, and the op combining two additive constants
        "(relation additive-sign (String f64))",
        "(relation additive-chain (String String String))",
        "(relation reduce-as-unary (String String))",
        # tensor, layout and cleanup sites: the guards of one rewrite computed once in analysis (keyed on the
        # matched e-class, with the operands the rewrite rebuilds from)
        "(relation onehot-gather (T T T f64))",
        "(relation gather-rows (T String T T T))",
        "(relation reshape-bias (T String T T T i64))",
        "(relation bcast-sink (T String T T i64 i64))",
        "(relation reduce-sink (T String T IVec IVec))",
        "(relation split-reshape (T IVec i64 T IVec i64 i64))",
        "(relation space-depth (T T T IVec))",
        "(relation reflect-pads (T T IVec IVec f64 IVec IVec))",
        "(relation view-merge (T T))",
    ]
    for name, (arg_sorts, result) in LIST_FUNCTIONS.items():
        lines += [f"(relation need-{name} ({arg_sorts}))", f"(function {name} ({arg_sorts}) {result} :no-merge)"]
    return lines


def static_facts(extra_perms: Iterable[Sequence[int]] = (), opset: int | None = None) -> list[str]:
    """Facts an e-graph of any rank starts with: `standard_facts()`, the inverse perms up to MAX_PERM_RANK and
    `model_facts(extra_perms, opset)`."""
    return standard_facts() + perm_facts(STANDARD_PERM_RANK + 1, MAX_PERM_RANK) + model_facts(extra_perms, opset)


def standard_facts() -> list[str]:
    """The facts no model changes: inverse perms (all up to STANDARD_PERM_RANK), lossless and truncating casts, wide
    integers, dtype groups, float maxima and the op facts (OP_FACTS). A prepared
    backend (eqsat.engine.prepared) holds them below its push, so each run loads only its `model_facts`."""
    facts = perm_facts(1, STANDARD_PERM_RANK)
    facts += [f"(lossless-cast {egg_str(a)} {egg_str(b)})" for a, b in LOSSLESS_CASTS]
    facts += [f"(truncating-cast {egg_str(a)} {egg_str(b)})" for a, b in TRUNCATING_CASTS]
    facts += [
        f"(dtype-group {egg_str(g)} {egg_str(d)} {since})" for g, rows in DTYPE_GROUPS.items() for d, since in rows
    ]
    facts += [f"(set (float-max {egg_str(d)}) {egg_float(top)})" for d, top in FLOAT_MAX.items()]
    facts += [f"(set (reassoc-floor {egg_str(d)}) {egg_float(least)})" for d, least in REASSOC_FLOOR.items()]
    facts += [f"(dim-index {i})" for i in range(MAX_CHECKED_RANK)]
    facts += [f"({name} {egg_str(op)})" for name, ops in OP_FACTS.items() for op in ops]
    # x op c = x + sign c; (x op1 c1) op2 c2 = x op1 (c1 op c2); list-function bases
    facts += [f"(additive-sign {egg_str(op)} {egg_float(sign)})" for op, sign in ADDITIVE_SIGN.items()]
    facts += [f"(additive-chain {egg_str(a)} {egg_str(b)} {egg_str(c)})" for (a, b), c in ADDITIVE_CHAIN.items()]
    facts += list(LIST_BASES.values())
    facts += [f"(reduce-as-unary {egg_str(r)} {egg_str(u)})" for r, u in REDUCE_AS_UNARY.items()]
    return facts + [f"(wide-int {egg_str(d)})" for d in WIDE_INTS]


def perm_facts(low: int, high: int) -> list[str]:
    """The inverse of every permutation of rank `low` to `high` (`inv-perm` facts), in sorted order."""
    return inverse_perm_facts(sorted(p for r in range(low, high + 1) for p in itertools.permutations(range(r))))


def inverse_perm_facts(perms: Iterable[Sequence[int]]) -> list[str]:
    """An `inv-perm` fact for each of `perms`, in their order."""
    return [f"(set (inv-perm {egg_ints(p)}) {egg_ints(inverse_perm(p))})" for p in perms]


def default_opset(opset_imports: Mapping[str, int]) -> int:
    """A model's default-domain opset from its imports (domain -> version): what `(model-opset)` holds."""
    return opset_imports.get("", opset_imports.get("ai.onnx", 1))


def model_facts(extra_perms: Iterable[Sequence[int]] = (), opset: int | None = None) -> list[str]:
    """One model's facts: inverse perms of `extra_perms` above MAX_PERM_RANK (those up to it are loaded for every
    perm of the rank: `perm_facts`) and the model's opset (`(model-opset)`: rules that create newer ops guard on
    it)."""
    facts = inverse_perm_facts(sorted({tuple(p) for p in extra_perms if len(p) > MAX_PERM_RANK}))
    if opset is not None:
        facts.append(f"(set (model-opset) {int(opset)})")
    return facts
