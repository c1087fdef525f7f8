"""Every relative link and picture in the README and docs/ names a file in this repository
(issue 35: the README pointed outside it)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                *(ROOT / "data").rglob("README.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(page: Path) -> list[str]:
    """The targets of ``page``'s markdown links and pictures, code blocks left out."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    return LINK.findall(text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_in_the_repository(page):
    bad = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor on the same page
        path = (page.parent / target.split("#")[0]).resolve()
        if not path.is_relative_to(ROOT) or not path.exists():
            bad.append(target)
    assert not bad, f"{page.relative_to(ROOT)}: {bad}"


def test_the_readme_is_short_and_runs_what_ci_runs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    test_cmd = ("python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && "
                ".venv/bin/python -m pytest")
    assert test_cmd in readme
    assert test_cmd.replace("pip install", "pip install -q") in (ROOT / ".ci/run").read_text()
    assert "../shared" not in readme  # no path outside the repository


def test_the_link_finder_sees_links_and_pictures():
    p = ROOT / "README.md"
    assert "docs/cli.md" in links(p) and "docs/dashboard_history.png" in links(p)
