"""docs/architecture.md's one-way imports, held against the code: each package imports only the
packages below it (every import, at the top of a module or inside a function)."""

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
