"""Recurrent ops' initial states that are provably zero are dropped: ONNX reads an absent `initial_h`
(RNN, GRU, LSTM) or `initial_c` (LSTM) as zeros.

Exporters build the zero state at run time, sized by the batch: `ConstantOfShape(Concat(d, Gather(Shape(x),
0), h))`, often sliced per layer. A state is zero when it is computed, through Slice, Reshape, Expand,
Identity, Squeeze, Unsqueeze or Cast, from a ConstantOfShape whose value is 0 (or absent: 0 by default);
the chain that built it then dies and is removed by the caller (the folder's dead-node pass).
"""

from __future__ import annotations

import onnx_ir as ir

from eqsat.ops import STATE_INPUTS, ZERO_PRESERVING

# STATE_INPUTS: recurrent ops and the input positions of their initial states; ZERO_PRESERVING: ops whose
# output is zero wherever their first input is (shape and layout only). Both from the op table.


def drop_zero_states(graph: ir.Graph) -> bool:
    """Detach every provably zero initial state of graph's recurrent nodes; True if any was."""
    changed = False
    for node in graph:
        if node.domain not in ("", "ai.onnx"):
            continue
        for k in STATE_INPUTS.get(node.op_type, ()):
            if k < len(node.inputs) and _is_zero(node.inputs[k]):
                node.replace_input_with(k, None)
                changed = True
    return changed


def _is_zero(value: ir.Value | None) -> bool:
    """True when `value` is all zeros by construction (a walk up one chain: no recursion)."""
    while value is not None:
        if value.const_value is not None:
            array = value.const_value.numpy()
            return array.size > 0 and not array.any()
        producer = value.producer()
        if producer is None or producer.domain not in ("", "ai.onnx"):
            return False
        if producer.op_type == "ConstantOfShape":
            fill = producer.attributes.get("value")
            return fill is None or not fill.value.numpy().any()
        if producer.op_type not in ZERO_PRESERVING:
            return False
        value = producer.inputs[0] if producer.inputs else None
    return False
