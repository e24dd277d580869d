"""Shared fixtures: the bundled models (tests/models only, never ../shared) and small models built here."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx.helper as oh
import onnx.numpy_helper as onh
import pytest

import eqsat
from eqsat.result import Result

MODELS_DIR = Path(__file__).parent / "models"
BUNDLED_MODELS = sorted(MODELS_DIR.glob("*.onnx"))

#: (name, TensorProto element type, shape) of a graph input or output; str or None dims are symbolic.
ValueSpec = tuple[str, int, Sequence[int | str | None]]
ModelBuilder = Callable[..., onnx.ModelProto]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test or fixture asking for `bundled_model` runs once per file in tests/models."""
    if "bundled_model" in metafunc.fixturenames:
        metafunc.parametrize(
            "bundled_model",
            [pytest.param(p, marks=pytest.mark.slow) for p in BUNDLED_MODELS],
            ids=[p.stem for p in BUNDLED_MODELS],
            scope="session",
        )  # whole models: slow


def build_model(
    nodes: Sequence[onnx.NodeProto],
    inputs: Sequence[ValueSpec],
    outputs: Sequence[ValueSpec],
    initializers: Mapping[str, np.ndarray] | None = None,
    *,
    opset: int = 17,
) -> onnx.ModelProto:
    """A model from onnx.helper parts, at an IR version onnxruntime accepts (the newest onnx writes newer)."""
    graph = oh.make_graph(
        list(nodes),
        "test",
        [oh.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in inputs],
        [oh.make_tensor_value_info(name, dtype, shape) for name, dtype, shape in outputs],
        initializer=[onh.from_array(np.asarray(array), name) for name, array in (initializers or {}).items()],
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", opset)], ir_version=10)


def custom_op_model() -> onnx.ModelProto:
    """y = Mystery(x) in a custom domain: a model no runtime can run (verification has nothing to compare)."""
    model = build_model(
        [oh.make_node("Mystery", ["x"], ["y"], domain="example.custom", name="mystery")],
        [("x", onnx.TensorProto.FLOAT, [2])],
        [("y", onnx.TensorProto.FLOAT, [2])],
    )
    model.opset_import.append(oh.make_opsetid("example.custom", 1))
    return model


@pytest.fixture(scope="session")
def models_dir() -> Path:
    return MODELS_DIR


@pytest.fixture(scope="session")
def optimized_bundled(bundled_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """`eqsat.optimize(model, output=...)` on one bundled model, once per session: (output file, result).
    Treat both as read-only."""
    out = tmp_path_factory.mktemp("optimized") / bundled_model.name
    return out, eqsat.optimize(bundled_model, output=out)


@pytest.fixture
def make_model() -> ModelBuilder:
    """`build_model` as a fixture: `make_model(nodes, inputs, outputs, initializers, opset=17)`."""
    return build_model


@pytest.fixture
def model_file(tmp_path: Path) -> Callable[..., Path]:
    """Build a model like `make_model` and save it, unchecked, as tmp_path/<name>; returns the path.

    `model_file(nodes, inputs, outputs, initializers=None, *, name="model.onnx", opset=17)`.
    """

    def save(*args, name: str = "model.onnx", **kwargs) -> Path:
        path = tmp_path / name
        path.write_bytes(build_model(*args, **kwargs).SerializeToString())
        return path

    return save
