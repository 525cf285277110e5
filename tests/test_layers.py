"""The package's layering: every import of a mixfold module points down (or sideways without a
cycle), and no mixfold module is imported inside a function (a local import of our own code only
ever hides a cycle; optional engines -- pyspark, torch, ... -- are not mixfold modules)."""

from __future__ import annotations

import ast
from pathlib import Path

import mixfold

SRC = Path(mixfold.__file__).parent

#: Bottom to top; a module belongs to the layer of its longest matching prefix.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("contracts and arithmetic", ("mixfold.errors", "mixfold.decomposition", "mixfold.precision",
                                  "mixfold.capabilities", "mixfold.options")),
    ("compute", ("mixfold.compute",)),
    ("families", ("mixfold.families",)),
    ("data formats", ("mixfold.io", "mixfold.spec")),
    ("backends", ("mixfold.backends", "mixfold.io.tables", "mixfold.checkpoint")),
    ("parallel", ("mixfold.parallel",)),
    ("fit", ("mixfold.acceleration", "mixfold.dispatch", "mixfold.fit", "mixfold.online")),
    ("front", ("mixfold", "mixfold.__main__", "mixfold.cli", "mixfold.sklearn", "mixfold.plots",
               "mixfold.examples")),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int:
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, rank = len(p), i
    assert rank is not None, f"{module} is in no layer: add it to LAYERS"
    return rank


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """(imported mixfold module, line, inside a function) for every import in ``path``."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path) if path.name == "__init__.py" else \
        module_name(path).rpartition(".")[0]
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            local = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, local) for a in child.names
                           if a.name.split(".")[0] == "mixfold")
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package.split(".")[:len(package.split(".")) - child.level + 1]
                                    + ([base] if base else []))
                if base.split(".")[0] == "mixfold":
                    out.append((base, child.lineno, local))
            visit(child, local)

    visit(tree, False)
    return out


def import_graph() -> dict[str, list[tuple[str, int, bool]]]:
    return {module_name(p): imports_of(p) for p in sorted(SRC.rglob("*.py"))}


def test_every_import_points_down_the_layers():
    upward = []
    for module, edges in import_graph().items():
        for target, line, _ in edges:
            if layer_of(target) > layer_of(module):
                upward.append(f"{module}:{line} imports {target} "
                              f"({LAYERS[layer_of(module)][0]} -> {LAYERS[layer_of(target)][0]})")
    assert not upward, "\n".join(upward)


#: mixfold modules that import an optional engine at their top, so are loaded on first use
OPTIONAL_ENGINE_MODULES = {"mixfold.compute.numba_kernels", "mixfold.compute.numba_lda",
                           "mixfold.compute.numba_bands", "mixfold.compute.numba_screen"}


def test_no_mixfold_module_is_imported_inside_a_function():
    local = [f"{module}:{line} imports {target}" for module, edges in import_graph().items()
             for target, line, in_function in edges
             if in_function and target not in OPTIONAL_ENGINE_MODULES]
    assert not local, "\n".join(local)


def test_the_module_graph_has_no_cycle():
    graph = {m: sorted({t for t, _, _ in edges if t != m}) for m, edges in import_graph().items()}
    state: dict[str, int] = {}
    cycles = []

    def walk(m: str, stack: list[str]) -> None:
        state[m] = 1
        for t in graph.get(m, ()):
            if t not in graph:
                continue
            if state.get(t) == 1:
                cycles.append(" -> ".join(stack[stack.index(t):] + [t]))
            elif t not in state:
                walk(t, stack + [t])
        state[m] = 2

    for m in graph:
        if m not in state:
            walk(m, [m])
    # a package's __init__ re-exporting its own submodules is not a cycle of concepts
    real = [c for c in cycles if not all(p.startswith(c.split(" -> ")[0].rpartition(".")[0] or
                                                      c.split(" -> ")[0]) for p in c.split(" -> "))]
    assert not real, "\n".join(real)


def test_the_layer_table_covers_every_module():
    for module in import_graph():
        layer_of(module)


def test_every_source_folder_is_a_regular_package():
    # a folder without __init__.py is a namespace package: setuptools' find leaves it out of a
    # wheel, and pytest's doctest collection imports its modules as top-level ones (numba then
    # caches a kernel under the wrong module name, and every later process fails to load it)
    missing = [str(d.relative_to(SRC.parent)) for d in sorted({p.parent for p in SRC.rglob("*.py")})
               if not (d / "__init__.py").exists()]
    assert missing == []


def test_every_compute_module_has_its_test_file():
    # tests/compute mirrors compute/: a module's contract is checked where a reader looks for it
    tests = Path(__file__).parent / "compute"
    missing = [p.name for p in sorted((SRC / "compute").glob("*.py"))
               if p.name != "__init__.py" and not (tests / f"test_{p.name}").exists()]
    assert missing == []
