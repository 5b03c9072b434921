"""What the machine is and how busy: the rule every wall-time benchmark here applies before a
verdict, and the software versions every figure depends on."""

from __future__ import annotations

import os
import platform
from importlib import metadata

__all__ = ["MAX_LOAD", "load_line", "no_verdict_reason", "software_line"]

# The packages whose versions move both sides' figures (a count or a time taken with other
# versions is not comparable).
_PACKAGES = ("numpy", "torch", "gymnasium", "stable-baselines3")

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


def software_line() -> str:
    """The interpreter, the versions of the packages every contender runs, and the processor."""
    versions = []
    for package in _PACKAGES:
        try:
            versions.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{package} not installed")
    processor = _processor_name() or platform.machine()
    return f"software: Python {platform.python_version()}, {', '.join(versions)}; processor {processor}"


def _processor_name() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None
