"""docs/architecture.md's one-way imports, held against the code: each package imports only the
packages below it (every import, at the top of a module or inside a function), and the modules'
top-level imports form no cycle."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_tesserabench"
GLUE = {"plugin", "session", "passes_hooks", "outputs", "cli"}  # the pytest glue and the command: nobody's dependency
ALLOWED = {
    "record": set(),
    "machine": {"record"},
    "inspect": {"record"},
    "measure": {"record", "machine", "inspect", "options", "crash"},
    "gate": {"record", "machine", "inspect"},
    "history": {"record", "gate", "options"},
    "processes": {"record", "machine", "measure", "gate", "options", "crash"},
    "ab": {"record", "measure", "processes", "gate", "options"},
    "tuning": {"record", "machine", "measure", "inspect", "gate", "options"},
    "distributed": {"machine"},
    "report": {"record", "machine", "inspect", "gate", "history", "processes", "ab", "options"},
}


def imported_parts(path: Path) -> set[str]:
    """The project's packages and top-level modules ``path`` imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pytest_tesserabench"):
            parts = node.module.split(".")
            out |= {alias.name for alias in node.names} if len(parts) == 1 else {parts[1]}
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("pytest_tesserabench.")}
    return out


def test_each_package_imports_only_the_packages_below_it():
    wrong = {}
    for package, allowed in ALLOWED.items():
        for module in sorted((PACKAGE / package).rglob("*.py")):
            extra = imported_parts(module) - allowed - {package}
            if extra:
                wrong[str(module.relative_to(PACKAGE))] = sorted(extra)
    assert not wrong, f"imports against docs/architecture.md's layering: {wrong}"


def test_no_package_imports_the_pytest_glue():
    wrong = {}
    for module in sorted(PACKAGE.rglob("*.py")):
        if module.parent == PACKAGE:
            continue
        extra = imported_parts(module) & GLUE
        if extra:
            wrong[str(module.relative_to(PACKAGE))] = sorted(extra)
    assert not wrong


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(tree: ast.Module):
    """The imports that run when the module is imported: not those in functions or under TYPE_CHECKING."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules its top-level imports run (a package's
    ``__init__`` included: it runs before any of its modules; the importer's own packages excluded)."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out = set()
        for node in top_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):
                    module = ".".join(parts[:i])
                    if module in files and module != name and not name.startswith(module + "."):
                        out.add(module)
        graph[name] = out
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycles_finds_a_cycle_and_nothing_else():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == []


def test_import_graph_reads_the_package():
    graph = {name.removeprefix("pytest_tesserabench."): edges for name, edges in import_graph().items()}
    plugin = {name.removeprefix("pytest_tesserabench.") for name in graph["plugin"]}
    assert {"options", "record.held_lock", "record"} <= plugin  # a package's __init__ runs before its modules
    assert "pytest_tesserabench.tuning.space" in graph["tuning.autotuned"]  # from .space import ...
    assert "pytest_tesserabench.gate.config" in graph["gate"]
    assert "pytest_tesserabench.gate" not in graph["gate.pipeline"]  # its own package: already importing


def test_top_level_imports_form_no_cycle():
    """A cycle imports fine or fails (a name not yet defined) by which module loads first."""
    found = cycles(import_graph())
    assert not found, f"modules that import each other at the top, through these: {found}"
