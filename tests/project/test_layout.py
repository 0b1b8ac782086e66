"""The layout shows the architecture: one package in layers, dev tools and tests apart.

Which layer may import which is import-linter's contract in pyproject.toml (`make lint`
runs it); here it is shown to catch an upward import, on a copy of the package.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO

PACKAGE = REPO / "src" / "lakehouse"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the `lakehouse` package found first in `package_parent`."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", "--config", str(REPO / "pyproject.toml")],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(package_parent)},
        capture_output=True,
        text=True,
    )


@pytest.mark.system
def test_the_layers_contract_holds_and_fails_on_an_upward_import(tmp_path):
    assert lint_imports(PACKAGE.parent).returncode == 0
    copy = tmp_path / "lakehouse"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "catalog" / "schemas.py"
    planted.write_text(planted.read_text() + "\nfrom lakehouse.drivers import pipeline\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "lakehouse.catalog.schemas -> lakehouse.drivers.pipeline" in done.stdout


def test_dag_files_import_only_the_airflow_layer():
    for dag in (REPO / "dags").glob("*.py"):
        for node in ast.walk(ast.parse(dag.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            ours = [n for n in names if n.split(".")[0] == "lakehouse"]
            assert all(n == "lakehouse.orchestration" for n in ours), (dag.name, ours)


def test_the_package_never_imports_the_developer_tooling():
    for module in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module.split(".")[0] not in ("dev", "benchmarks", "tests"), module


def test_the_production_image_ships_neither_dev_tools_nor_tests():
    dockerfile = (REPO / "Dockerfile").read_text()
    copied = re.findall(r"^COPY (?!--from)(\S+)", dockerfile, flags=re.MULTILINE)
    assert not {"dev", "tests", "benchmarks", ".", "requirements-dev.txt"} & {
        c.rstrip("/") for c in copied
    }
    runtime = (REPO / "requirements.txt").read_text().lower()
    for tool in ("pytest", "ruff", "mypy", "hypothesis"):
        assert f"\n{tool}==" not in runtime, f"{tool} is a development tool"


def test_every_package_declares_its_public_modules():
    """A package says what it is for and lists its modules (the catalog's package is the
    catalog itself: its definitions are its public surface)."""
    for init in PACKAGE.rglob("__init__.py"):
        tree = ast.parse(init.read_text())
        where = init.relative_to(REPO)
        assert ast.get_docstring(tree), f"{where} says what the package is for"
        if any(isinstance(node, ast.ClassDef) for node in tree.body):
            continue
        names = [
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        ]
        assert "__all__" in names, f"{where} lists its public surface in __all__"
