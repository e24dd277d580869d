"""eqsat: an equality-saturation optimizer for ONNX graphs, built on egglog.

Table of contents:
- `optimize(model, target=...) -> Result`: the whole pipeline (eqsat.pipeline; Result in eqsat.result)
- `load`, `save`: ONNX in and out (eqsat.frontend.io)
- `eqsat.session.saturate(model) -> Session`: saturate once, `session.extract(target=...)` many times
- If/Loop/Scan bodies: optimized as graphs of their own, inside the same session (eqsat.subgraphs)
- `eqsat.check.verify.verify(original, optimized)`: differential check of two models, at two sizes of each
  dynamic dim (`eqsat.check.verify_inputs`), on values their consumers accept (`eqsat.check.verify_values`,
  `eqsat.check.verify_consumers`), within an element budget (`eqsat.check.verify_facts`); `eqsat.frontend.fix_shapes`:
  make
  chosen input dims static
- `eqsat.view.display`: pictures and HTML tables for notebooks; `eqsat.testing`: helpers for rule authors
(`eqsat.engine.saturate` and `eqsat.check.verify` are the modules, not functions.)
- errors: `EqsatError`, `BadInputError`, `VerificationError` (eqsat.errors)
"""

from __future__ import annotations

from pathlib import Path as _Path

from eqsat.errors import BadInputError, EqsatError, InternalError, VerificationError

__version__ = "0.1.0"

# In a source checkout the folders rewrites/ and extract/ sit beside eqsat/ (pyproject.toml's package-dir
# installs them as eqsat/rewrites and eqsat/extract); this lets eqsat.rewrites and eqsat.extract resolve
# there too. An installed eqsat has them inside and no pyproject.toml beside it, so this does nothing.
_CHECKOUT = _Path(__file__).resolve().parent.parent
if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "rewrites" / "__init__.py").is_file():
    __path__.append(str(_CHECKOUT))

__all__ = [
    "BadInputError",
    "EqsatError",
    "InternalError",
    "Result",
    "VerificationError",
    "__version__",
    "load",
    "optimize",
    "save",
]


def __getattr__(name: str):  # heavy modules (onnx, onnxruntime, egglog) load on first use only
    if name == "optimize":
        from eqsat.pipeline import optimize

        return optimize
    if name == "Result":
        from eqsat.result import Result

        return Result
    if name in ("load", "save"):
        from eqsat.frontend import io

        return getattr(io, name)
    raise AttributeError(f"module 'eqsat' has no attribute {name!r}")
