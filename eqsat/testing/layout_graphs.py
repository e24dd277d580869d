"""Random graphs of the ops the layout rules know, for checks of all rules together: `random_graphs`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import onnx
import onnx.helper as oh

from eqsat.testing.cases import DrawnGraph
from eqsat.testing.draw import COMPARE_OPS, binary_const, draw_unary, transpose_node
from eqsat.testing.models import make_model, onnx_elem_type
from eqsat.testing.random_graphs import GraphCase
from eqsat.testing.strategies import float_arrays, hypothesis_strategies, inverse, perms, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def random_graphs(max_steps: int = 8, allow: Sequence[str] = ()) -> "SearchStrategy[GraphCase]":
    """Small float graphs mixing the ops the rules know (transposes and their inverses, unary and binary
    elementwise ops, constants incl. neutral ones, pads, cast round trips, Identity, Relu chains), with
    shared values and one or two outputs: rule interactions show up here."""
    st = hypothesis_strategies()

    @st.composite
    def build(draw: Callable) -> GraphCase:
        shape = draw(shapes(2, 4, 3))
        g = DrawnGraph()
        values: list[tuple[str, tuple[int, ...], tuple[int, ...] | None]] = []  # (name, shape, perm that made it)
        for name in ("a", "b")[: draw(st.integers(1, 2))]:
            values.append((g.input(name, draw(float_arrays(shape))), tuple(shape), None))
        for k in range(draw(st.integers(1, max_steps))):
            x, x_shape, made_by = values[draw(st.integers(0, len(values) - 1))] if draw(st.booleans()) else values[-1]
            rank, out = len(x_shape), f"v{k}"
            kind = draw(
                st.sampled_from(
                    (
                        "transpose",
                        "transpose",
                        "unary",
                        "binary",
                        "const",
                        "neutral",
                        "pad",
                        "cast",
                        "identity",
                        "relu2",
                    )
                )
            )
            if kind == "transpose":
                perm = inverse(made_by) if made_by is not None and draw(st.booleans()) else draw(perms(rank))
                g.nodes.append(transpose_node(x, out, perm))
                values.append((out, tuple(x_shape[i] for i in perm), tuple(perm)))
                continue
            if kind == "unary":
                draw_unary(draw, g, x, out, st)
                if g.nodes[-1].op_type in ("Cast", "IsNaN"):
                    g.nodes[-1] = oh.make_node("Relu", [x], [out])
            elif kind == "binary":
                same = [v for v in values if v[1] == x_shape]
                y = draw(st.sampled_from(same))[0]
                g.node(draw(st.sampled_from(("Add", "Sub", "Mul", "Max", "Min"))), [x, y], out)
            elif kind == "const":
                binary_const(draw, st, g, x, x_shape, out)
                if g.nodes[-1].op_type in COMPARE_OPS:
                    g.nodes[-1] = oh.make_node("Add", list(g.nodes[-1].input), [out])
            elif kind == "neutral":
                op, value = draw(st.sampled_from((("Mul", 1.0), ("Add", 0.0))))
                g.inits[f"{out}_k"] = np.full((1,) * draw(st.integers(0, rank)), value, np.float32)
                g.node(op, [x, f"{out}_k"], out)
            elif kind == "pad":
                g.inits[f"{out}_pads"] = np.array([draw(st.integers(0, 1)) for _ in range(2 * rank)], np.int64)
                g.node("Pad", [x, f"{out}_pads"], out)
                pads = g.inits[f"{out}_pads"]
                values.append((out, tuple(d + int(pads[i] + pads[i + rank]) for i, d in enumerate(x_shape)), None))
                continue
            elif kind == "cast":
                g.node("Cast", [x], f"{out}_c", to=onnx_elem_type(draw(st.sampled_from(("DOUBLE", "FLOAT16")))))
                g.node("Cast", [f"{out}_c"], out, to=onnx.TensorProto.FLOAT)
            elif kind == "identity":
                g.node("Identity", [x], out)
            else:
                g.node("Relu", [g.node("Relu", [x], f"{out}_r")], out)
            values.append((out, x_shape, None))
        outputs = [values[-1][0]]
        extra = values[draw(st.integers(0, len(values) - 1))][0]
        if draw(st.booleans()) and extra not in outputs and extra not in g.feeds:
            outputs.append(extra)
        model = make_model(g.nodes, g.inputs, outputs, g.inits)
        return GraphCase(model, g.feeds, tuple(allow))

    return build()


# --------------------------------------------------------------------------------------------------
# random ONNX graphs over the supported ops (fuzzing: tests/test_fuzz.py, benchmarks/fuzz.py)
