"""What the cost model knows of each op, apart from any target: bytes per element of each dtype, FLOPs per
element of elementwise ops and reductions, which ops only view or move data, which imply a layout, and
where the weight of a contraction sits (all of them derived from the op table, eqsat.ops). eqsat.extract.cost
prices nodes with them."""

from __future__ import annotations

from typing import Mapping

from eqsat import ops
from eqsat.engine.terms import ONNX_NAMES

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
#: Ops that move no data (a new view of the same buffer), with the constructors lowered to one (ReshapeDyn).
VIEW_OPS = ops.VIEW_OPS | {name for name, op in ONNX_NAMES.items() if op in ops.VIEW_OPS}
#: Ops that only move or convert data: bytes, no FLOPs. Transpose is one: it is never free.
MOVE_OPS = ops.MOVE_OPS
#: FLOPs per output element of elementwise ops (unknown ops default to 1).
ELEMENTWISE_FLOPS: Mapping[str, float] = ops.ELEMENTWISE_FLOPS
#: FLOPs per input element of reductions, pools and normalizations.
REDUCE_FLOPS: Mapping[str, float] = ops.REDUCE_FLOPS
#: Ops that imply an NCHW memory layout in ONNX.
LAYOUT_OPS = ops.LAYOUT_OPS
#: Ops that read only the elements they index (data input first): as many bytes as they write.
INDEXED_READ_OPS = ops.INDEXED_READ_OPS
#: Types of quantized tensors that a target's `[quant]` preference speaks of (int32 bias DQ nodes excepted).
QUANT_TYPES = frozenset({"UINT8", "INT8", "UINT16", "INT16", "UINT4", "INT4"})
QDQ_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
#: What a Q/DQ outside a target's quantized types costs: as an unsupported op, or one conversion pass more.
QUANT_OTHER = ("unsupported", "convert")
#: Tensor-input index of the weight (conv) or right operand (matmul) of the contraction ops.
CONV_WEIGHT = ops.CONV_WEIGHT
MATMUL_RHS = ops.MATMUL_RHS
