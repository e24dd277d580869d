"""Hypothesis properties of the linear rules (rewrites/linear.py): for each rule, a strategy of small graphs
where its guard holds (`RuleCase`), checked by tests/test_rules_linear.py and `eqsat check-rules`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from eqsat.ops import MATMUL_EPILOGUES as LINEAR_EPILOGUES
from eqsat.testing.cases import DrawnGraph, RuleCase, rule_case
from eqsat.testing.draw import CONST_LAST, add_activation, draw_constant, float_input
from eqsat.testing.models import numpy_dtype
from eqsat.testing.strategies import float_arrays, hypothesis_strategies, shapes

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy


def _linear_dtype_and_dims(draw: Callable, count: int) -> tuple[str, Any, tuple[int, ...]]:
    """A float dtype (FLOAT twice as likely), its numpy type and `count` dims of a product; float16 draws
    larger dims, so that outputs hold several spread values (see draw_conv)."""
    st = hypothesis_strategies()
    dtype = draw(st.sampled_from(("FLOAT", "FLOAT", "FLOAT16", "DOUBLE")))
    low = 3 if dtype == "FLOAT16" else 1
    return dtype, numpy_dtype(dtype), tuple(draw(st.integers(low, low + 3)) for _ in range(count))


def _linear(rule: str) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        dtype, dt, (m, k, n) = _linear_dtype_and_dims(draw, 3)
        g = DrawnGraph()
        also: tuple[str, ...] = CONST_LAST
        if rule == "matmul-scale-fold":
            lead = tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2))))
            a = float_input(draw, g, "a", (*lead, m, k), dtype)
        elif rule in ("gemm-bias-fold", "gemm-scale-fold"):
            trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
            a = float_input(draw, g, "a", (k, m) if trans_a else (m, k), dtype)
            g.inits["b"] = np.asarray(draw(float_arrays((n, k) if trans_b else (k, n), dt, -1.0, 1.0)))
            inputs = [a, "b"]
            if draw(st.booleans()):
                c_shape = draw(st.sampled_from(((n,), (1, n), (m, n), (m, 1), ())))
                g.inits["cc"] = draw_constant(draw, c_shape, dtype)
                inputs.append("cc")
            g.node(
                "Gemm",
                inputs,
                "lin",
                alpha=draw(st.sampled_from((1.0, 0.5))),
                beta=draw(st.sampled_from((1.0, 2.0))),
                transA=int(trans_a),
                transB=int(trans_b),
            )
        else:
            a = float_input(draw, g, "a", (m, k), dtype)
        if "Gemm" not in [nd.op_type for nd in g.nodes]:
            b = np.asarray(draw(float_arrays((k, n), dt, -1.0, 1.0)))
            if rule == "matmul-add-to-gemm" and draw(st.booleans()):  # weights a graph input: Gemm takes any B
                g.input("b", b)
            else:
                g.inits["b"] = b
            g.node("MatMul", [a, "b"], "lin")
        out_rank = len(g.feeds[a].shape) if rule == "matmul-scale-fold" else 2
        if rule in ("matmul-add-to-gemm", "gemm-bias-fold"):
            c_shape = draw(st.sampled_from(((n,), (1, n), (m, n), (m, 1), (), (1,))))
            g.inits["c"] = draw_constant(draw, c_shape, dtype)
            op = draw(st.sampled_from(("Add", "Sub")))
            g.node(op, ["c", "lin"] if op == "Add" and draw(st.booleans()) else ["lin", "c"], "y")
        else:
            shape = draw(st.sampled_from(((n,), (1,) * (out_rank - 1) + (n,), (), (1,))))
            g.inits["s"] = draw_constant(draw, shape, dtype)
            g.node("Mul", ["s", "lin"] if draw(st.booleans()) else ["lin", "s"], "y")
        return g.case(rule, ["y"], also=also, opset=draw(st.sampled_from((13, 17))))

    return strategy


@rule_case
def _const_minus_matmul(draw: Callable, st: Any) -> RuleCase:
    """c - MatMul(A, B) for A 1-D to 3-D, constant B [K, N] and c of shape [N], [1] or a scalar."""
    dtype, dt, (k, n) = _linear_dtype_and_dims(draw, 2)
    lead = draw(shapes(0, 2, 3))
    g = DrawnGraph()
    a = float_input(draw, g, "a", (*lead, k), dtype)
    g.inits["b"] = np.asarray(draw(float_arrays((k, n), dt, -1.0, 1.0)))
    g.inits["c"] = draw_constant(draw, draw(st.sampled_from(((n,), (1,), ()))), dtype)
    g.node("Sub", ["c", g.node("MatMul", [a, "b"], "lin")], "y")
    return g.case("const-minus-matmul", ["y"], opset=draw(st.sampled_from((13, 17))))


@rule_case
def _const_minus_linear(draw: Callable, st: Any) -> RuleCase:
    """c - MatMul(A, B) (constant B) or c - Gemm(A, B, [C], alpha, beta, transA, transB): alphas and betas of
    both signs, so that a sign error in the rewrite changes the values."""
    dtype, dt, (m, k, n) = _linear_dtype_and_dims(draw, 3)
    g = DrawnGraph()
    if draw(st.booleans()):
        a = float_input(draw, g, "a", (m, k), dtype)
        g.inits["b"] = np.asarray(draw(float_arrays((k, n), dt, -1.0, 1.0)))
        g.node("MatMul", [a, "b"], "lin")
    else:
        trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
        a = float_input(draw, g, "a", (k, m) if trans_a else (m, k), dtype)
        b_shape = (n, k) if trans_b else (k, n)
        if draw(st.booleans()):
            g.inits["b"] = np.asarray(draw(float_arrays(b_shape, dt, -1.0, 1.0)))
            b = "b"
        else:  # c - Gemm needs no constant B
            b = float_input(draw, g, "b", b_shape, dtype)
        inputs = [a, b]
        if draw(st.booleans()):
            g.inits["cc"] = draw_constant(draw, draw(st.sampled_from(((n,), (1, n), (m, n), (m, 1), ()))), dtype)
            inputs.append("cc")
        g.node(
            "Gemm",
            inputs,
            "lin",
            alpha=draw(st.sampled_from((1.0, 0.5, -2.0))),
            beta=draw(st.sampled_from((1.0, 2.0, -0.5))),
            transA=int(trans_a),
            transB=int(trans_b),
        )
    g.inits["c"] = draw_constant(draw, draw(st.sampled_from(((n,), (1, n), (m, n), (m, 1), (), (1,)))), dtype)
    g.node("Sub", ["c", "lin"], "y")
    return g.case("const-minus-linear", ["y"], opset=draw(st.sampled_from((13, 17))))


def _linear_merge(rule: str) -> Callable[[], Any]:
    """2 or 3 Gemms over one A with the same alpha, beta, transA, transB, constant B of their own widths, and
    biases all absent or all per column ([N_k]), each output through a Relu or not (gemm-merge); for
    matmul-merge-epilogue, Gemms or MatMuls (with per-column biases or not) each followed by the same
    activation (Gelu at opset 20)."""

    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        dtype, dt, (m, k) = _linear_dtype_and_dims(draw, 2)
        matmul = rule == "matmul-merge-epilogue" and draw(st.booleans())
        trans_a = not matmul and draw(st.booleans())
        trans_b = not matmul and draw(st.booleans())
        bias = draw(st.booleans())
        attrs = {
            "alpha": draw(st.sampled_from((1.0, 0.5, -2.0))),
            "beta": draw(st.sampled_from((1.0, 2.0))),
            "transA": int(trans_a),
            "transB": int(trans_b),
        }
        act = draw(st.sampled_from(LINEAR_EPILOGUES)) if rule == "matmul-merge-epilogue" else None
        g = DrawnGraph()
        a = float_input(draw, g, "a", (k, m) if trans_a else (m, k), dtype)
        outs = []
        for i in range(draw(st.integers(2, 3))):
            n = draw(st.integers(2, 4))  # B of 2 elements at least (one element is a Scalar, not a Const)
            g.inits[f"b{i}"] = np.asarray(draw(float_arrays((n, k) if trans_b else (k, n), dt, -1.0, 1.0)) + dt.type(i))
            if bias:
                g.inits[f"c{i}"] = np.asarray(draw(float_arrays((n,), dt, -1.0, 1.0)))
            if matmul:
                y = g.node("MatMul", [a, f"b{i}"], f"y{i}")
                if bias:
                    y = g.node("Add", [y, f"c{i}"], f"z{i}")
            else:
                y = g.node("Gemm", [a, f"b{i}", *([f"c{i}"] if bias else [])], f"y{i}", **attrs)
            if act:
                outs.append(add_activation(draw, g, act, y, f"o{i}", dtype))
            else:
                outs.append(g.node("Relu", [y], f"o{i}") if draw(st.booleans()) else y)
        also = ()
        if rule == "matmul-merge-epilogue":
            also = (("matmul-bias-merge" if bias else "matmul-merge") if matmul else "gemm-merge",)
        opset = 20 if act == "Gelu" else draw(st.sampled_from((13, 17)))
        return g.case(rule, outs, also=also, opset=opset)

    return strategy


def _matmul_merge(rule: str) -> Callable[[], Any]:
    @rule_case
    def strategy(draw: Callable, st: Any) -> RuleCase:
        n = draw(st.integers(2, 3))
        lead = draw(shapes(1, 2, 3))
        k = draw(st.integers(1, 4))
        g = DrawnGraph()
        x = g.input("x", draw(float_arrays(lead + (k,), low=-2, high=2)))
        outs = []
        for i in range(n):
            cols = draw(st.integers(2, 4))  # single elements are Scalars, not Const weights
            g.inits[f"w{i}"] = draw(float_arrays((k, cols), low=-1, high=1)) + np.float32(i)  # distinct
            y = g.node("MatMul", [x, f"w{i}"], f"y{i}")
            if rule == "matmul-bias-merge":
                g.inits[f"b{i}"] = draw(float_arrays((cols,), low=-1, high=1))
                y = g.node("Add", [y, f"b{i}"], f"z{i}")
            outs.append(g.node("Relu", [y], f"o{i}"))
        return g.case(rule, outs)

    return strategy


#: rule name -> strategy of graphs where the rule fires; one case in four is also checked with symbolic dims.
@rule_case
def _gemm_transpose_fold(draw: Callable, st: Any) -> RuleCase:
    dtype, dt, (m, k, n) = _linear_dtype_and_dims(draw, 3)
    trans_a, trans_b = draw(st.booleans()), draw(st.booleans())
    fold_a, fold_b = draw(st.sampled_from(((True, False), (False, True), (True, True))))
    g = DrawnGraph()
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    a = float_input(draw, g, "a", a_shape[::-1] if fold_a else a_shape, dtype)
    if fold_a:
        a = g.node("Transpose", [a], "at", perm=[1, 0])
    b = float_input(draw, g, "b", b_shape[::-1] if fold_b else b_shape, dtype)  # a run-time B (not folded at load)
    if fold_b:
        b = g.node("Transpose", [b], "bt", perm=[1, 0])
    inputs = [a, b]
    if draw(st.booleans()):
        g.inits["c"] = draw_constant(draw, draw(st.sampled_from(((n,), (m, n), ()))), dtype)
        inputs.append("c")
    g.node("Gemm", inputs, "y", alpha=draw(st.sampled_from((1.0, 0.5))), transA=int(trans_a), transB=int(trans_b))
    return g.case("gemm-transpose-fold", ["y"], opset=draw(st.sampled_from((11, 13, 17))))


@rule_case
def _matmul_bias_chain(draw: Callable, st: Any) -> RuleCase:
    """(MatMul(A, B) +/- c1) +/- c2 for A of rank 2..4, B constant or not, c1 and c2 of one shape or c2
    single-element."""
    dtype, dt, (m, k, n) = _linear_dtype_and_dims(draw, 3)
    g = DrawnGraph()
    lead = tuple(draw(st.integers(1, 2)) for _ in range(draw(st.integers(0, 2))))
    a = float_input(draw, g, "a", (*lead, m, k), dtype)
    if draw(st.booleans()):
        g.inits["b"] = np.asarray(draw(float_arrays((k, n), dt, -1.0, 1.0)))
        b = "b"
    else:
        b = float_input(draw, g, "b", (k, n), dtype)
    y = g.node("MatMul", [a, b], "mm")
    bias = draw(st.sampled_from(((n,), (1, n), (m, n), (m, 1), (), (1,))))
    scalar = draw(st.sampled_from(((), (1,), (1, 1))))
    shapes_ = draw(st.sampled_from(((bias, bias), (bias, scalar))))
    for i, shape in enumerate(shapes_):
        g.inits[f"c{i}"] = draw_constant(draw, shape, dtype)
        y = g.node(draw(st.sampled_from(("Add", "Sub"))), [y, f"c{i}"], f"z{i}")
    return g.case("matmul-bias-chain", [y], opset=draw(st.sampled_from((13, 17))))


@rule_case
def _matmul_unflatten(draw: Callable, st: Any) -> RuleCase:
    """x [d0, .., K] (rank 3 or 4) -> Reshape [-1, K] (or [P, K]) -> MatMul W [K, N] -> Reshape [d0, .., N] (or
    with -1 first): the weights a constant or a graph input."""
    lead = draw(shapes(2, 3, 3))
    k, n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    size = int(np.prod(lead))
    g = DrawnGraph()
    x = g.input("x", draw(float_arrays((*lead, k), low=-2.0, high=2.0)))
    g.inits["flat"] = np.array(draw(st.sampled_from(([-1, k], [size, k]))), np.int64)
    g.inits["back"] = np.array(draw(st.sampled_from(([*lead, n], [-1, *lead[1:], n]))), np.int64)
    w = draw(float_arrays((k, n), low=-2.0, high=2.0))
    if draw(st.booleans()):
        g.inits["w"] = w
    else:
        g.input("w", w)
    g.node("Reshape", [x, "flat"], "r")
    g.node("MatMul", ["r", "w"], "m")
    return g.case("matmul-unflatten", [g.node("Reshape", ["m", "back"], "y")])


PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "matmul-bias-chain": _matmul_bias_chain,
    "gemm-transpose-fold": _gemm_transpose_fold,
    "matmul-add-to-gemm": _linear("matmul-add-to-gemm"),
    "gemm-bias-fold": _linear("gemm-bias-fold"),
    "matmul-scale-fold": _linear("matmul-scale-fold"),
    "gemm-scale-fold": _linear("gemm-scale-fold"),
    "const-minus-linear": _const_minus_linear,
    "const-minus-matmul": _const_minus_matmul,
    "gemm-merge": _linear_merge("gemm-merge"),
    "matmul-merge-epilogue": _linear_merge("matmul-merge-epilogue"),
    "matmul-unflatten": _matmul_unflatten,
}
#: Properties checked with static shapes only.
STATIC_PROPERTIES: dict[str, Callable[[], "SearchStrategy[RuleCase]"]] = {
    "matmul-merge": _matmul_merge("matmul-merge"),
    "matmul-bias-merge": _matmul_merge("matmul-bias-merge"),
}
