"""How busy the machine is: the rule every wall-time benchmark here applies before a verdict."""

from __future__ import annotations

import os

__all__ = ["MAX_LOAD", "load_line", "no_verdict_reason"]

# Above this 1-minute load average a wall time measures the machine's other work as much as the code.
MAX_LOAD = 1.0


def load_line(when: str) -> tuple[float, str]:
    """The 1-minute load average and a line with the 1/5/15-minute ones and the core count."""
    one, five, fifteen = os.getloadavg()
    text = f"{when}: load average {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min), {os.cpu_count()} cores"
    return one, text


def no_verdict_reason(loads: list[float], quick: bool, what: str) -> str | None:
    """Why a run gives no verdict (the load went above :data:`MAX_LOAD`, or ``--quick``), or ``None``."""
    if max(loads) > MAX_LOAD:
        return (
            f"no verdict: the 1-minute load average reached {max(loads):.2f} (above {MAX_LOAD:.0f}) during "
            "the run, so these wall times measure the machine's other work as much as the code; rerun on "
            "an idle machine"
        )
    if quick:
        return f"no verdict: --quick runs too few, too small {what} for one"
    return None
