"""The package's modules import each other without cycles, and core/ holds only its wings.

Every import counts, `TYPE_CHECKING` and in-function ones included: they are dependencies of the
design all the same (import-linter's layers contract checks the wings' order; this checks that
no module anywhere loops back).
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "ddptui"


def module_name(path: Path) -> str:
    """`ddptui.core.session.lockstep` for its file; a package by its `__init__`."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, path: Path, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement may name (a `from` import's names may be modules)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    if node.level:
        base = base[: len(base) - node.level + 1]
        prefix = ".".join([*base, *([node.module] if node.module else [])])
    else:
        prefix = node.module or ""
    return [prefix, *(f"{prefix}.{alias.name}" for alias in node.names)]


def import_graph() -> dict[str, set[str]]:
    """Each module of the package and the package modules it imports."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[name] |= {
                    target
                    for target in imported(name, path, node)
                    if target in files and target != name and not name.startswith(target + ".")
                }
    return graph


def test_no_module_imports_itself_back() -> None:
    graph = import_graph()
    assert len(graph) > 100
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        raise AssertionError(f"import cycle: {' -> '.join(error.args[1])}") from None


def test_the_cycle_check_sees_a_cycle() -> None:
    graph = import_graph()
    graph["ddptui.core.model.state"].add("ddptui.core.session.session")
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError:
        return
    raise AssertionError("a cycle through state and session went unseen")


def test_core_holds_only_its_wings() -> None:
    loose = sorted(p.name for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py")
    assert loose == []
    for wing in (p for p in (PACKAGE / "core").iterdir() if p.is_dir() and p.name != "__pycache__"):
        docstring = ast.get_docstring(ast.parse((wing / "__init__.py").read_text()))
        assert docstring, f"core/{wing.name} says its role in its __init__ docstring"
