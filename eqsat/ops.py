"""The op table: one `OpSpec` row per ONNX op eqsat knows, carrying everything eqsat knows of it.

A row says how the op maps to a term (tensor inputs in ONNX order, then static parameters with their egglog
kinds and ONNX defaults; `term=False`: known for its traits only, it stays `Opaque`) and what the op is:
elementwise, how its output shape follows its inputs, what it computes in bools, what it costs (FLOPs, data
it only views or moves, an NCHW layout, the weight of a contraction), how lowering folds it, and the traits
single rules and checks read. Every category the code uses is derived below from the rows, so adding an op
is one row (plus lowering code only where the op is special; its shape and dtype facts in
rewrites/analysis.py). This module is in the base layer: the front end, the engine, the checks and the
testing harness all read it (tests/test_op_table.py fails on an op category spelled anywhere else).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

INF = float("inf")

#: egglog kinds of static parameters.
EGGLOG_KIND = {"int": "i64", "ints": "IVec", "float": "f64", "str": "String", "dtype": "String"}

#: How output 0's shape follows the inputs (eqsat.frontend.symbols): `same` as input 0, `broadcast` of all
#: inputs (numpy rules), `reduce` input 0 with the reduced axes 1 or dropped, `window` (N, C_out, spatial...)
#: from (N, C, spatial...), `matmul` numpy matmul of inputs 0 and 1, `global-pool` (N, C, 1, ...).
SHAPE_RULES = ("same", "broadcast", "reduce", "window", "matmul", "global-pool")


@dataclasses.dataclass(frozen=True)
class Param:
    """A static parameter: an ONNX attribute, or a constant input (`input` index) from opset `since`."""

    name: str
    kind: str  # int | ints | float | str | dtype
    default: Any = None  # None: required (the node goes opaque if it is absent)
    input: int | None = None  # index of the ONNX input that carries it from opset `since` on
    since: int = 1  # first opset with this attribute (or with it as an input)
    axes_of: str | None = None  # "input"/"output": axis values normalized against that rank

    @property
    def egglog_kind(self) -> str:
        return EGGLOG_KIND[self.kind]


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """One op: its term form and its traits (defaults: a trait the op does not have)."""

    name: str  # ONNX op_type and egglog constructor name
    inputs: tuple[str, ...] = ()  # tensor inputs, in ONNX order (static inputs excluded)
    params: tuple[Param, ...] = ()
    optional: int = 0  # how many trailing tensor inputs may be absent
    term: bool = True  # a constructor of the term language (False: known by its traits, kept Opaque)
    elementwise: bool = False  # each output element from the input elements at its position (broadcast)
    shape: str | None = None  # one of SHAPE_RULES
    logic: str | None = None  # "compare": a BOOL result of any inputs; "bool": BOOL inputs and result
    arithmetic: bool = False  # one of the four correctly rounded arithmetic operations (IEEE 754)
    idempotent: bool = False  # f(f(x)) = f(x) for every value (NaN, +-inf and integer wrap-around included)
    flops: float | None = None  # FLOPs per output element (elementwise; the cost model's default is 1)
    input_flops: float | None = None  # FLOPs per input element (reductions, pools, normalizations)
    moves: str | None = None  # "view": a new view of the same buffer; "move": moves or converts bytes, no FLOPs
    nchw: bool = False  # implies an NCHW memory layout
    indexed_read: bool = False  # reads only the elements it indexes (data input first)
    weight: tuple[str, int] | None = None  # a contraction ("conv" | "matmul") and its weight's tensor input
    numpy: str | None = None  # lowering's constant folding: a numpy function's name, or "own" (its own code)
    never_constant: bool = False  # never folded at lowering (weight Q/DQ stay for the runtimes' QDQ fusions)
    family: str | None = None  # "random" (never merged), "recurrent", "window-function" (input 0 a size)
    state_inputs: tuple[int, ...] = ()  # input positions of a recurrent op's initial states
    zero_preserving: bool = False  # output is zero wherever input 0 is (shape and layout only)
    follows: tuple[int, ...] = ()  # output elements are input elements from these positions (an index stays one)
    #: Reductions over one element, as the op `reduce-unit-axes` rules write them ("Identity": the element
    #: itself; "Abs", "Mul" (e * e), "Log"). ReduceL2 (|e|) and ReduceLogSumExp (e) have no such rule yet.
    one_element: str | None = None
    transpose_reduce: bool = False  # a reduction layout's reduce-transpose sinks (rewrites/layout.py) cover
    epilogue: tuple[str, ...] = ()  # producers ("conv", "matmul") some target runs this activation fused into
    #: Before this opset the op coerces its input to 2-D at `axis` (default 1) and works over the flattened dims
    #: [axis:] (Softmax-1/11); its row describes the one-axis form of later opsets (default -1).
    flattens_before: int = 0

    @property
    def signature(self) -> tuple[str, ...]:
        return ("T",) * len(self.inputs) + tuple(p.egglog_kind for p in self.params)

    def one_axis_at(self, opset: int, params: Sequence[Any], dims: Sequence[Any] | None) -> bool:
        """Whether the op, with its static `params` on an input of `dims`, means its row's one-axis form at `opset`:
        always from `flattens_before` on; before, only when every dim after the axis is 1 (the flattened dims
        [axis:] are that axis). Encoding models only that form and lowering writes only it."""
        if opset >= self.flattens_before:
            return True
        axis = int(params[[p.name for p in self.params].index("axis")])
        return dims is not None and 0 <= axis < len(dims) and all(d == 1 for d in dims[axis + 1 :])


def _op(name: str, inputs: str = "X", *params: Param, **traits: Any) -> OpSpec:
    return OpSpec(name, tuple(inputs.split()) if inputs else (), tuple(params), **traits)


def _unary(name: str, *params: Param, **traits: Any) -> OpSpec:
    """An elementwise op of one tensor, its output shaped as its input."""
    return _op(name, "X", *params, elementwise=True, shape="same", **traits)


def _binary(name: str, **traits: Any) -> OpSpec:
    """An elementwise op of two broadcasting tensors."""
    return _op(name, "A B", elementwise=True, shape="broadcast", **traits)


def _reduce(name: str, since: int = 18, **traits: Any) -> OpSpec:
    """ReduceX(X, axes, keepdims): axes an attribute, an input from opset `since`."""
    axes = Param("axes", "ints", (), input=1, since=since, axes_of="input")
    return _op(name, "X", axes, Param("keepdims", "int", 1), shape="reduce", **traits)


def _known(name: str, **traits: Any) -> OpSpec:
    """An op the term language does not model: its traits only."""
    return OpSpec(name, term=False, **traits)


def _axis(name: str = "axis", default: Any = None, of: str = "input") -> Param:
    return Param(name, "int", default, axes_of=of)


_POOL_PARAMS = (
    Param("auto_pad", "str", "NOTSET"),
    Param("ceil_mode", "int", 0, since=10),
    Param("dilations", "ints", (), since=10),
    Param("kernel_shape", "ints"),
    Param("pads", "ints", ()),
    Param("strides", "ints", ()),
)
_CONV_PARAMS = (Param("auto_pad", "str", "NOTSET"), Param("dilations", "ints", ()), Param("group", "int", 1))
_GEOMETRY = (Param("kernel_shape", "ints", ()),)
_TAIL = (Param("pads", "ints", ()), Param("strides", "ints", ()))
_BOTH = ("conv", "matmul")

#: The rows: the term language's constructors in declaration order, then ops known by their traits only.
_ROWS = [
    _unary("Relu", flops=1, epilogue=_BOTH),
    _unary("Sigmoid", flops=8, epilogue=("conv",)),
    _unary("Tanh", flops=8, epilogue=("conv",)),
    _unary("Abs", idempotent=True, flops=1, numpy="absolute"),
    _unary("Neg", flops=1, numpy="negative"),
    _unary("Exp", flops=8, numpy="exp"),
    _unary("Log", flops=8, numpy="log"),
    _unary("Sqrt", flops=4, numpy="sqrt"),
    _unary("Erf", flops=8),
    _unary("Reciprocal", flops=4, numpy="reciprocal"),
    _unary("Floor", idempotent=True, flops=1),
    _unary("Ceil", idempotent=True, flops=1),
    _unary("Sign", idempotent=True, flops=1),
    _unary("Softplus", flops=8),
    _unary("Softsign"),
    _unary("Identity", moves="view", numpy="asarray", zero_preserving=True, follows=(0,)),
    _unary("Not", logic="bool", flops=1),
    _unary("Sin", flops=8),
    _unary("Cos", flops=8),
    _unary("Round", idempotent=True, flops=1),
    _unary("IsNaN"),
    _unary("HardSwish", flops=4),
    _binary("Add", arithmetic=True, flops=1, numpy="add"),
    _binary("Sub", arithmetic=True, flops=1, numpy="subtract"),
    _binary("Mul", arithmetic=True, flops=1, numpy="multiply"),
    _binary("Div", arithmetic=True, flops=1, numpy="own"),  # integer division truncates
    _binary("Pow", flops=8, numpy="power"),
    _binary("PRelu", flops=2),
    _binary("Equal", logic="compare", flops=1),
    _binary("Greater", logic="compare", flops=1),
    _binary("Less", logic="compare", flops=1),
    _binary("GreaterOrEqual", logic="compare"),
    _binary("LessOrEqual", logic="compare"),
    _binary("And", logic="bool", flops=1),
    _binary("Or", logic="bool", flops=1),
    _binary("Xor", logic="bool"),
    _binary("Mod", flops=4),
    _binary("Max", flops=1),  # Max/Min: the two-input form only
    _binary("Min", flops=1),
    _op("Where", "C X Y", elementwise=True, shape="broadcast", flops=1, follows=(1, 2)),
    _unary("LeakyRelu", Param("alpha", "float", 0.01), flops=2, epilogue=("conv",)),
    _unary("Elu", Param("alpha", "float", 1.0), flops=8),
    _unary("HardSigmoid", Param("alpha", "float", 0.2), Param("beta", "float", 0.5), flops=3, epilogue=("conv",)),
    _unary("Gelu", Param("approximate", "str", "none", since=20), flops=10, epilogue=("matmul",)),
    _unary(
        "Clip",
        Param("min", "float", -INF, input=1, since=11),
        Param("max", "float", INF, input=2, since=11),
        flops=2,
        epilogue=_BOTH,
    ),
    _unary("Cast", Param("to", "dtype"), moves="move", numpy="own", zero_preserving=True, follows=(0,)),
    # the identity at inference, removed by cleanup's dropout rule: not marked elementwise, so not in PARAM_UNARY
    _op("Dropout", "X", Param("ratio", "float", 0.5, input=1, since=12), shape="same"),
    _op("Softmax", "X", _axis(default=-1), shape="same", input_flops=5, flattens_before=13),
    _op("LogSoftmax", "X", _axis(default=-1), shape="same", input_flops=6, flattens_before=13),
    _op("Transpose", "X", Param("perm", "ints"), moves="move", numpy="own", follows=(0,)),
    _op(
        "Reshape",
        "X",
        Param("shape", "ints", input=1, since=5),
        Param("allowzero", "int", 0, since=14),
        moves="view",
        numpy="own",
        zero_preserving=True,
        follows=(0,),
    ),
    _op("Flatten", "X", _axis(default=1), moves="view", follows=(0,)),
    _op(
        "Squeeze",
        "X",
        Param("axes", "ints", (), input=1, since=13, axes_of="input"),
        moves="view",
        zero_preserving=True,
        follows=(0,),
    ),
    _op(
        "Unsqueeze",
        "X",
        Param("axes", "ints", input=1, since=13, axes_of="output"),
        moves="view",
        numpy="own",
        zero_preserving=True,
        follows=(0,),
    ),
    _op("Expand", "X", Param("shape", "ints", input=1, since=8), moves="move", zero_preserving=True, follows=(0,)),
    _op(
        "Pad",
        "X",
        Param("pads", "ints", input=1, since=11),
        Param("value", "float", 0.0, input=2, since=11),
        Param("mode", "str", "constant"),
        moves="move",
    ),
    _op("Gather", "X I", _axis(default=0), moves="move", indexed_read=True, follows=(0,)),
    _op("DepthToSpace", "X", Param("blocksize", "int"), Param("mode", "str", "DCR", since=11), moves="move"),
    _op("SpaceToDepth", "X", Param("blocksize", "int"), moves="move"),
    _op("OneHot", "I D V", _axis(default=-1, of="output")),  # depth and values stay tensors (their dtypes)
    _op(
        "Slice",
        "X",
        Param("starts", "ints", input=1, since=10),
        Param("ends", "ints", input=2, since=10),
        Param("axes", "ints", (), input=3, since=10),
        Param("steps", "ints", (), input=4, since=10),
        moves="move",
        zero_preserving=True,
        follows=(0,),
    ),
    _reduce("ReduceMean", input_flops=1, one_element="Identity", transpose_reduce=True),
    _reduce("ReduceSum", since=13, input_flops=1, one_element="Identity", transpose_reduce=True),
    _reduce("ReduceMax", input_flops=1, one_element="Identity", transpose_reduce=True),
    _reduce("ReduceMin", input_flops=1, one_element="Identity", transpose_reduce=True),
    _reduce("ReduceProd", input_flops=1, one_element="Identity", transpose_reduce=True),
    _reduce("ReduceL2", input_flops=2, transpose_reduce=True),
    _reduce("ReduceSumSquare", input_flops=2, one_element="Mul", transpose_reduce=True),
    _reduce("ReduceL1", input_flops=2, one_element="Abs"),
    _reduce("ReduceLogSum", input_flops=2, one_element="Log"),
    _reduce("ReduceLogSumExp", input_flops=9),
    *(
        _op(
            name,
            "X",
            _axis(default=0),
            Param("keepdims", "int", 1),
            Param("select_last_index", "int", 0, since=12),
            shape="reduce",
            input_flops=1,
        )
        for name in ("ArgMax", "ArgMin")
    ),
    _op("GlobalAveragePool", shape="global-pool", input_flops=1, nchw=True),
    _op("GlobalMaxPool", shape="global-pool", input_flops=1, nchw=True),
    _op(
        "MaxPool",
        "X",
        *_POOL_PARAMS,
        Param("storage_order", "int", 0, since=8),
        shape="window",
        input_flops=9,
        nchw=True,
    ),
    _op(
        "AveragePool",
        "X",
        *_POOL_PARAMS,
        Param("count_include_pad", "int", 0, since=7),
        shape="window",
        input_flops=9,
        nchw=True,
    ),
    _op("MatMul", "A B", shape="matmul", weight=("matmul", 1)),
    _op(
        "Gemm",
        "A B C",
        Param("alpha", "float", 1.0),
        Param("beta", "float", 1.0),
        Param("transA", "int", 0),
        Param("transB", "int", 0),
        optional=1,
        weight=("matmul", 1),
    ),
    _op("Conv", "X W B", *_CONV_PARAMS, *_GEOMETRY, *_TAIL, optional=1, shape="window", nchw=True, weight=("conv", 1)),
    _op(
        "ConvTranspose",
        "X W B",
        *_CONV_PARAMS,
        *_GEOMETRY,
        Param("output_padding", "ints", ()),
        Param("output_shape", "ints", ()),
        *_TAIL,
        optional=1,
        nchw=True,
        weight=("conv", 1),
    ),
    _op(
        "BatchNormalization",
        "X scale B mean var",
        Param("epsilon", "float", 1e-5),
        Param("momentum", "float", 0.9),
        shape="same",
        input_flops=2,
        nchw=True,
    ),
    _op("InstanceNormalization", "X scale B", Param("epsilon", "float", 1e-5), shape="same", input_flops=8, nchw=True),
    _op(
        "LayerNormalization",
        "X scale B",
        _axis(default=-1),
        Param("epsilon", "float", 1e-5),
        Param("stash_type", "int", 1),
        optional=1,
        shape="same",
        input_flops=8,
    ),
    _op("QuantizeLinear", "X scale zp", _axis(default=1), optional=1, shape="same", flops=3, never_constant=True),
    _op("DequantizeLinear", "X scale zp", _axis(default=1), optional=1, shape="same", flops=2, never_constant=True),
    # known by their traits only
    _known("Acos", shape="same"),
    _known("Acosh", shape="same"),
    _known("Asin", shape="same"),
    _known("Asinh", shape="same"),
    _known("Atan", shape="same"),
    _known("Atanh", shape="same"),
    _known("Cosh", shape="same"),
    _known("Sinh", shape="same"),
    _known("Tan", shape="same"),
    _known("BitwiseNot", shape="same"),
    _known("Celu", shape="same"),
    _known("IsInf", shape="same"),
    _known("Shrink", shape="same"),
    _known("ThresholdedRelu", shape="same"),
    _known("CastLike", shape="same", moves="move", follows=(0,)),
    _known("CumSum", shape="same", input_flops=1),
    _known("DynamicQuantizeLinear", shape="same", flops=5),
    _known("Hardmax", shape="same", input_flops=2, flattens_before=13),
    _known("LRN", shape="same"),
    _known("LpNormalization", shape="same", input_flops=4),
    _known("MeanVarianceNormalization", shape="same"),
    _known("Mish", shape="same", flops=16),
    _known("Selu", shape="same", flops=8),
    _known("BitShift", shape="broadcast"),
    _known("BitwiseAnd", shape="broadcast"),
    _known("BitwiseOr", shape="broadcast"),
    _known("BitwiseXor", shape="broadcast"),
    _known("Mean", shape="broadcast"),
    _known("Sum", shape="broadcast"),
    _known("ConvInteger", shape="window", nchw=True, weight=("conv", 1)),
    _known("QLinearConv", shape="window", nchw=True, weight=("conv", 3)),
    _known("LpPool", shape="window", input_flops=18, nchw=True),
    _known("MatMulInteger", shape="matmul", weight=("matmul", 1)),
    _known("QLinearMatMul", shape="matmul", weight=("matmul", 3)),
    _known("FusedMatMul", weight=("matmul", 1)),  # com.microsoft
    _known("GlobalLpPool", shape="global-pool"),
    _known("Concat", moves="move"),  # a list op of the term language (eqsat.engine.terms.LIST_OPS)
    _known("Split", moves="move"),  # likewise
    _known("GatherElements", moves="move", indexed_read=True),
    _known("GatherND", moves="move", indexed_read=True),
    _known("Resize", moves="move", nchw=True),
    _known("Tile", moves="move", follows=(0,)),
    _known("ConstantOfShape", moves="move"),
    _known("ReverseSequence", moves="move"),
    _known("ScatterElements", moves="move"),
    _known("ScatterND", moves="move"),
    _known("Shape", moves="move"),
    _known("Size", moves="move"),
    _known("GroupNormalization", input_flops=8),
    _known("RMSNormalization", input_flops=5),
    _known("SimplifiedLayerNormalization", input_flops=5),  # com.microsoft
    _known("TopK", input_flops=4),
    _known("RandomNormal", family="random"),
    _known("RandomUniform", family="random"),
    _known("RandomNormalLike", family="random"),
    _known("RandomUniformLike", family="random"),
    _known("Bernoulli", family="random"),
    _known("Multinomial", family="random"),
    _known("RNN", family="recurrent", state_inputs=(5,)),
    _known("GRU", family="recurrent", state_inputs=(5,)),
    _known("LSTM", family="recurrent", state_inputs=(5, 6)),
    _known("HannWindow", family="window-function"),
    _known("HammingWindow", family="window-function"),
    _known("BlackmanWindow", family="window-function"),
]

#: Every op eqsat knows, by name.
OP_TABLE: dict[str, OpSpec] = {spec.name: spec for spec in _ROWS}
#: The term language's ops (one constructor each, in declaration order); any other op stays `Opaque`.
OPS: dict[str, OpSpec] = {name: spec for name, spec in OP_TABLE.items() if spec.term}


def ops_where(**traits: Any) -> tuple[str, ...]:
    """The ops (table order) whose traits have these values, e.g. `ops_where(arithmetic=True)`."""
    return tuple(name for name, spec in OP_TABLE.items() if all(getattr(spec, k) == v for k, v in traits.items()))


def _terms(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(name for name in names if OPS.get(name) is not None)


#: Elementwise ops of one tensor without parameters, and of two.
UNARY = frozenset(n for n in OPS if OPS[n].elementwise and len(OPS[n].inputs) == 1 and not OPS[n].params)
BINARY = frozenset(n for n in OPS if OPS[n].elementwise and len(OPS[n].inputs) == 2)
#: Elementwise ops of one tensor with parameters (LeakyRelu, ..., Cast): layout-agnostic like UNARY.
PARAM_UNARY = tuple(n for n in OPS if OPS[n].elementwise and len(OPS[n].inputs) == 1 and OPS[n].params)
#: Reductions of the term language over a list of axes (ReduceSum, ..., ReduceLogSumExp), table order.
AXES_REDUCTIONS = tuple(n for n in OPS if OPS[n].shape == "reduce" and OPS[n].params[0].name == "axes")

SAME_SHAPE = frozenset(ops_where(shape="same"))
BROADCASTING = frozenset(ops_where(shape="broadcast"))
REDUCTIONS = frozenset(ops_where(shape="reduce"))
WINDOWED = frozenset(ops_where(shape="window"))
MATMULS = frozenset(ops_where(shape="matmul"))
GLOBAL_POOLS = frozenset(ops_where(shape="global-pool"))

COMPARISONS = _terms(ops_where(logic="compare"))
#: Binary ops of BOOL tensors (And, Or, Xor).
BOOL_BINARY = tuple(n for n in _terms(ops_where(logic="bool")) if n in BINARY)
ARITHMETIC = ops_where(arithmetic=True)
IDEMPOTENT = ops_where(idempotent=True)

VIEW_OPS = frozenset(ops_where(moves="view"))
MOVE_OPS = frozenset(ops_where(moves="move"))
ELEMENTWISE_FLOPS = {n: s.flops for n, s in OP_TABLE.items() if s.flops is not None}
REDUCE_FLOPS = {n: s.input_flops for n, s in OP_TABLE.items() if s.input_flops is not None}
LAYOUT_OPS = frozenset(ops_where(nchw=True))
INDEXED_READ_OPS = frozenset(ops_where(indexed_read=True))
CONV_WEIGHT = {n: s.weight[1] for n, s in OP_TABLE.items() if s.weight is not None and s.weight[0] == "conv"}
MATMUL_RHS = {n: s.weight[1] for n, s in OP_TABLE.items() if s.weight is not None and s.weight[0] == "matmul"}

#: Lowering's numpy folding: op -> numpy function name, and the ops its own code computes.
NUMPY_KERNELS = {n: s.numpy for n, s in OPS.items() if s.numpy not in (None, "own")}
NUMPY_OWN = frozenset(ops_where(numpy="own"))
#: Unary ops lowering folds with a numpy function: a constant stays constant through them.
CONST_FOLDABLE_UNARY = tuple(n for n in NUMPY_KERNELS if n in UNARY)
NEVER_CONSTANT_OPS = frozenset(ops_where(never_constant=True))

#: Ops that must never be merged by hash-consing (random or stateful): always opaque.
NONDETERMINISTIC = frozenset(ops_where(family="random"))
#: Recurrent ops and the input positions of their initial states.
STATE_INPUTS = {n: s.state_inputs for n, s in OP_TABLE.items() if s.family == "recurrent"}
#: HannWindow, HammingWindow, BlackmanWindow: input 0 is a window length.
WINDOW_FUNCTIONS = ops_where(family="window-function")
ZERO_PRESERVING = frozenset(ops_where(zero_preserving=True))
FOLLOW = {n: s.follows for n, s in OP_TABLE.items() if s.follows}

#: Reductions whose value over one element is that element, and those that are then a pointwise op of it.
ELEMENT_REDUCTIONS = ops_where(one_element="Identity")
POINTWISE_REDUCTIONS = {n: s.one_element for n, s in OPS.items() if s.one_element not in (None, "Identity")}
#: Reductions whose axes rewrites/layout.py remaps through a transpose.
TRANSPOSE_REDUCTIONS = ops_where(transpose_reduce=True)
#: Activations a conv / a MatMul or Gemm runs as its epilogue on some target (extract/targets/*.toml `fused`).
CONV_EPILOGUES = tuple(n for n, s in OPS.items() if "conv" in s.epilogue)
MATMUL_EPILOGUES = tuple(n for n, s in OPS.items() if "matmul" in s.epilogue)
