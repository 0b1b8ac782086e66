"""The documentation lives in the repository: every link resolves inside it."""

from __future__ import annotations

import re

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
