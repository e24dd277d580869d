"""The `eqsat` command's start-up: import only what the run uses. Only for the command, a process that runs
no other code (eqsat.ui.cli.run_command); library users import as usual. Every step falls back to the normal
import when a package's layout is not the one expected."""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import types
from typing import Iterable, Sequence

#: Modules imported by a library at start-up but used only on rare paths, each with the package whose folder
#: holds it. sympy (~0.2 s) serves onnx_ir's symbolic-dim arithmetic only; its shape module reads sympy at
#: import, so it waits too. onnx's `__init__` imports its model composer, utilities and test-data generator
#: (with tarfile and subprocess), and reads its version through importlib.metadata, whose email parsing
#: imports socket (for message ids; ~4 ms of enum building), csv, and through protobuf calendar; onnx's
#: external-data helper imports uuid; numpy imports pickle and ctypes for its pickling and ctypes
#: interfaces: none of them serves a run (~10 ms together).
DEFERRED = (
    ("sympy", None),
    ("onnx_ir._symbolic_shapes", "onnx_ir"),
    ("onnx.compose", "onnx"),
    ("onnx.utils", "onnx"),
    ("onnx.gen_proto", "onnx"),
    ("socket", None),
    ("csv", None),
    ("calendar", None),
    ("uuid", None),
    ("pickle", None),
    ("ctypes", None),
)
#: Packages whose submodules are imported without the package's own `__init__` until one of its other
#: attributes is read. eqsat uses only onnxscript's constant folder (eqsat.frontend.fold imports
#: `onnxscript.optimizer._constant_folding`); the two `__init__`s would add its script converter, opsets and
#: rewriter (~30 ms of a ~0.45 s run).
OPENED = (("onnxscript", None), ("onnxscript.optimizer", "onnxscript"))
#: Submodules deferred where their importer reads them through their package (`import onnx.reference.ops`,
#: then `onnx.reference.ops.load_op`): a finder hands the import system a stand-in, which it binds to the
#: package as any submodule. onnx's reference kernels (~20 ms) serve onnxscript's folder only for a node it
#: evaluates (none in 5 of the 16 shared models); so does `onnx.reference` itself, whose `__init__` (its
#: whole-model evaluator, and `op_run`, which reads every operator schema: ~15 ms) the kernels' import
#: would otherwise run first: its stand-in imports its submodules without it. The `onnx.reference.ops` stand-in
#: holds a `load_op` of its own (eqsat.ui.kernels): it imports the kernel of the op evaluated, not all of them.
DEFERRED_SUBMODULES = ("onnx.reference", "onnx.reference.ops")


def without_onnxruntime_telemetry() -> None:
    """onnxruntime's telemetry off (ORT_DISABLE_TELEMETRY=1), unless the environment says otherwise. onnxruntime
    1.32 on Linux starts an event logger at import that opens, writes and fsyncs an SQLite database under
    ~/.cache/Microsoft/DeveloperTools and logs each session made: 2-3.6 ms more import (holding the GIL) and
    ~2 ms more for the first session (medians of 21 processes each, interleaved, shared machine). Nothing
    verification computes depends on it."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")


def single_threaded_blas() -> None:
    """numpy's OpenBLAS on one thread (OPENBLAS_NUM_THREADS=1), unless the environment says otherwise; called
    before numpy is imported. Its worker thread, started with numpy, spins waiting for work a run's small
    constant folds never give it: a process importing numpy and then busy for 0.2 s used 366 ms of CPU with it,
    262 without (medians of 15). That core is the one onnxruntime's thread shares with everything else on the
    machine; the command's wall gains only under load (bert, 11 runs each: 550 -> 509 ms loaded, 460 -> 458
    quiet). Outputs and verification are identical."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


#: Allocations (less deallocations) between the command's young garbage collections (Python's default: 700).
YOUNG_COLLECTION_AFTER = 1_000_000


def fewer_young_collections() -> None:
    """Python's young garbage collections only every YOUNG_COLLECTION_AFTER allocations. A command's objects
    are freed by their reference counts; its ~200 young collections (most during imports, each walking the
    modules, classes and functions just made) freed next to nothing and cost 8-25 ms of CPU (resnet18 8,
    keras 15, rapidocr 20, bert 25: medians of 3 processes each), peak memory unchanged on the 16 shared models
    but silero (+5 MB: its decided-If trials' IR copies wait for a collection) and at 96 transformer layers.
    Full collections stay off while optimizing (eqsat.pipeline)."""
    young, middle, full = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_COLLECTION_AFTER), middle, full)


def load_egglog_bindings_alone() -> None:
    """Load egglog's compiled bindings without the egglog package's Python layer (its high-level API, ~0.2 s
    to import, which eqsat never uses): registered as `egglog.bindings`, the module eqsat.engine.backend imports with
    `from egglog.bindings import ...`, which then does not import the package. A later `import egglog` works,
    but would lack the `egglog.bindings` attribute."""
    if "egglog.bindings" in sys.modules:
        return
    package = importlib.util.find_spec("egglog")
    folders = list(package.submodule_search_locations or []) if package is not None else []
    for folder in folders:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:  # the interpreter's own order of preference
            path = os.path.join(folder, "bindings" + suffix)
            if not os.path.isfile(path):
                continue
            spec = importlib.util.spec_from_file_location("egglog.bindings", path)
            if spec is None or spec.loader is None:
                return
            try:
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except ImportError:  # a stale or foreign build: the normal import decides
                return
            sys.modules["egglog.bindings"] = module
            return


