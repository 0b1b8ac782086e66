"""The documentation lives in the repository: every link resolves inside it."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.helpers import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors(text: str) -> set[str]:
    """GitHub's anchors of a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_points_to_a_file_of_the_repository(page):
    for target in LINK.findall(page.read_text()):
        assert "://" not in target and not target.startswith("mailto:"), (page.name, target)
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.is_relative_to(REPO), (page.name, target)
        assert resolved.exists(), (page.name, target)
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved.read_text()), (page.name, target)


def test_the_docs_hold_the_contract_the_architecture_and_the_runbook():
    for name in ("contract.md", "architecture.md", "operations.md", "benchmarks.md"):
        assert (REPO / "docs" / name).is_file(), name
    readme = (REPO / "README.md").read_text()
    assert "../shared" not in readme and "docs/contract.md" in readme


def version() -> str:
    """The package's version, major.minor, as pyproject.toml declares it."""
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    return ".".join(declared.split(".")[:2])


def test_the_readme_states_the_version_and_its_upgrade_notes_reach_it():
    readme = (REPO / "README.md").read_text()
    assert f"Status ({version()})" in readme, "README's status names another version"
    upgrading = readme.split("## Upgrading", 1)[1].split("\n## ", 1)[0]
    assert f"to {version()}" in upgrading, "README's upgrade notes stop before this version"


def layout() -> dict[str, str]:
    """The package's entries in architecture.md's "Layout, file by file": the path of each
    module and package (one entry per line; its description follows on the line and on
    lines indented past the entries)."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## Layout, file by file", 1)[1].split("```")[1]
    entries: dict[str, str] = {}
    parents: list[str] = []
    inside = False
    for line in block.splitlines():
        match = re.match(r"^( *)([\w.]+(?:/|\.py))(?: {2,}(.*))?$", line)
        if line.startswith("src/lakehouse/"):
            inside = True
            continue
        if not inside or not line.strip():
            continue
        if match is None or len(match[1]) > 8:  # a description's next line
            continue
        depth = len(match[1]) // 2
        if depth == 0:
            break  # the next top-level folder: the package's entries ended
        parents[depth - 1 :] = [match[2]]
        entries["".join(parents)] = match[3] or ""
    return entries


def test_the_architecture_names_every_module_of_the_package_and_nothing_else():
    package = REPO / "src" / "lakehouse"
    present = {
        path.relative_to(package).as_posix() + ("/" if path.is_dir() else "")
        for path in package.rglob("*")
        if "__pycache__" not in path.parts
        and (path.suffix == ".py" or (path / "__init__.py").is_file())
        and (path.name != "__init__.py" or path.parent.name == "catalog")
    }
    named = set(layout())
    assert sorted(present - named) == [], "in src/lakehouse/, not in docs/architecture.md"
    assert sorted(named - present) == [], "in docs/architecture.md, not in src/lakehouse/"


def test_the_architecture_diagram_draws_the_import_contracts_layers():
    """The Packages diagram's chain of layers is import-linter's, top to bottom."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = (c for c in config["contracts"] if c["containers"] == ["lakehouse"])
    layers = [name.strip() for entry in contract["layers"] for name in entry.split("|")]
    text = (REPO / "docs" / "architecture.md").read_text()
    packages = text.split("## Packages", 1)[1]
    diagram = packages.split("```mermaid", 1)[1].split("```", 1)[0]
    nodes = dict(re.findall(r"^\s*(\w+)\[\"([^\"<]+)", diagram, flags=re.MULTILINE))
    chain = max(diagram.splitlines(), key=lambda line: line.count("-->"))
    drawn = [
        name.removesuffix("/").removesuffix(".py")
        for node in re.findall(r"\w+", chain)
        for name in nodes[node].split(", ")
    ]
    assert drawn == layers[layers.index("samples") :], drawn
