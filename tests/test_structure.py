"""The shape of the code base: one installed namespace, no import cycles, imports at the top.

Read from the source text (`ast`), so it needs no import and sees imports inside functions too. Imports
under `if TYPE_CHECKING:` are left out: they are annotations only and never run.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from eqsat.extract.problem import strongly_connected

ROOT = Path(__file__).resolve().parent.parent
#: Where each installed package's top folder is in the repository (pyproject.toml's package-dir).
PACKAGE_DIRS = {"eqsat": ROOT / "eqsat", "eqsat.rewrites": ROOT / "rewrites", "eqsat.extract": ROOT / "extract"}


def _modules() -> dict[str, Path]:
    """Every module of the project by dotted name, as installed."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            modules[".".join((package, *parts))] = path
    return modules


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """Import nodes inside `if TYPE_CHECKING:` blocks."""
    skipped: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped |= {n for stmt in node.body for n in ast.walk(stmt)}
    return skipped


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports, anywhere in its text (functions included)."""
    tree = ast.parse(path.read_text(), str(path))
    skipped = _type_checking_only(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package (a package's __init__ is its own package)
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in modules and t != name}
    return found


#: The layers, lowest first; a module may import its own layer and the ones below, never one above
#: (README, "Layout"). The interface (`eqsat.ui`) -> the pipeline (eqsat's top-level modules and
#: `eqsat.testing`) -> views -> the engine (with `eqsat.rewrites`, `eqsat.extract`) and the checks, which
#: never import each other -> the front end -> the base (errors, metadata, options).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("eqsat.errors", "eqsat.metadata", "eqsat.options", "eqsat.ops")),
    ("frontend", ("eqsat.frontend",)),
    ("engine", ("eqsat.engine", "eqsat.rewrites", "eqsat.extract")),
    ("check", ("eqsat.check",)),
    ("view", ("eqsat.view",)),
    ("pipeline", ("eqsat", "eqsat.rewrites.properties")),  # rule properties are testing code
    ("ui", ("eqsat.ui", "eqsat.__main__")),
)
#: Layers at one level: neither may import the other.
SIBLINGS = {"engine": 2, "check": 2}


def layer_of(module: str) -> tuple[str, int]:
    """The layer a module belongs to (the longest matching prefix) and its rank."""
    best = ("", -1, 0)
    for rank, (layer, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[2]:
                best = (layer, rank, len(prefix))
    layer, rank, _ = best
    return layer, SIBLINGS.get(layer, rank if rank < 3 else rank)


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a module to one of a higher layer, or between sibling layers: "a (layer) -> b (layer)"."""
    found = []
    for module, imported in sorted(graph.items()):
        layer, rank = layer_of(module)
        for target in sorted(imported):
            other, other_rank = layer_of(target)
            if other_rank > rank or (other != layer and other_rank == rank):
                found.append(f"{module} ({layer}) -> {target} ({other})")
    return found


def test_layer_check_finds_a_planted_upward_import():
    """The check itself: an upward import and a sibling import are found, downward ones are not."""
    graph = {
        "eqsat.frontend.io": {"eqsat.ui.cli", "eqsat.errors"},
        "eqsat.engine.lower": {"eqsat.check.verify"},
        "eqsat.ui.cli": {"eqsat.pipeline", "eqsat.frontend.io"},
        "eqsat.pipeline": {"eqsat.engine.terms"},
    }
    assert upward_imports(graph) == [
        "eqsat.engine.lower (engine) -> eqsat.check.verify (check)",
        "eqsat.frontend.io (frontend) -> eqsat.ui.cli (ui)",
    ]


def test_imports_go_down_the_layers():
    modules = _modules()
    assert all(layer_of(m)[0] for m in modules), [m for m in modules if not layer_of(m)[0]]
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert not upward_imports(graph), "imports against the layers:\n" + "\n".join(upward_imports(graph))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles: strongly connected components of two or more modules."""
    return sorted(sorted(c) for c in strongly_connected(sorted(graph), lambda m: sorted(graph[m])))


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert not _cycles(graph), f"import cycles among the project's modules: {_cycles(graph)}"


def test_imports_are_at_the_top():
    """No module-level import after the first definition (an import at a module's bottom hides a cycle)."""
    late = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(), str(path))
        defined = False
        for stmt in tree.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = True
            elif defined and isinstance(stmt, (ast.Import, ast.ImportFrom)):
                late.append(f"{name}:{stmt.lineno}")
    assert not late, f"module-level imports below a definition: {late}"


def test_one_installed_namespace():
    """pyproject.toml installs every package folder, and only under `eqsat` (README, "Layout")."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    assert all(p == "eqsat" or p.startswith("eqsat.") for p in listed), listed
    assert {k: ROOT / v for k, v in config["package-dir"].items()} == {
        k: v for k, v in PACKAGE_DIRS.items() if k != "eqsat"
    }
    packages = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert packages == listed, (
        f"package folders not installed: {packages - listed}; listed, absent: {listed - packages}"
    )
    assert "targets/*.toml" in config["package-data"]["eqsat.extract"]


def test_every_family_has_its_properties_and_tests():
    """Adding a rule: rewrites/<family>.py, rewrites/properties/<family>.py, tests/test_rules_<family>.py."""
    from eqsat.rewrites import properties
    from eqsat.rewrites.registry import all_rules

    rules = all_rules()
    modules = {module.__name__.rsplit(".", 1)[1]: module for module in properties.FAMILIES}
    assert set(modules) == {r.family for r in rules}
    for family, module in modules.items():
        drawn = {*module.PROPERTIES, *getattr(module, "STATIC_PROPERTIES", {})}
        assert drawn == {r.name for r in rules if r.family == family}, family
        assert (ROOT / "tests" / f"test_rules_{family}.py").is_file(), family


def test_no_module_over_800_lines():
    """One job a module: a module past 800 lines is doing several."""
    long = {name: n for name, path in _modules().items() if (n := len(path.read_text().splitlines())) > 800}
    assert not long, f"modules over 800 lines: {long}"
