"""The command's start-up (eqsat.ui.startup) and the solver's silence: each checked in a fresh interpreter, as
both concern what a process imports or prints first."""

from __future__ import annotations

import subprocess
from pathlib import Path
import sys

import onnx
import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_deferred_sympy_is_imported_on_first_use_only() -> None:
    """onnx_ir imports sympy (~0.2 s) for symbolic-dim arithmetic; deferred, importing onnx_ir leaves it
    unloaded, and the arithmetic still works, loading it then."""
    done = _run(
        "import sys\n"
        "from eqsat.ui.startup import DeferredModule, defer_imports\n"
        "defer_imports()\n"
        "import onnx_ir, onnxscript.optimizer\n"
        "assert isinstance(sys.modules['sympy'], DeferredModule), 'sympy was imported'\n"
        "assert 'sympy.core' not in sys.modules\n"
        "dim = onnx_ir.SymbolicDim('N')\n"
        "print((dim + 1).value, (dim * 2 + dim).value)\n"
        "import sympy\n"
        "print(sympy.Symbol('x') + 1, 'sympy.core' in sys.modules)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["N + 1 3*N", "x + 1 True"]


def test_deferral_leaves_imported_modules_alone() -> None:
    """A module already imported is not replaced by a stand-in."""
    done = _run(
        "import sys, sympy\n"
        "from eqsat.ui.startup import DeferredModule, defer_imports\n"
        "defer_imports()\n"
        "assert sys.modules['sympy'] is sympy and not isinstance(sympy, DeferredModule)\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_solver_prints_nothing() -> None:
    """highspy's constructor prints HiGHS's banner once per process unless output is off before its
    callbacks start: the extractor's instance must print nothing (the command's stdout can carry JSON)."""
    done = _run("from eqsat.extract.ilp import _highs\nhighspy, h = _highs()\nh.run()\n_, again = _highs()\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""


def test_highspy_is_imported_only_when_the_ilp_solves() -> None:
    """highspy (~7 ms to import) is loaded when HiGHS runs, not before: an extraction the greedy choice already
    solves (its DAG cost meets the lower bound) leaves it unloaded; one that needs the solver loads it."""
    done = _run(
        "import sys\n"
        "from eqsat.engine.egraph import EClass, EGraph, ENode\n"
        "from eqsat.extract import extract\n"
        "def graph(spec, n):\n"
        "    nodes = tuple(ENode(i, op, c, tuple(kids), ()) for i, (c, op, kids) in enumerate(spec))\n"
        "    members = tuple(tuple(m.id for m in nodes if m.eclass == k) for k in range(n))\n"
        "    return EGraph(nodes, tuple(EClass(k, 'T', ids) for k, ids in enumerate(members)), (n - 1,))\n"
        "chain = graph([(0, 'Input', []), (1, 'Relu', [0]), (2, 'Relu', [1])], 3)\n"
        "easy = extract(chain, None, lambda g, n: [0.0, 1.0, 1.0][n.id], 'ilp')\n"
        "print(any('HiGHS not run' in note for note in easy.notes), 'highspy' in sys.modules)\n"
        "spec = [(0, 'Input', []), (1, 'Conv', [0]), (2, 'Relu', [1]), (2, 'Mul', [0]), (3, 'Add', [2, 1]),"
        " (3, 'Sub', [2, 0])]\n"
        "shared = extract(graph(spec, 4), None, lambda g, n: [0.0, 10.0, 1.0, 3.0, 1.0, 12.5][n.id], 'ilp')\n"
        "print(any('HiGHS not run' in note for note in shared.notes), 'highspy' in sys.modules, shared.choice[2])\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["True False", "False True 2"]


def test_first_uses_on_several_threads_import_one_module() -> None:
    """Threads that first use a deferred module at once all get the one real module sys.modules keeps."""
    done = _run(
        "import sys, threading\n"
        "from eqsat.ui.startup import defer_imports\n"
        "defer_imports()\n"
        "import sympy as stand_in\n"
        "seen, start = [], threading.Barrier(8)\n"
        "def use():\n"
        "    start.wait()\n"
        "    seen.append(stand_in.Expr)\n"
        "threads = [threading.Thread(target=use) for _ in range(8)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "assert len(seen) == 8 and len({id(e) for e in seen}) == 1, seen\n"
        "assert sys.modules['sympy'].Expr is seen[0] and type(sys.modules['sympy']).__name__ == 'module'\n"
        "print('ok')\n"
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


#: A child script's start: the command's deferred imports, then `model(ones())`: y = x * (a + a) with `a` a constant
#: (the folder evaluates the Add) or, for `model(None)`, y = x * Relu(x) (nothing to evaluate).
_FOLD_PRELUDE = (
    "import sys\n"
    "import numpy as np, onnx_ir as ir\n"
    "from eqsat.ui.startup import DeferredModule, defer_imports\n"
    "defer_imports()\n"
    "from eqsat.frontend.fold import fold\n"
    "def model(a):\n"
    "    x = ir.Value(name='x', type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))\n"
    "    add = ir.node('Add', [a, a]) if a is not None else ir.node('Relu', [x])\n"
    "    mul = ir.node('Mul', [x, add.outputs[0]]); mul.outputs[0].name = 'y'\n"
    "    init = [a] if a is not None else []\n"
    "    g = ir.Graph([x], mul.outputs, nodes=[add, mul], initializers=init, opset_imports={'': 17})\n"
    "    return ir.Model(g, ir_version=8)\n"
    "def ones():\n"
    "    return ir.Value(name='a', const_value=ir.tensor(np.ones(2, np.float32), name='a'))\n"
)


def test_the_command_folds_without_onnxscripts_package_inits() -> None:
    """The folder module is imported by itself (eqsat.ui.startup.OPENED): onnxscript's script converter and
    rewriter stay unloaded, folding still folds, the function used is the public `fold_constants_ir`, and a
    later use of the package loads it whole."""
    done = _run(
        _FOLD_PRELUDE + "folds = model(ones()); print(fold(folds), [n.op_type for n in folds.graph])\n"
        "print(sorted(m for m in ('onnxscript._internal.main', 'onnxscript.rewriter') if m in sys.modules))\n"
        "import onnxscript, onnxscript.optimizer as opt\n"
        "from onnxscript.optimizer import _constant_folding\n"
        "print(callable(onnxscript.script), opt.fold_constants_ir is _constant_folding.fold_constants)\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == ["True ['Mul']", "[]", "True True"]


def test_a_plain_optimize_loads_no_pictures_and_no_script_converter(tmp_path: Path) -> None:
    """`eqsat optimize M -o OUT` without --report prints its headline without eqsat.view.display (pictures,
    listings) and folds without onnxscript's script converter: neither is imported by the run."""
    _relu_twice(tmp_path / "m.onnx", batch=2)
    done = _run(
        "import sys\n"
        "from eqsat.ui import cli, startup\n"
        "startup.load_egglog_bindings_alone(); startup.defer_imports()\n"
        f"code = cli.main(['optimize', {str(tmp_path / 'm.onnx')!r}, '-o', {str(tmp_path / 'o.onnx')!r}])\n"
        "print(code, [m for m in ('eqsat.view.display', 'onnxscript._internal.main') if m in sys.modules])\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []", done.stdout
    assert len(onnx.load(tmp_path / "o.onnx").graph.node) == 1  # Relu(Relu(x)) -> Relu(x): the run did run


def test_the_reference_kernels_wait_for_a_node_to_evaluate() -> None:
    """onnxscript's folder imports onnx.reference.ops at start: the command's is a stand-in bound to
    onnx.reference until the folder evaluates a node, which then loads that node's kernel (eqsat.ui.kernels:
    not the other ~220 kernel modules of onnx's op list) and folds it. An onnx whose op list is laid out otherwise
    gets onnx's own load_op (tests/test_kernels.py): nothing to check here then."""
    from eqsat.ui import kernels

    if kernels._kernel_modules() is None:
        pytest.skip("this onnx's op list is not laid out as eqsat.ui.kernels reads it: onnx's own load_op serves")
    done = _run(
        _FOLD_PRELUDE + "import onnx\n"
        "nothing = model(None); print(fold(nothing), [n.op_type for n in nothing.graph])\n"
        "print(isinstance(onnx.reference.ops, DeferredModule), 'onnx.reference.ops._op_list' in sys.modules)\n"
        "folds = model(ones()); print(fold(folds), [n.op_type for n in folds.graph])\n"
        "print('onnx.reference.ops._op_list' in sys.modules, 'onnx.reference.ops.op_add' in sys.modules)\n"
        "print(sorted(m for m in sys.modules if m.startswith('onnx.reference.ops.op_')))\n"
        "print(folds.graph.initializers[folds.graph.node(0).inputs[1].name].const_value.numpy().tolist())\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:6] == [
        "False ['Relu', 'Mul']",
        "True False",
        "True ['Mul']",
        "False True",
        "['onnx.reference.ops.op_add']",
        "[2.0, 2.0]",
    ]


def test_the_reference_package_waits_for_a_node_to_evaluate() -> None:
    """onnx.reference's `__init__` (its evaluator and `op_run`, which reads every schema) is not run by a fold
    that evaluates nothing, nor by one that loads the kernels; the evaluator, imported later, is the real one,
    and the kernels stay bound to the real package."""
    done = _run(
        _FOLD_PRELUDE + "nothing = model(None); print(fold(nothing))\n"
        "print([m in sys.modules for m in ('onnx.reference.op_run', 'onnx.reference.reference_evaluator')])\n"
        "folds = model(ones()); print(fold(folds), [n.op_type for n in folds.graph])\n"
        "print([m in sys.modules for m in ('onnx.reference.op_run', 'onnx.reference.reference_evaluator')])\n"
        "import onnx\n"
        "from onnx.reference import ReferenceEvaluator\n"
        "print(ReferenceEvaluator.__module__, type(sys.modules['onnx.reference']).__name__)\n"
        "print(onnx.reference is sys.modules['onnx.reference'], callable(onnx.reference.ops.load_op))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:6] == [
        "False",
        "[False, False]",
        "True ['Mul']",
        "[True, False]",
        "onnx.reference.reference_evaluator module",
        "True True",
    ]


def test_a_run_leaves_onnx_extras_and_their_stdlib_imports_unloaded(tmp_path: Path) -> None:
    """`eqsat optimize` imports neither onnx's composer, utilities and test-data generator nor the socket, csv,
    calendar, uuid, pickle and ctypes modules onnx's and numpy's start-ups would bring (eqsat.ui.startup.DEFERRED);
    each works when used afterwards, through onnx's attributes and numpy's pickling as well."""
    _relu_twice(tmp_path / "m.onnx", batch=2)
    names = ("onnx.compose", "onnx.utils", "onnx.gen_proto", "socket", "csv", "calendar", "uuid", "tarfile", "pickle")
    names += ("ctypes",)
    done = _run(
        "import sys\n"
        "from eqsat.ui import cli, startup\n"
        "startup.load_egglog_bindings_alone(); startup.defer_imports()\n"
        f"code = cli.main(['optimize', {str(tmp_path / 'm.onnx')!r}, '-o', {str(tmp_path / 'o.onnx')!r}])\n"
        f"loaded = [n for n in {names!r} if type(sys.modules.get(n)).__name__ not in ('NoneType', 'DeferredModule')]\n"
        "print(code, loaded)\n"
        "import onnx, socket, uuid, csv, calendar\n"
        "print(callable(onnx.compose.merge_models), callable(onnx.utils.extract_model), socket.AF_INET.name)\n"
        "print(len(str(uuid.uuid4())), calendar.isleap(2024), next(csv.reader(['a,b'])))\n"
        "import pickle, ctypes, numpy as np\n"
        "a = np.arange(3.0); pointer = a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))\n"
        "print(pickle.loads(pickle.dumps(a)).tolist(), pointer[1])\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-4:] == [
        "0 []",
        "True True AF_INET",
        "36 True ['a', 'b']",
        "[0.0, 1.0, 2.0] 1.0",
    ], done.stdout


def _relu_twice(path: Path, batch: int | str = "n") -> None:
    """Relu(Relu(x)) with x [batch, 3], saved at `path` (optimized: one Relu)."""
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [batch, 3])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [batch, 3])
    nodes = [onnx.helper.make_node("Relu", ["x"], ["r"]), onnx.helper.make_node("Relu", ["r"], ["y"])]
    model = onnx.helper.make_model(
        onnx.helper.make_graph(nodes, "g", [x], [y]), opset_imports=[onnx.helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    onnx.save(model, path)


def test_the_command_runs_onnxruntime_without_its_telemetry(tmp_path: Path) -> None:
    """`eqsat optimize` (verification on) leaves no onnxruntime telemetry database in the home's cache; a value
    the environment gives is kept. The run with telemetry asked for goes first, as the control: an onnxruntime
    that writes no database even then (a build or machine without it) leaves nothing to observe here, and the
    environment rule itself is checked in-process below."""
    import os

    _relu_twice(tmp_path / "m.onnx")
    env = {k: v for k, v in os.environ.items() if k not in ("ORT_DISABLE_TELEMETRY", "XDG_CACHE_HOME")}

    def databases_left(home: Path, given: str | None) -> set[str]:
        home.mkdir()
        done = subprocess.run(
            [sys.executable, "-m", "eqsat", "optimize", str(tmp_path / "m.onnx"), "-o", str(home / "o.onnx")],
            capture_output=True,
            text=True,
            env={**env, "HOME": str(home), **({} if given is None else {"ORT_DISABLE_TELEMETRY": given})},
        )
        assert done.returncode == 0, done.stderr
        assert len(onnx.load(home / "o.onnx").graph.node) == 1
        return {str(p.relative_to(home)) for p in home.rglob("onnxruntime.db*")}

    if not databases_left(tmp_path / "home_given", "0"):  # telemetry on, as the environment asks
        pytest.skip("this onnxruntime writes no telemetry database even with telemetry on")
    assert databases_left(tmp_path / "home", None) == set()


def test_telemetry_is_turned_off_only_where_the_environment_is_silent(monkeypatch) -> None:  # noqa: ANN001
    import os

    from eqsat.ui import startup

    monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    startup.without_onnxruntime_telemetry()
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "1"
    monkeypatch.setenv("ORT_DISABLE_TELEMETRY", "0")
    startup.without_onnxruntime_telemetry()
    assert os.environ["ORT_DISABLE_TELEMETRY"] == "0"


def test_the_command_starts_numpy_without_blas_worker_threads() -> None:
    """The command's start-up keeps OpenBLAS on one thread: importing numpy then starts no thread (Linux's
    /proc counts them); a value the environment gives is kept."""
    import os

    if not os.path.isdir("/proc/self/task"):
        return
    probe = (
        "import os\n"
        "from eqsat.ui import startup\n"
        "startup.single_threaded_blas()\n"
        "import numpy\n"
        "print(len(os.listdir('/proc/self/task')), os.environ['OPENBLAS_NUM_THREADS'])\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]
    given = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env={**env, "OPENBLAS_NUM_THREADS": "2"}
    )
    assert given.stdout.split()[1] == "2"


def test_the_command_runs_few_young_garbage_collections(tmp_path: Path) -> None:
    """The command's start-up raises Python's young collection threshold (startup.fewer_young_collections): a
    run makes a handful of collections at most where Python's default threshold makes ~90, and still writes its
    output."""
    _relu_twice(tmp_path / "m.onnx")
    probe = (
        "import gc, os, sys\n"
        "count = [0]\n"
        "gc.callbacks.append(lambda phase, info: count.__setitem__(0, count[0] + (phase == 'start')))\n"
        "real_exit = os._exit\n"
        "def exit_(code):\n"
        "    print('collections', count[0], flush=True)\n"
        "    real_exit(code)\n"
        "os._exit = exit_\n"
        f"sys.argv = ['eqsat', 'optimize', {str(tmp_path / 'm.onnx')!r}, '-o', {str(tmp_path / 'o.onnx')!r}]\n"
        "from eqsat.ui.cli import run_command\n"
        "count[0] = 0  # those while importing the command's module: before its start-up\n"
        "run_command()\n"
    )
    done = _run(probe)
    assert done.returncode == 0, done.stderr
    assert len(onnx.load(tmp_path / "o.onnx").graph.node) == 1
    assert int(done.stdout.split()[-1]) <= 5, done.stdout
