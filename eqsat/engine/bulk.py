"""Bulk loading through primitive tables: the fast path from an encoded graph into egglog.

Every constructor gets a load table whose columns are primitives only: the handle id of the value it
defines, the handle ids of its tensor inputs (-1 for an absent optional input) and its static parameters
(integer vectors by id into `load-vec`). egglog's `input` command reads such a table from a
tab-separated file in native code, and one generated rule per table turns its rows into terms:

    (rule ((load-Transpose o x p) (= v (load-vec p))) ((union (Ref o) (Transpose (Ref x) v))))

An op of a generic constructor (eqsat.engine.terms.GENERIC) loads through its family's table, the op's name a
column: `(load-Unary o "Relu" x)` builds `(Unary "Relu" (Ref x))`.

So 20k ops load with a hundred compiled rules instead of ten thousand throwaway ones (egglog-notes §6
measured the throwaway-rule route at 3.4 s for 20k ops; rule compilation dominated). A row whose
strings a tab-separated file cannot carry (tabs, line breaks, edge whitespace: `input` trims fields)
goes through the text route instead (`Rows.text`).
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any, Sequence

from eqsat.engine.terms import GENERIC, GENERIC_OF, OPS, egg_float, egg_ints

#: The handle id that stands for an absent optional input: `(Ref -1)` is unioned with `(Absent)`.
ABSENT = -1
#: Column kinds of load tables (static parameter kinds of eqsat.engine.terms, integer vectors by id).
_COLUMN = {"int": "i64", "ints": "i64", "float": "f64", "str": "String", "dtype": "String"}
#: Strings a tab-separated field carries unchanged (no tabs, line breaks, quotes, backslashes, edge spaces).
_SAFE_STRING = re.compile(r'[^\s"\\](?:[^\t\n\r"\\]*[^\s"\\])?')


@dataclasses.dataclass(frozen=True)
class Table:
    """One load table: its egglog name, column sorts, and the rule that builds terms from its rows."""

    name: str
    columns: tuple[str, ...]
    rule: str

    @property
    def declaration(self) -> str:
        return f"(relation {self.name} ({' '.join(self.columns)}))"

    def clear_rule(self) -> str:
        row = f"({self.name} {' '.join(f'c{i}' for i in range(len(self.columns)))})"
        return f"(rule ({row}) ((delete {row})) :ruleset load-clear)"


def _table(constructor: str, columns: Sequence[str], query: str, action: str) -> Table:
    name = f"load-{constructor}"
    variables = " ".join(f"c{i}" for i in range(len(columns)))
    return Table(name, tuple(columns), f"(rule (({name} {variables}){query}) ({action}) :ruleset load-rows)")


@functools.lru_cache(maxsize=1)
def tables() -> dict[str, Table]:
    """Every load table, by name."""
    result = [
        _table("Input", ("i64", "String"), "", "(union (Ref c0) (Input c1))"),
        _table("Const", ("i64", "String"), "", "(union (Ref c0) (Const c1))"),
        _table(
            "Scalar", ("i64", "f64", "String", "i64"), " (= v3 (load-vec c3))", "(union (Ref c0) (Scalar c1 c2 v3))"
        ),
        _table("shape", ("i64", "i64"), " (= v1 (load-vec c1))", "(set (shape (Ref c0)) v1) (shape-met (Ref c0) v1)"),
        _table("dtype", ("i64", "String"), "", "(set (dtype (Ref c0)) c1)"),
        _table("positive", ("i64",), "", "(positive (Ref c0))"),
        _table("finite", ("i64",), "", "(finite (Ref c0))"),
        _table("safe-reciprocal", ("i64",), "", "(safe-reciprocal (Ref c0))"),
        _table("moderate", ("i64",), "", "(moderate (Ref c0))"),
        _table("conv-fanout", ("i64",), "", "(conv-fanout (Ref c0))"),
        _table("const-value", ("i64", "i64", "f64"), "", "(const-value (Ref c0) c1 c2)"),
        _table("splat", ("i64", "f64"), "", "(splat (Ref c0) c1)"),
        _table("const-rank", ("i64", "i64"), "", "(set (const-rank (Ref c0)) c1)"),
    ]
    constructors = [(name, OPS[name]) for name in OPS if name not in GENERIC_OF]
    constructors += [(family, OPS[ops[0]]) for family, ops in GENERIC.items()]
    for constructor, spec in constructors:
        op = int(constructor in GENERIC)  # a generic table's column 1 is the op's name
        n = len(spec.inputs)
        columns = ["i64"] + ["String"] * op + ["i64"] * n + [_COLUMN[p.kind] for p in spec.params]
        query, args = "", [f"c{i}" for i in range(1, 1 + op)] + [f"(Ref c{i + 1 + op})" for i in range(n)]
        for k, p in enumerate(spec.params):
            col = 1 + op + n + k
            if p.kind == "ints":
                query += f" (= v{col} (load-vec c{col}))"
                args.append(f"v{col}")
            else:
                args.append(f"c{col}")
        result.append(_table(constructor, columns, query, f"(union (Ref c0) ({constructor} {' '.join(args)}))"))
    return {t.name: t for t in result}


def declarations() -> str:
    """The vector table and the load rulesets (declared with eqsat.engine.terms' sorts by Backend.declare). A load
    table is declared, with its rule, by Backend.load_rows when a graph first uses it (`Table.declaration`)."""
    return "\n".join(
        [
            "(function load-vec (i64) IVec :no-merge)",
            "(ruleset load-rows)",
            "(ruleset load-clear)",
            "(rule ((= v (load-vec i))) ((delete (load-vec i))) :ruleset load-clear)",
        ]
    )


@dataclasses.dataclass
class Rows:
    """An encoded graph as table rows, interned vectors, and text actions for what tables cannot carry."""

    tables: dict[str, list[tuple[Any, ...]]] = dataclasses.field(default_factory=dict)
    vectors: dict[tuple[int, ...], int] = dataclasses.field(default_factory=dict)
    text: list[str] = dataclasses.field(default_factory=list)

    def vec(self, values: Sequence[int]) -> int:
        key = tuple(int(v) for v in values)
        return self.vectors.setdefault(key, len(self.vectors))

    def add(self, constructor: str, *columns: Any) -> bool:
        """Add a row to `load-<constructor>` (an op of a generic constructor: to its family's table, the op's name
        after the output handle); False (nothing added) if a string column is not carriable."""
        if any(isinstance(c, str) and not _SAFE_STRING.fullmatch(c) for c in columns):
            return False
        family = GENERIC_OF.get(constructor)
        if family is not None:
            self.tables.setdefault(f"load-{family}", []).append((columns[0], constructor, *columns[1:]))
        else:
            self.tables.setdefault(f"load-{constructor}", []).append(columns)
        return True

    def ops(self) -> list[tuple[str, int, tuple[int, ...]]]:
        """The typed ops in the tables as (op, output handle, input handles)."""
        found = []
        for name, rows in self.tables.items():
            constructor = name.removeprefix("load-")
            if constructor in GENERIC:
                n = len(OPS[GENERIC[constructor][0]].inputs)
                found += [(row[1], row[0], tuple(row[2 : 2 + n])) for row in rows]
                continue
            spec = OPS.get(constructor)
            if spec is not None:
                n = len(spec.inputs)
                found += [(spec.name, row[0], tuple(row[1 : 1 + n])) for row in rows]
        return found

    def vector_actions(self) -> list[str]:
        return [f"(set (load-vec {i}) {egg_ints(v)})" for v, i in self.vectors.items()]

    def __len__(self) -> int:
        return sum(len(r) for r in self.tables.values()) + len(self.text)


def tsv(rows: list[tuple[Any, ...]]) -> str:
    """Rows as the tab-separated text egglog's `input` reads (floats exact: repr round-trips). Formatted a column
    at a time: a column of plain ints or strings in one builtin pass, any other cell by `_field`."""
    if not rows:
        return ""
    columns = [_column(column) for column in zip(*rows)]
    return "\n".join(map("\t".join, zip(*columns))) + "\n"


def _column(values: tuple[Any, ...]) -> Any:
    kinds = set(map(type, values))
    if kinds == {str}:
        return values
    if kinds == {int}:
        return map(str, values)
    return map(_field, values)


def _field(value: Any) -> str:
    if isinstance(value, float):
        return egg_float(value)
    return str(int(value)) if isinstance(value, (bool, int)) else str(value)
