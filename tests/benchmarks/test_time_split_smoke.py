"""``benchmarks/time_split.py`` runs end to end: the load average is printed before and after,
both sides' timed parts are found (the hand loop's ``SyncVectorEnv.step``, ``evaluate()``'s
SAME_STEP loop and the module's forward), and the difference column is evaluate minus hand."""

from __future__ import annotations

import re

import pytest
from _script_run import LOAD_LINE, run_script


@pytest.mark.torch
@pytest.mark.timeout(600)  # a hang guard: a busy machine makes the runs slow, never wrong
def test_a_small_split_times_every_part_of_both_sides():
    lines = run_script("time_split.py", "--lanes", "2", "--repeats", "1", "--env-steps", "100")
    assert re.fullmatch(f"before: {LOAD_LINE}", lines[0]) and re.fullmatch(f"after: {LOAD_LINE}", lines[-1])
    part = r"(total|sub-env step|forward|before|loop|after) +-?\d"
    rows = {line.split()[0]: line for line in lines if re.match(part, line)}
    assert list(rows) == ["total", "sub-env", "forward", "before", "loop", "after"]
    for name, line in rows.items():
        hand, ours, difference = (float(value) for value in line.split()[-3:])
        assert difference == pytest.approx(ours - hand, abs=0.011), line
        if name in ("total", "sub-env", "forward", "before"):
            assert hand > 0 and ours > 0, line  # each side's timed calls were found
