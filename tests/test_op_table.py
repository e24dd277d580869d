"""The op table (eqsat/ops.py) is the one place that says what an op is: every category is derived from its rows.

`test_no_op_category_outside_the_op_table` reads the source text (`ast`) of eqsat/, rewrites/, extract/ and
benchmarks/: a module-level name bound to a literal set, list, tuple or dict holding three or more ONNX op names
is an op category spelled a second time. Lists inside functions and classes are left alone: a rule naming the
ops of its own pattern, a builder (a property, the fuzzer) the ops it builds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import onnx.defs

from eqsat import ops
from eqsat.engine import terms

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("eqsat", "rewrites", "extract", "benchmarks")
TABLE_MODULES = {"eqsat/ops.py"}
#: module:name -> why a module-level list of op names there is not an op category.
NOT_CATEGORIES = {
    "eqsat/report.py:WATCHED_OPS": "the op counts every report shows: a choice of columns, not a trait of the ops",
}
#: Every ONNX op name (any domain and version) and every op of the table.
OP_NAMES = frozenset(s.name for s in onnx.defs.get_all_schemas_with_history()) | frozenset(ops.OP_TABLE)


def _op_names_in(node: ast.AST) -> list[str]:
    """The op names a set, list, tuple or dict literal holds directly (a dict: its keys)."""
    if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items: list[ast.expr | None] = list(node.elts)
    elif isinstance(node, ast.Dict):
        items = list(node.keys)
    else:
        return []
    return [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in OP_NAMES]


def categories(source: str, label: str) -> list[str]:
    """`label:name` of each module-level assignment whose value holds a literal of three or more op names."""
    found = []
    for stmt in ast.parse(source).body:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        if any(len(_op_names_in(node)) >= 3 for node in ast.walk(value)):
            found += [f"{label}:{ast.unparse(t)}" for t in targets]
    return found


def test_the_check_finds_a_planted_category():
    """The check itself: a module-level table is found (nested in a dict too); a function's pattern is not."""
    source = (
        'ACTS = ("Relu", "Tanh", "Sigmoid")\n'
        'RULES = {"x": [rw(op) for op in ("Add", "Sub", "Mul")]}\n'
        'PAIR = ("Add", "Sub")\n'
        'WORDS = ("Input", "Const", "Scalar")\n'
        "def rules():\n"
        '    return [rw(op) for op in ("Add", "Sub", "Mul", "Div")]\n'
    )
    assert categories(source, "m") == ["m:ACTS", "m:RULES"]


def test_no_op_category_outside_the_op_table():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            label = str(path.relative_to(ROOT))
            if label not in TABLE_MODULES:
                found += categories(path.read_text(), label)
    spelled = [f for f in found if f not in NOT_CATEGORIES]
    assert not spelled, "op categories spelled outside eqsat/ops.py (derive them from its rows):\n" + "\n".join(spelled)
    assert set(NOT_CATEGORIES) <= set(found), "an exception that no longer applies"


def test_terms_reexport_the_table():
    assert terms.OPS is ops.OPS and terms.UNARY is ops.UNARY and terms.BINARY is ops.BINARY
    assert list(ops.OPS) == [name for name, spec in ops.OP_TABLE.items() if spec.term]
    assert not set(ops.OPS) & (set(terms.SPECIAL) | terms.PLUMBING_OPS)


def test_rows_are_well_formed():
    """Each trait holds one of its values; the names a row gives (numpy functions, ops) exist."""
    for name, spec in ops.OP_TABLE.items():
        assert spec.shape in (None, *ops.SHAPE_RULES), name
        assert spec.logic in (None, "compare", "bool"), name
        assert spec.moves in (None, "view", "move"), name
        assert spec.family in (None, "random", "recurrent", "window-function"), name
        assert set(spec.epilogue) <= {"conv", "matmul"}, name
        assert spec.numpy in (None, "own") or callable(getattr(np, spec.numpy)), name
        assert spec.one_element is None or spec.one_element in ops.OPS, name
        assert bool(spec.state_inputs) == (spec.family == "recurrent"), name
        if spec.elementwise:
            assert spec.shape in ("same", "broadcast") and spec.term, name
        if not spec.term:
            assert not spec.inputs and not spec.params, name
    for name in (*ops.CONV_EPILOGUES, *ops.MATMUL_EPILOGUES, *ops.CONST_FOLDABLE_UNARY):
        assert name in ops.UNARY or name in ops.PARAM_UNARY, name
