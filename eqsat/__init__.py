"""eqsat: an equality-saturation optimizer for ONNX graphs, built on egglog.

Table of contents:
- `optimize(model, target=...) -> Result`: the whole pipeline (eqsat.pipeline)
- `load`, `save`: ONNX in and out (eqsat.io)
- `verify`: differential check of two models (eqsat.verify)
- errors: `EqsatError`, `BadInputError`, `VerificationError` (eqsat.errors)
"""

from __future__ import annotations

from eqsat.errors import BadInputError, EqsatError, InternalError, VerificationError

__version__ = "0.1.0"

__all__ = ["BadInputError", "EqsatError", "InternalError", "Result", "VerificationError", "__version__",
           "load", "optimize", "save", "verify"]


def __getattr__(name: str):  # heavy modules (onnx, onnxruntime, egglog) load on first use only
    if name in ("optimize", "Result"):
        from eqsat import pipeline

        return getattr(pipeline, name)
    if name in ("load", "save"):
        from eqsat import io

        return getattr(io, name)
    if name == "verify":
        from eqsat.verify import verify

        return verify
    raise AttributeError(f"module 'eqsat' has no attribute {name!r}")