_SWAP = threading.RLock()


class DeferredModule(types.ModuleType):
    """A stand-in registered under a module's name: `import name` binds it at no cost, and the first
    attribute it lacks imports the real module, whose namespace it then takes on (so later reads are plain
    attribute reads). importlib.util.LazyLoader cannot serve here: on Python 3.11 the import statement itself
    reads the module's `__spec__` through the lazy module, which loads it.

    An opened package's stand-in (one with a `__path__`, `defer_imports(opened=...)`) imports its submodules
    by themselves: `import package.sub` and `from package import sub` leave the package's `__init__` unrun;
    the real package, once imported, gets them bound too."""

    def __getattr__(self, attr: str) -> object:
        name = self.__name__
        path = vars(self).get("__path__")
        if path is not None and not attr.startswith("__"):
            if importlib.machinery.PathFinder.find_spec(f"{name}.{attr}", path) is not None:
                return importlib.import_module(f"{name}.{attr}")
        with _SWAP:  # one thread swaps the stand-in for the real module; the others then find it
            real = sys.modules.get(name)
            if real is None or real is self:
                sys.modules.pop(name, None)
                real = importlib.import_module(name)
                _bind_submodules(self, real)
        vars(self).update({k: v for k, v in vars(real).items() if k != "__class__"})
        return getattr(real, attr)


def _bind_submodules(stand_in: types.ModuleType, real: types.ModuleType) -> None:
    """The submodules imported through an opened package's stand-in (bound to it, not to the real package)
    bound to the real package too, as an import through it would have: `package.sub` keeps working."""
    for key, value in list(vars(stand_in).items()):
        submodule = sys.modules.get(f"{real.__name__}.{key}")
        if isinstance(value, types.ModuleType) and submodule is not None and not hasattr(real, key):
            setattr(real, key, submodule)


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each of `names` (packages) once, as an opened DeferredModule (its `__path__` the package's, which
    the import system reads as it binds a module); its first use imports the real package through the normal
    finders. A name that is not a package is left to them."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = set(names)
        self._paths: dict[str, list[str]] = {}

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name not in self._names:
            return None
        self._names.discard(name)
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None or real.submodule_search_locations is None:
            return None
        self._paths[name] = list(real.submodule_search_locations)
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        stand_in = DeferredModule(spec.name)
        stand_in.__path__ = self._paths.pop(spec.name)
        if spec.name == "onnx.reference.ops":  # the folder's `load_op`, one kernel module at a time
            from eqsat.ui import kernels

            stand_in.load_op = kernels.load_op  # type: ignore[attr-defined]
        return stand_in

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def defer_imports(
    modules: Iterable[tuple[str, str | None]] = DEFERRED,
    opened: Iterable[tuple[str, str | None]] = OPENED,
    submodules: Iterable[str] = DEFERRED_SUBMODULES,
) -> None:
    """Register a DeferredModule for each (name, package) not yet imported: the real module is imported on
    its first use. A submodule's spec is found in its package's folder without importing the package.
    `opened` packages get stand-ins that import their submodules without running the package (a package
    after its parent: the parent's stand-in must exist). `submodules` get stand-ins when first imported
    (`_StandInFinder`)."""
    for name, package in modules:
        _stand_in(name, package, opened=False)
    for name, package in opened:
        _stand_in(name, package, opened=True)
    pending = [name for name in submodules if name not in sys.modules]
    if pending:
        sys.meta_path.insert(0, _StandInFinder(pending))


def _stand_in(name: str, package: str | None, opened: bool) -> None:
    """A DeferredModule for `name` (in `package`'s folder), unless imported already or not laid out as
    expected; an opened one has the package's `__path__`."""
    if name in sys.modules:
        return
    if package is None:
        spec = importlib.util.find_spec(name)
    else:
        parent = importlib.util.find_spec(package)
        folders = list(parent.submodule_search_locations or []) if parent is not None else []
        base = name.rpartition(".")[2]
        module = os.path.join(folders[0], base + ".py") if folders else ""
        init = os.path.join(folders[0], base, "__init__.py") if folders else ""
        if os.path.isfile(module):
            spec = importlib.util.spec_from_file_location(name, module)
        elif os.path.isfile(init):
            spec = importlib.util.spec_from_file_location(
                name, init, submodule_search_locations=[os.path.dirname(init)]
            )
        else:
            spec = None
    if spec is None or (opened and spec.submodule_search_locations is None):  # the normal import decides
        return
    stand_in = DeferredModule(name)
    stand_in.__spec__ = spec
    if opened:
        stand_in.__path__ = list(spec.submodule_search_locations or [])
    sys.modules[name] = stand_in
