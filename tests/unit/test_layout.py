"""The layout shows the architecture: packages by role, no import cycles, dev tools apart."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.helpers import REPO

PACKAGES = ("jobs", "include", "dev")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Every module of our packages and the modules of ours it imports, lazily or not."""
    modules = {module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            found |= {t for t in targets if t in modules and t != name}
        graph[name] = found
    return graph


def test_no_module_imports_itself_through_others():
    graph = imports()
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycle = [*trail[trail.index(target) :], target] if target in trail else [target]
                raise AssertionError(f"import cycle: {' -> '.join(cycle)}")
            if target not in state:
                visit(target, [*trail, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])


def test_runtime_packages_never_import_the_developer_tooling():
    for module, targets in imports().items():
        if module.split(".")[0] in ("jobs", "include"):
            assert not any(t.split(".")[0] == "dev" for t in targets), module


def test_the_production_image_ships_neither_dev_tools_nor_tests():
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(\S+)", dockerfile, flags=re.MULTILINE)
    assert not {"dev", "tests", "benchmarks", ".", "requirements-dev.txt"} & {
        c.rstrip("/") for c in copied
    }
    runtime = (REPO / "requirements.txt").read_text().lower()
    for tool in ("pytest", "ruff", "mypy", "hypothesis"):
        assert f"\n{tool}==" not in runtime, f"{tool} is a development tool"
    # The development lock is resolved under the runtime lock's versions.
    assert "-c requirements.txt" in (REPO / "requirements-dev.txt").read_text()


def test_every_package_declares_its_public_modules():
    for init in [p for pkg in PACKAGES for p in (REPO / pkg).rglob("__init__.py")]:
        tree = ast.parse(init.read_text())
        where = init.relative_to(REPO)
        assert ast.get_docstring(tree), f"{where} says what the package is for"
        names = [
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        ]
        assert "__all__" in names, f"{where} lists its public surface in __all__"
