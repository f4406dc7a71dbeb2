"""The layering contract: every import points down, no file imports itself back through others, and a
package is used through its public names (never another package's ``_private`` module).

    core  <-  evaluator, profiler, memory  <-  tools  <-  agents  <-  graphs  <-  suite  <-  cli

Read from the source's AST (no import runs), counting every import: at module level, inside functions,
and under ``if TYPE_CHECKING:`` (a type-only import still makes the lower file name the higher one). Cycles
are counted over the imports that run (type-only ones excluded: they never execute).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "tritonsmith"

# Lowest first. "" is the package's own __init__ (the lazy public API), which may name anything.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"core", "examples"}),
    frozenset({"evaluator", "profiler", "memory"}),
    frozenset({"tools"}),
    frozenset({"agents"}),
    frozenset({"graphs"}),
    frozenset({"suite"}),
    frozenset({"cli", "__main__", ""}),
)
# Packages of one layer are independent, except (importer, imported): the profiler runs its workers in the
# evaluator's sandbox and times with the evaluator's helpers.
SIBLING_IMPORTS = frozenset({("profiler", "evaluator")})
# CLI modules outside the cli/ package (none since issue #21 moved them in); they would count as the cli layer.
CLI_MODULES: frozenset[str] = frozenset()
# Cycles that another issue's branch still has to remove. Each goes by moving its shared helper down; the
# test fails when one disappears, so this list only shrinks (empty since the built-in generator's kernel
# writers share _kernelbase instead of importing each other: issue #19).
KNOWN_CYCLES: frozenset[frozenset[str]] = frozenset()


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    type_only: bool


def module_names(src: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``package`` under ``src``."""
    out: dict[str, Path] = {}
    for path in sorted((src / package).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(src: Path, package: str) -> list[Import]:
    """Every import of one of ``package``'s modules by another, resolved to the module it names."""
    modules = module_names(src, package)
    found: list[Import] = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        finder = _ImportFinder()
        finder.visit(tree)
        for node, type_only in finder.found:
            for target in _targets(node, name, is_package, modules):
                if target != name and (target == package or target.startswith(package + ".")):
                    found.append(Import(name, target, node.lineno, type_only))
    return found


class _ImportFinder(ast.NodeVisitor):
    """Every import statement of a module, wherever it sits, and whether it is under ``if TYPE_CHECKING:``."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []
        self.type_only = False

    def visit_If(self, node: ast.If) -> None:
        if not _is_type_checking(node.test):
            self.generic_visit(node)
            return
        outer, self.type_only = self.type_only, True
        for stmt in node.body:
            self.visit(stmt)
        self.type_only = outer
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self.type_only))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found.append((node, self.type_only))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        return [_nearest_module(a.name, modules) for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = importer.split(".") if is_package else importer.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([node.module] if node.module else []))
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else _nearest_module(base, modules) for a in node.names]


def _nearest_module(name: str, modules: dict[str, Path]) -> str:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def layer_of(module: str) -> int:
    """The layer index of ``module``; raises for a package no layer names (add it to LAYERS)."""
    parts = module.split(".")
    key = "cli" if module in CLI_MODULES else (parts[1] if len(parts) > 1 else "")
    for i, names in enumerate(LAYERS):
        if key in names:
            return i
    raise KeyError(f"{module}: the package {key!r} is in no layer; add it to LAYERS in tests/test_layers.py")


def _package_of(module: str) -> str:
    parts = module.split(".")
    return "cli" if module in CLI_MODULES else (parts[1] if len(parts) > 1 else "")


def layer_violations(imports: Iterable[Import]) -> list[str]:
    """One line per import that points up a layer, or sideways into an independent sibling package."""
    out = []
    for imp in imports:
        low, high = layer_of(imp.imported), layer_of(imp.importer)
        src, dst = _package_of(imp.importer), _package_of(imp.imported)
        sideways = low == high and src != dst and (src, dst) not in SIBLING_IMPORTS and high != len(LAYERS) - 1
        if low > high or sideways:
            kind = "type-only import" if imp.type_only else "import"
            out.append(f"{imp.importer}:{imp.line} {kind} of {imp.imported} ({dst} may not be imported by {src})")
    return out


def private_crossings(imports: Iterable[Import]) -> list[str]:
    """Imports of another package's ``_private`` module: a package is used through its public names."""
    out = []
    for imp in imports:  # by folder: a CLI module inside memory/ may use memory's private modules
        if imp.importer.split(".")[:2] == imp.imported.split(".")[:2]:
            continue
        if any(part.startswith("_") for part in imp.imported.split(".")[1:]):
            out.append(f"{imp.importer}:{imp.line} imports {imp.imported}, private to {_package_of(imp.imported)}")
    return out


def import_cycles(imports: Iterable[Import]) -> set[frozenset[str]]:
    """Sets of files that import each other at run time, directly or through others (Tarjan's SCCs)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if not imp.type_only:
            graph.setdefault(imp.importer, set()).add(imp.imported)
            graph.setdefault(imp.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.add(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return imports_of(SRC, PACKAGE)


def test_every_module_belongs_to_a_layer() -> None:
    for module in module_names(SRC, PACKAGE):
        layer_of(module)


def test_imports_point_down(imports: list[Import]) -> None:
    assert len(imports) > 100  # the resolution found the package's imports (a broken walk would find none)
    assert layer_violations(imports) == []


def test_packages_use_each_others_public_names(imports: list[Import]) -> None:
    assert private_crossings(imports) == []


def test_no_import_cycles_between_files(imports: list[Import]) -> None:
    cycles = import_cycles(imports)
    new = sorted(sorted(c) for c in cycles - KNOWN_CYCLES)
    gone = sorted(sorted(c) for c in KNOWN_CYCLES - cycles)
    assert new == [], "files that import each other: move the shared helper down into a module both can import"
    assert gone == [], "a known cycle is gone: delete it from KNOWN_CYCLES"


BUILTIN = f"{PACKAGE}.agents.builtin."


def test_the_builtin_generator_has_no_cycles_even_through_type_only_imports(imports: list[Import]) -> None:
    """The built-in generator is a pipeline (trace -> partition -> kernels -> emit -> variants; the kernel
    families on _kernelbase): none of its modules names one that names it back, not even for a type hint
    (a protocol in the lower module breaks such a loop: _ir.Lowering, _hints' _Keyed). Issue #19."""
    inside = [Import(i.importer, i.imported, i.line, False) for i in imports
              if i.importer.startswith(BUILTIN) and i.imported.startswith(BUILTIN)]
    assert len(inside) > 30  # the walk found the package's own imports
    assert import_cycles(inside) == set(), "move what both need into a lower module (or a protocol there)"


def test_the_checker_finds_upward_imports_and_cycles(tmp_path: Path) -> None:
    """The contract can fail: a planted upward import (inside a function, and type-only) and a planted
    two-file cycle are reported; a type-only import never makes a cycle."""
    pkg = tmp_path / PACKAGE
    for sub in ("core", "graphs", "tools"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "core" / "a.py").write_text("def f():\n    from tritonsmith.graphs.b import g\n    return g\n")
    (pkg / "core" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tritonsmith.tools.t import T\n")
    (pkg / "graphs" / "b.py").write_text("from tritonsmith.graphs import d\n\ndef g():\n    return d\n")
    (pkg / "graphs" / "d.py").write_text("from . import b\n")
    (pkg / "tools" / "t.py").write_text("from tritonsmith.core.c import T2\nfrom tritonsmith.core._x import y\nT = 1\n")
    (pkg / "core" / "_x.py").write_text("y = 1\n")
    found = imports_of(tmp_path, PACKAGE)
    violations = layer_violations(found)
    assert any(v.startswith("tritonsmith.core.a:2 import of tritonsmith.graphs.b") for v in violations)
    assert any(v.startswith("tritonsmith.core.c:3 type-only import of tritonsmith.tools.t") for v in violations)
    assert import_cycles(found) == {frozenset({"tritonsmith.graphs.b", "tritonsmith.graphs.d"})}
    assert private_crossings(found) == ["tritonsmith.tools.t:2 imports tritonsmith.core._x, private to core"]
