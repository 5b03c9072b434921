"""The harness that runs README.md and docs/ examples (tests/_doc_examples.py) fails broken examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from _doc_examples import _Page, fixed_ports, normalize_output

TESTS = Path(__file__).resolve().parent.parent

PAGE = textwrap.dedent(
    """\
    # A page

    ```python
    x = 2
    print(x * 21)
    ```

    ```text
    42
    ```

    ```python
    print(x + 1)        # the namespace carries over from the block above
    ```

    ```text
    4
    ```

    ```python
    print(undefined_name)
    ```

    ```bash
    echo fine > written.txt && test -f written.txt
    ```

    ```bash
    false
    ```

    ```console
    $ echo hello
    hello
    $ echo world
    planet
    ```

    <!-- skip: next "shown, not run" -->
    ```python
    raise SystemExit("a skipped example must not run")
    ```

    ```
    a block without a language is shown, not run
    ```
    """
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    """Each example's line in PAGE -> PASSED / FAILED / SKIPPED, from a real pytest run."""
    root = tmp_path_factory.mktemp("docs")
    (root / "page.md").write_text(PAGE)
    (root / "conftest.py").write_text(
        "from _doc_examples import doc_examples\n"
        f"pytest_collect_file = doc_examples(patterns=['*.md'], path={str(root)!r}).pytest()\n"
    )
    (root / "pytest.ini").write_text("[pytest]\n")
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "-c",
            str(root / "pytest.ini"),
            str(root),
        ],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(TESTS)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    results = {
        int(match["line"]): match["outcome"]
        for match in re.finditer(
            r"page\.md::line:(?P<line>\d+),column:1 (?P<outcome>PASSED|FAILED|SKIPPED)", completed.stdout
        )
    }
    assert results, completed.stdout + completed.stderr
    return results


def _fence_line(first_line: str) -> int:
    """The line of the fence that opens the block whose first line is ``first_line``."""
    lines = PAGE.splitlines()
    return next(i for i, line in enumerate(lines, start=1) if line == first_line) - 1


def test_an_example_whose_output_matches_passes(outcomes):
    assert outcomes[_fence_line("x = 2")] == "PASSED"


def test_an_example_whose_output_differs_fails(outcomes):
    assert (
        outcomes[_fence_line("print(x + 1)        # the namespace carries over from the block above")]
        == "FAILED"
    )


def test_a_broken_example_fails(outcomes):
    assert outcomes[_fence_line("print(undefined_name)")] == "FAILED"


def test_a_failing_shell_block_fails_and_a_working_one_passes(outcomes):
    assert outcomes[_fence_line("echo fine > written.txt && test -f written.txt")] == "PASSED"
    assert outcomes[_fence_line("false")] == "FAILED"


def test_a_console_transcript_with_a_wrong_output_fails(outcomes):
    assert outcomes[_fence_line("$ echo hello")] == "FAILED"


def test_skipped_and_unlabelled_blocks_do_not_run(outcomes):
    assert outcomes[_fence_line('raise SystemExit("a skipped example must not run")')] == "SKIPPED"
    assert _fence_line("a block without a language is shown, not run") not in outcomes


def test_run_to_run_variation_is_ignored_and_nothing_else():
    page = "  env-steps/s       35,675\nid 0f52f088-13ba-4cd8-9da5-5903ebfd7b4f  500.0  \n"
    run = "  env-steps/s       12,001\nid 8c77b523-8411-4f33-a8b6-04e309bda733  500.0\n"
    assert normalize_output(page) == normalize_output(run)
    assert normalize_output("mean return  500.00") != normalize_output("mean return  499.00")


def test_a_block_that_names_a_fixed_port_runs_holding_that_ports_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the port locks live
    lock = tmp_path / "rlmesh-gym-port-50999.lock"
    probe = f"flock --nonblock {lock} true && echo free || echo held"
    page = _Page()
    try:
        assert fixed_ports("serve 127.0.0.1:50999 and localhost:50998, not 127.0.0.1:0") == {50999, 50998}
        assert page.shell(f"{probe}  # serves on 127.0.0.1:50999").stdout.strip() == "held"
        assert page.shell(probe).stdout.strip() == "free"  # released after the block, not named here
    finally:
        page.close()
