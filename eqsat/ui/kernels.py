"""onnx's reference kernels loaded one operator at a time, for the command (eqsat.ui.startup).

onnxscript's folder evaluates a node with the class `onnx.reference.ops.load_op(domain, op, version)` returns.
That function lives in `onnx.reference.ops._op_list`, which imports every kernel module (~220) to build its
registry: ~22 ms of a command's fold phase, where the folder evaluates a handful of ops (rapidocr: Cast and
Reshape). `load_op` here returns the very class onnx's would: the registry entry of the one
operator, built by onnx's own `build_registered_operators_any_domain` from the classes `_op_list` imports
for it (read from its import lines), chosen by the same version rule. Every other call (another domain, a
custom or expanded op, an op without kernel, no kernel for the version) goes to onnx's own `load_op`, as
does everything when `_op_list`'s imports cannot be read as expected (they must name exactly its `__all__`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
from typing import Any

#: `from onnx.reference.ops.op_x import A, B` or `... import (\n A,\n B,\n)`: the module (not a private one:
#: `_helpers`) and the names.
_IMPORT = re.compile(r"^from onnx\.reference\.ops\.([^_\W]\w*) import (\([^)]*\)|[^\n]*)", re.M)
_ALL = re.compile(r"^__all__ = \[([^\]]*)\]", re.M)


def load_op(
    domain: str,
    op_type: str,
    version: int | None = None,
    custom: Any = None,
    node: Any = None,
    input_types: Any = None,
    expand: bool = False,
    evaluator_cls: type | None = None,
) -> Any:
    """`onnx.reference.ops.load_op`, importing only the kernel module of `op_type` where it can."""
    modules = _kernel_modules() if domain == "" and custom is None and not expand else None
    names = modules.get(op_type) if modules is not None else None
    if names:
        from onnx.defs import onnx_opset_version
        from onnx.reference.ops._helpers import build_registered_operators_any_domain

        classes = {
            name: getattr(importlib.import_module(f"onnx.reference.ops.{module}"), name) for name, module in names
        }
        impl = build_registered_operators_any_domain(classes)[op_type]
        if len(impl) == 1:
            return impl[None]
        wanted = onnx_opset_version() if version is None else version
        versions = [v for v in impl if v is not None and v <= wanted]
        if versions:
            return impl[max(versions)]
    full = importlib.import_module("onnx.reference.ops._op_list")
    return full.load_op(domain, op_type, version, custom, node, input_types, expand, evaluator_cls)


@functools.cache
def _kernel_modules() -> dict[str, list[tuple[str, str]]] | None:
    """Per operator, the (class name, kernel module) pairs `_op_list` imports for it (ArgMax: ArgMax_1 and
    ArgMax_12 from op_argmax); None when its source is not laid out as expected."""
    try:
        from onnx.reference.ops._helpers import _split_class_name, build_registered_operators_any_domain  # noqa: F401
    except ImportError:  # another onnx: its own load_op
        return None
    spec = importlib.util.find_spec("onnx.reference.ops._op_list")
    if spec is None or spec.origin is None:
        return None
    with open(spec.origin, encoding="utf-8") as file:
        source = file.read()
    listed = _ALL.search(source)
    if listed is None:
        return None
    pairs = [(name, m[1]) for m in _IMPORT.finditer(source) for name in re.findall(r"\w+", m[2])]
    if sorted(name for name, _ in pairs) != sorted(set(re.findall(r'"(\w+)"', listed[1])) - {"load_op"}):
        return None
    modules: dict[str, list[tuple[str, str]]] = {}
    for name, module in pairs:
        modules.setdefault(_split_class_name(name)[0], []).append((name, module))
    return modules
