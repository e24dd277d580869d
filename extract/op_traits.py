"""What the cost model knows of each op, apart from any target: bytes per element of each dtype, FLOPs per
element of elementwise ops and reductions, which ops only view or move data, which imply a layout, and
where the weight of a contraction sits. eqsat.extract.cost prices nodes with them."""

from __future__ import annotations

from typing import Mapping

#: Bytes per element of each ONNX DataType name.
DTYPE_BYTES: Mapping[str, float] = {
    "FLOAT": 4,
    "DOUBLE": 8,
    "FLOAT16": 2,
    "BFLOAT16": 2,
    "INT8": 1,
    "UINT8": 1,
    "INT16": 2,
    "UINT16": 2,
    "INT32": 4,
    "UINT32": 4,
    "INT64": 8,
    "UINT64": 8,
    "BOOL": 1,
    "STRING": 8,
    "COMPLEX64": 8,
    "COMPLEX128": 16,
    "FLOAT8E4M3FN": 1,
    "FLOAT8E4M3FNUZ": 1,
    "FLOAT8E5M2": 1,
    "FLOAT8E5M2FNUZ": 1,
    "INT4": 0.5,
    "UINT4": 0.5,
    "FLOAT4E2M1": 0.5,
}
DEFAULT_DTYPE = "FLOAT"
#: Elements assumed for a tensor whose shape is unknown and cannot be estimated from its inputs.
DEFAULT_NUMEL = 1024

#: Multiply-accumulates per conv output assumed when the weight shape is unknown (3x3 over 16 channels).
DEFAULT_KERNEL = 144.0
#: Ops that move no data (a new view of the same buffer).
VIEW_OPS = frozenset({"Reshape", "ReshapeDyn", "Squeeze", "Unsqueeze", "Flatten", "Identity"})
#: Ops that only move or convert data: bytes, no FLOPs. Transpose is one: it is never free.
MOVE_OPS = frozenset(
    {
        "Transpose",
        "Pad",
        "Concat",
        "Cast",
        "CastLike",
        "Slice",
        "Gather",
        "GatherElements",
        "GatherND",
        "Split",
        "Expand",
        "Tile",
        "Resize",
        "DepthToSpace",
        "SpaceToDepth",
        "ScatterND",
        "ScatterElements",
        "Shape",
        "Size",
        "ConstantOfShape",
        "ReverseSequence",
    }
)
#: FLOPs per output element of elementwise ops (unknown ops default to 1).
ELEMENTWISE_FLOPS: Mapping[str, float] = {
    "Add": 1,
    "Sub": 1,
    "Mul": 1,
    "Div": 1,
    "Relu": 1,
    "LeakyRelu": 2,
    "PRelu": 2,
    "Clip": 2,
    "Max": 1,
    "Min": 1,
    "Abs": 1,
    "Neg": 1,
    "Sqrt": 4,
    "Reciprocal": 4,
    "Pow": 8,
    "Exp": 8,
    "Log": 8,
    "Erf": 8,
    "Tanh": 8,
    "Sigmoid": 8,
    "HardSigmoid": 3,
    "HardSwish": 4,
    "Gelu": 10,
    "Elu": 8,
    "Selu": 8,
    "Softplus": 8,
    "Mish": 16,
    "Where": 1,
    "Equal": 1,
    "Less": 1,
    "Greater": 1,
    "Not": 1,
    "And": 1,
    "Or": 1,
    "Sin": 8,
    "Cos": 8,
    "Floor": 1,
    "Ceil": 1,
    "Round": 1,
    "Sign": 1,
    "Mod": 4,
    "QuantizeLinear": 3,
    "DequantizeLinear": 2,
    "DynamicQuantizeLinear": 5,
}
#: FLOPs per input element of reductions, pools and normalizations.
REDUCE_FLOPS: Mapping[str, float] = {
    "ReduceMean": 1,
    "ReduceSum": 1,
    "ReduceMax": 1,
    "ReduceMin": 1,
    "ReduceProd": 1,
    "ReduceL1": 2,
    "ReduceL2": 2,
    "ReduceSumSquare": 2,
    "ReduceLogSumExp": 9,
    "ReduceLogSum": 2,
    "ArgMax": 1,
    "ArgMin": 1,
    "GlobalAveragePool": 1,
    "GlobalMaxPool": 1,
    "AveragePool": 9,
    "MaxPool": 9,
    "LpPool": 18,
    "BatchNormalization": 2,
    "LayerNormalization": 8,
    "InstanceNormalization": 8,
    "GroupNormalization": 8,
    "RMSNormalization": 5,
    "SimplifiedLayerNormalization": 5,
    "LpNormalization": 4,
    "Softmax": 5,
    "LogSoftmax": 6,
    "Hardmax": 2,
    "CumSum": 1,
    "TopK": 4,
}
#: Ops that imply an NCHW memory layout in ONNX.
LAYOUT_OPS = frozenset(
    {
        "Conv",
        "ConvInteger",
        "QLinearConv",
        "ConvTranspose",
        "AveragePool",
        "MaxPool",
        "GlobalAveragePool",
        "GlobalMaxPool",
        "BatchNormalization",
        "InstanceNormalization",
        "Resize",
        "LpPool",
    }
)
#: Ops that read only the elements they index (data input first): as many bytes as they write.
INDEXED_READ_OPS = frozenset({"Gather", "GatherElements", "GatherND"})
#: Types of quantized tensors that a target's `[quant]` preference speaks of (int32 bias DQ nodes excepted).
QUANT_TYPES = frozenset({"UINT8", "INT8", "UINT16", "INT16", "UINT4", "INT4"})
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
#: What a Q/DQ outside a target's quantized types costs: as an unsupported op, or one conversion pass more.
QUANT_OTHER = ("unsupported", "convert")
#: Tensor-input index of the weight (conv) or right operand (matmul) of the contraction ops.
CONV_WEIGHT = {"Conv": 1, "ConvInteger": 1, "QLinearConv": 3, "ConvTranspose": 1}
MATMUL_RHS = {"MatMul": 1, "MatMulInteger": 1, "QLinearMatMul": 3, "Gemm": 1, "FusedMatMul": 1}
