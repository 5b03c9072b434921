"""How ``make test`` shares the suite among pytest-xdist workers (tests/_parallel.py): whole files,
pages sharing a fixed port together, the files with slow tests first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _parallel import page_units, slow_files_first, work_unit

TESTS = Path(__file__).resolve().parents[1]


def _pages(root: Path, **texts: str) -> list[str]:
    for name, text in texts.items():
        (root / f"{name}.md").write_text(text, encoding="utf-8")
    return [f"{name}.md" for name in texts]


def test_pages_that_share_a_fixed_port_are_one_unit_even_through_a_third_page(tmp_path):
    pages = _pages(
        tmp_path,
        a="serve on 127.0.0.1:50051",
        b="eval 127.0.0.1:50051 with a model on localhost:50052",
        c="and [::1]:50052 again",
        d="127.0.0.1:50061, a port of its own",
        e="127.0.0.1:0 asks for any free port",
        f="127.0.0.1:0 as well",
    )
    units = page_units(pages, tmp_path)
    assert units["a.md"] == units["b.md"] == units["c.md"]
    assert len({units["a.md"], units["d.md"], units["e.md"], units["f.md"]}) == 4


def test_a_test_module_is_its_file_and_a_page_its_unit():
    units = {"docs/serving.md": "README.md", "README.md": "README.md"}
    assert work_unit("tests/serve/test_fleet.py::test_one[2]", units) == "tests/serve/test_fleet.py"
    assert work_unit("tests/x/test_y.py::TestZ::test_w", units) == "tests/x/test_y.py"
    doctest = "rlmesh_gym/spaces/codec.py::rlmesh_gym.spaces.codec"
    assert work_unit(doctest, units) == "rlmesh_gym/spaces/codec.py"
    assert work_unit("docs/serving.md::line:17,column:1", units) == "README.md"
    assert work_unit("docs/spaces.md::line:7,column:1", units) == "docs/spaces.md"


@dataclass
class _Item:
    path: Path
    name: str
    markers: set[str] = field(default_factory=set)

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def test_files_with_a_slow_test_start_first_and_keep_their_order():
    items = [
        _Item(Path("a.py"), "a1"),
        _Item(Path("b.py"), "b1"),
        _Item(Path("b.py"), "b2", {"slow"}),
        _Item(Path("c.py"), "c1"),
        _Item(Path("d.md"), "d1", {"slow"}),
        _Item(Path("d.md"), "d2", {"slow"}),
    ]
    slow_files_first(items)  # type: ignore[arg-type]
    assert [item.name for item in items] == ["b1", "b2", "d1", "d2", "a1", "c1"]


@pytest.mark.slow
def test_under_xdist_pages_sharing_a_port_run_on_one_worker_in_page_order(tmp_path):
    # Two pages on one port and two test modules, on two real workers with the repository's hooks.
    (tmp_path / "conftest.py").write_text(
        textwrap.dedent(
            """\
            import pytest
            from _doc_examples import doc_examples
            from _parallel import FileScheduling

            pytest_collect_file = doc_examples(patterns=["*.md"], path=ROOT).pytest()

            @pytest.hookimpl(tryfirst=True)
            def pytest_xdist_make_scheduler(config, log):
                return FileScheduling(config, log)
            """
        ).replace("ROOT", repr(str(tmp_path)))
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    block = "```python\nstep = globals().get('step', 0) + 1\nprint(step)\n```\n\n```text\n{}\n```\n\n"
    for page in ("one", "two"):
        text = f"Serves on 127.0.0.1:50051.\n\n{block.format(1)}{block.format(2)}"
        (tmp_path / f"{page}.md").write_text(text)
    for module in ("test_p", "test_q"):
        (tmp_path / f"{module}.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    ran = re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", completed.stdout)
    workers: dict[str, set[str]] = {}
    for worker, nodeid in ran:
        workers.setdefault(nodeid.split("::")[0], set()).add(worker)
    assert sorted(workers) == ["one.md", "test_p.py", "test_q.py", "two.md"], completed.stdout
    assert all(len(used) == 1 for used in workers.values()), ran  # every file whole on one worker
    assert workers["one.md"] == workers["two.md"], ran  # the port-sharing pages together
