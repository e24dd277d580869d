"""The tie-break of the roofline model: among graphs of equal cost, fewer nodes win, then fewer bytes read.

Every kernel (a node that is neither plumbing nor in a constant-only class) adds to its roofline cost

    tie_break x (1 + sum over the tensors it reads of INPUT_SHARE x (1 + log2(1 + bytes) / 64))

with a tensor counted twice when it is a constant computed at lowering (a new initializer: read by the
kernel and written into the model, so Div(x, c) beats Mul(x, Reciprocal(c)) where the two cost the same).

- Nodes first: an input weighs 1/4 to 1/2 of a node (1/2 at 2^64 bytes), so two inputs never outweigh a node:
  MatMul + Add (two nodes, four inputs) loses to Gemm (one node, three inputs).
- Then bytes read: with the nodes equal, fewer inputs win (an explicit zero point 0 against the absent default
  one, which reads the same 0), then smaller ones (a per-channel constant against a scalar), on a log scale.
  Each input counts, not only its bytes, because the extractors cannot see one byte: the ILP's tolerance is
  about 1e-7 of the largest node cost, and a zero point's byte beside a 100 MB node's traffic is 1e-8 of it.
- Magnitude: `tie_break` is seconds per node, at most MAX_TIE_FRACTION of the target's launch (checked at
  load): the cheapest real kernel costs at least a launch, so the ties of two graphs outweigh one kernel
  only when the graphs differ in about a thousand nodes. A real cost difference below that (a few bytes
  of traffic, FUSED_EPSILON) can be outweighed: such graphs are taken as equal.
- Deterministic: a function of the node and its classes' facts; the extractors break what is left by the
  lowest node id.
"""

from __future__ import annotations

import math
from typing import Iterable

#: Default `tie_break` (seconds per node) of a target whose TOML does not set one, as FUSED_EPSILON
#: (one instruction's worth); lowered to MAX_TIE_FRACTION x launch for a target with shorter launches.
DEFAULT_TIE_BREAK = 1e-9

#: `tie_break` may not exceed this fraction of the target's launch (the cost of the cheapest real kernel).
MAX_TIE_FRACTION = 1e-3

#: Weight of one input read against a node (at one byte; 2x INPUT_SHARE at 2^64 bytes).
INPUT_SHARE = 0.25


def default_tie_break(launch: float) -> float:
    """The tie-break of a target that does not set one: DEFAULT_TIE_BREAK, at most MAX_TIE_FRACTION x launch."""
    return min(DEFAULT_TIE_BREAK, MAX_TIE_FRACTION * launch)


def check_tie_break(tie_break: float, launch: float) -> None:
    """Raise `ValueError` unless 0 <= tie_break <= MAX_TIE_FRACTION x launch."""
    if not (0 <= tie_break <= MAX_TIE_FRACTION * launch):
        raise ValueError(
            f"tie_break must be a number between 0 and {MAX_TIE_FRACTION} x launch ({MAX_TIE_FRACTION * launch:g} s),"
            f" got {tie_break}: larger, ties would outweigh real kernel costs"
        )


def input_weight(nbytes: float, computed: bool) -> float:
    """The weight (in nodes) of one tensor a kernel reads: INPUT_SHARE x (1 + log2(1 + bytes) / 64), twice
    for a constant computed at lowering."""
    weight = INPUT_SHARE * (1.0 + math.log2(1.0 + max(nbytes, 0.0)) / 64.0)
    return 2.0 * weight if computed else weight


def tie_cost(tie_break: float, inputs: Iterable[tuple[float, bool]]) -> float:
    """The tie-break of one kernel reading `inputs` ((bytes, computed at lowering) per tensor)."""
    if not tie_break:
        return 0.0
    return tie_break * (1.0 + sum([input_weight(nbytes, computed) for nbytes, computed in inputs]))
