"""The notebooks in notebooks/ run top to bottom (nbclient, a fresh kernel, cwd = the repository root) within
their time limits, and are committed without outputs. nbclient, nbformat, ipykernel and matplotlib are in
the `test` extra: if one is missing these tests fail (never skip)."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = pytest.mark.slow  # python -m pytest -m "not slow" leaves these out (README)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
#: Seconds each notebook may take end to end (kernel start included) on a busy 2-core machine; they
#: take 3-20 s alone.
TIME_LIMITS = {
    "01_tour.ipynb": 60,
    "02_cost_models.ipynb": 60,
    "03_rule_soundness.ipynb": 90,
    "04_calibration.ipynb": 90,  # a 5 s calibration, three saturations, 30 timed rounds of 9 graphs
}


def test_the_notebooks_are_the_ones_listed() -> None:
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == sorted(TIME_LIMITS)


@pytest.mark.parametrize("name", sorted(TIME_LIMITS))
def test_notebook_is_committed_without_outputs(name: str) -> None:
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(book)
    for cell in book.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{name}: clear outputs before committing"


@pytest.mark.parametrize("name", sorted(TIME_LIMITS))
def test_notebook_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MPLBACKEND", "Agg")  # the kernel inherits it: no GUI backend, ever
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    limit = TIME_LIMITS[name]
    client = NotebookClient(book, timeout=limit, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError naming the cell and its traceback
    seconds = time.perf_counter() - start
    assert seconds < limit, f"{name} took {seconds:.1f} s (limit {limit} s)"
    errors = [o for cell in book.cells if cell.cell_type == "code" for o in cell.outputs if o.output_type == "error"]
    assert not errors


def test_the_notebook_extra_brings_what_the_notebooks_import() -> None:
    """`pip install '.[notebook]'` (README): Jupyter to open and run them, and every package their cells import
    that eqsat's own dependencies do not bring."""
    import json
    import re
    import sys
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extra = {re.split(r"[<>=\[ ]", d)[0].lower() for d in project["optional-dependencies"]["notebook"]}
    assert {"jupyterlab", "nbconvert", "ipykernel"} <= extra
    provided = extra | {re.split(r"[<>=\[ ]", d)[0].lower() for d in project["dependencies"]}
    provided |= {"ipython"}  # ipykernel's dependency
    stdlib = set(sys.stdlib_module_names)
    for name in TIME_LIMITS:
        cells = json.loads((NOTEBOOKS / name).read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        imported = {m.lower() for m in re.findall(r"^\s*(?:import|from) (\w+)", code, re.M)}
        missing = imported - provided - stdlib - {"eqsat", "onnx"}
        assert not missing, f"{name} imports {sorted(missing)}: add them to the notebook extra"
