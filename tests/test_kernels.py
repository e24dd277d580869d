"""The command's `load_op` (eqsat.ui.kernels): onnx's reference kernel classes, one kernel module imported at a
time, exactly as onnx's own `load_op` chooses them."""

from __future__ import annotations

from typing import Callable

import pytest

from eqsat.ui import kernels


def _outcome(load_op: Callable[..., object], domain: str, op: str, version: int | None) -> object:
    try:
        return load_op(domain, op, version)
    except Exception as exc:  # noqa: BLE001 - the error is part of what must agree
        return type(exc), str(exc)


def test_the_commands_load_op_returns_onnxs_own_class_for_every_op_and_version() -> None:
    """eqsat.ui.kernels.load_op (the command's, importing one kernel module) gives what onnx's load_op gives:
    the same class, or the same error, for every operator of onnx's op list at every opset, with no version,
    for ops it has no kernel for (a function op, an unknown one) and for another domain."""
    from onnx.defs import onnx_opset_version
    from onnx.reference.ops import _op_list

    modules = kernels._kernel_modules()
    if modules is None:  # another onnx's layout: every call goes to onnx's own load_op
        pytest.skip("this onnx's op list is not laid out as eqsat.ui.kernels reads it")
    assert {"Add", "ArgMax", "Unsqueeze", "Reshape"} <= set(modules)  # the lazy path
    versions = [None, *range(1, onnx_opset_version() + 2)]
    ops = [*sorted(modules), "MeanVarianceNormalization", "NoSuchOp"]
    for domain in ("", "ai.onnx.ml"):
        for op in ops if domain == "" else ["Add"]:
            for version in versions:
                expected = _outcome(_op_list.load_op, domain, op, version)
                assert _outcome(kernels.load_op, domain, op, version) == expected, (op, version)
