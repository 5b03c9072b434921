"""``benchmarks/throughput.py --quick`` runs end to end: the load average is printed before and
after, the software versions beside it, every cell has a ratio for every contender, and no
verdict is printed for a quick run."""

from __future__ import annotations

import re

import pytest
from _script_run import LOAD_LINE, run_script


@pytest.mark.torch
@pytest.mark.sb3
@pytest.mark.timeout(600)  # a hang guard: a busy machine makes the runs slow, never wrong
def test_the_quick_run_prints_the_load_and_every_cell_but_no_verdict():
    lines = run_script("throughput.py", "--quick", "--lanes", "1", "2", "--workloads", "short")
    assert re.fullmatch(f"before: {LOAD_LINE}", lines[0]) and re.fullmatch(f"after: {LOAD_LINE}", lines[-2])
    versions = (
        r"software: Python \d+\.\d+\.\d+, numpy [^,]+, torch [^,]+, gymnasium [^,]+, "
        r"stable-baselines3 [^;]+; processor .+"
    )
    assert re.fullmatch(versions, lines[1]), lines[1]
    rows = [line for line in lines if line.startswith("short")]
    assert [row.split()[1] for row in rows] == ["1", "2"]
    ratio = r"\d+\.\d\dx \(\d+\.\d\d-\d+\.\d\d\)"
    assert all(len(re.findall(ratio, row)) == 2 for row in rows)  # sb3 and evaluate
    assert lines[-1].startswith("no verdict: ")
