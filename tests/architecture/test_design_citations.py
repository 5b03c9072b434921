"""Citations of the maintainer docs resolve, and nothing cites a document outside the repository.

Code, tests and docs explain themselves by pointing at ``docs/design/<page>.md#<anchor>``
(docs/design/layering.md#guard-rails). A citation may list more anchors of the same page after
it (``docs/design/wire.md#env-session, #env-requests``); each must exist on that page, as an
explicit ``<a id="...">`` or as the slug of a heading.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design"
SEARCHED = ("rlmesh_gym", "tests", "docs", "benchmarks", "notebooks", "scripts", "README.md", "Makefile")
SUFFIXES = {".py", ".md", ".ipynb", ".toml", ".txt", ""}

CITATION = re.compile(
    r"docs/design/(?P<page>[\w-]+)\.md(?P<anchors>(?:#[\w-]+)(?:(?:\s*,\s*|\s+and\s+)#[\w-]+)*)?"
)
ANCHOR_ID = re.compile(r"<a id=\"([\w-]+)\"></a>")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.MULTILINE)
# Section signs and the spec directory of another tree were how citations left the repository.
OUTSIDE = re.compile("\u00a7|shared/spec|shared/design|shared/seed")


def _sources() -> list[Path]:
    """The repository's text files, without this one (its fixtures cite pages that do not exist)."""
    files: list[Path] = []
    for name in SEARCHED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix in SUFFIXES
                and "_generated" not in p.parts
                and "__pycache__" not in p.parts
            ]
    this = Path(__file__).resolve()
    return [path for path in files if path.resolve() != this]


def heading_slug(heading: str) -> str:
    """The anchor a Markdown renderer gives a heading (lower case, punctuation dropped)."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def page_anchors(text: str) -> set[str]:
    return set(ANCHOR_ID.findall(text)) | {heading_slug(h) for h in HEADING.findall(text)}


def citations(text: str) -> list[tuple[str, str | None]]:
    """(page, anchor or None) for every design-doc citation in ``text``."""
    found: list[tuple[str, str | None]] = []
    for match in CITATION.finditer(text):
        anchors = re.findall(r"#([\w-]+)", match.group("anchors") or "")
        found += [(match.group("page"), anchor) for anchor in anchors] or [(match.group("page"), None)]
    return found


def unresolved(files: list[Path], design: Path, root: Path = ROOT) -> list[str]:
    """Every citation among ``files`` whose page or anchor does not exist under ``design``."""
    pages = {p.stem: page_anchors(p.read_text(encoding="utf-8")) for p in design.glob("*.md")}
    problems = []
    for path in files:
        for page, anchor in citations(path.read_text(encoding="utf-8", errors="replace")):
            if page not in pages:
                problems.append(f"{path.relative_to(root)}: docs/design/{page}.md does not exist")
            elif anchor is not None and anchor not in pages[page]:
                problems.append(
                    f"{path.relative_to(root)}: docs/design/{page}.md has no anchor #{anchor} "
                    f"(it has: {', '.join(sorted(pages[page]))})"
                )
    return problems


def test_the_design_pages_exist():
    assert {p.name for p in DESIGN.glob("*.md")} >= {"layering.md", "runtime.md", "wire.md"}


def test_every_design_citation_resolves():
    files = _sources()
    assert sum(len(citations(p.read_text(encoding="utf-8", errors="replace"))) for p in files) > 40
    assert unresolved(files, DESIGN) == []


def test_nothing_cites_a_document_outside_the_repository():
    hits = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == []


@pytest.mark.parametrize(
    ("heading", "slug"),
    [("Event order", "event-order"), ("The env `Join` stream", "the-env-join-stream"), ("A, b: c", "a-b-c")],
)
def test_heading_slugs(heading, slug):
    assert heading_slug(heading) == slug


def test_a_broken_citation_is_reported(tmp_path):
    design = tmp_path / "design"
    design.mkdir()
    (design / "page.md").write_text('# Page\n\n<a id="kept"></a>\n## Some heading\n')
    source = tmp_path / "module.py"
    source.write_text(
        "docs/design/page.md#kept, #some-heading and #gone; docs/design/other.md#x; docs/design/page.md\n"
    )
    assert unresolved([source], design, tmp_path) == [
        "module.py: docs/design/page.md has no anchor #gone (it has: kept, page, some-heading)",
        "module.py: docs/design/other.md does not exist",
    ]
