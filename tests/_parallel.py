"""How ``make test`` shares the suite among pytest-xdist workers (used by the repository's conftest.py).

``make test`` runs ``pytest -n auto --dist loadfile``. A work unit is one file: a test module runs
whole on one worker, in order, so its module fixtures are built once; a page of the docs runs whole
on one worker, so its examples share their namespace in page order. Pages that name the same fixed
local port (``127.0.0.1:50051``: a server a page starts) are one unit, so they do not wait for each
other's port lock (tests/_doc_examples.py) on two workers.

Files holding ``slow`` tests start first: the quick files then fill in around them, instead of a
long file picked up last running on alone while the other workers idle.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from _doc_examples import fixed_ports
from xdist.scheduler import LoadFileScheduling


def page_units(pages: Iterable[str], root: Path) -> dict[str, str]:
    """page (a path relative to ``root``) -> its work unit: pages sharing a fixed local port share one."""
    ordered = sorted(set(pages))
    parent = {page: page for page in ordered}  # union-find: pages linked by a shared port

    def unit(page: str) -> str:
        while parent[page] != page:
            page = parent[page]
        return page

    first_with_port: dict[int, str] = {}
    for page in ordered:
        for port in fixed_ports((root / page).read_text(encoding="utf-8")):
            other = first_with_port.setdefault(port, page)
            parent[unit(page)] = unit(other)
    return {page: unit(page) for page in ordered}


def work_unit(nodeid: str, page_unit: dict[str, str]) -> str:
    """The work unit of a test: its file, or for a page of the docs its port-sharing unit."""
    file = nodeid.split("::", 1)[0]
    return page_unit.get(file, file)


class FileScheduling(LoadFileScheduling):
    """``--dist loadfile`` with pages sharing a fixed port as one unit, in collection order."""

    def __init__(self, config: pytest.Config, log=None) -> None:
        super().__init__(config, log)
        self.config.option.loadscopereorder = False  # keep the slow-first order of the collection
        self._page_unit: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._page_unit is None:  # the collection is complete once scheduling starts
            files = {other.split("::", 1)[0] for other in self.collection or ()}
            pages = (file for file in files if file.endswith(".md"))
            self._page_unit = page_units(pages, self.config.rootpath)
        return work_unit(nodeid, self._page_unit)


def slow_files_first(items: list[pytest.Item]) -> None:
    """Reorder ``items`` in place: the files holding a ``slow`` test first, each file's tests in order."""
    with_slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in with_slow)  # a stable sort
