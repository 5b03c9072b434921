"""Instructions ``evaluate()`` executes against the hand-written loop, under valgrind's callgrind.

A count of executed instructions does not depend on what else the machine runs, so unlike
``throughput.py`` this needs no idle machine. For each workload (long: 500-step episodes;
short: about 9 steps, see ``_cartpole_contenders.py``) and lane count N (1 and 8), one
process run under callgrind evaluates the same K episodes three times with each contender
(the hand loop and ``evaluate()`` with its defaults); the count of runs 2 and 3 (three runs
minus the first, in one process) leaves out imports, first-call set-up and caches. Counts come
from callgrind client requests (zero, then dump after run 1 and after run 3), through a
ten-line C helper compiled here with the system's ``callgrind.h``.

The ratio is ``evaluate()``'s count over the hand loop's for the same episodes (lower is
better); the goal is at most 1.05x. The hand loop resets its lanes with ``evaluate()``'s seeds,
so both count the same episodes; a row whose counted env-steps differ says so.

CPython under callgrind runs about 50 times slower, so this takes a few minutes on an idle
machine (imports alone take about two); ``--quick`` runs short episodes only, fewer of them
(a smoke test).

    python benchmarks/instructions.py             # long and short, N in {1, 8}
    python benchmarks/instructions.py --quick
    python benchmarks/instructions.py --lanes 8 --workloads short
"""

from __future__ import annotations

import argparse
import ctypes
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _machine import load_line, software_line

GOAL = 1.05
SIDES = ("hand", "evaluate")
MARKER_SOURCE = r"""
#include <valgrind/callgrind.h>
void rlmesh_bench_zero(void) { CALLGRIND_ZERO_STATS; }
void rlmesh_bench_dump(const char *label) { CALLGRIND_DUMP_STATS_AT(label); }
"""

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8], help="lane counts N")
parser.add_argument("--workloads", nargs="+", default=None, choices=["long", "short"])
parser.add_argument("--env-steps", type=int, default=None, help="counted env-steps per run (default 500)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--quick", action="store_true", help="short episodes only, 100 env-steps: a smoke test")
parser.add_argument("--child", metavar="MARKER_LIBRARY", help=argparse.SUPPRESS)  # the run under callgrind
args = parser.parse_args()
env_steps = args.env_steps if args.env_steps is not None else (100 if args.quick else 500)
workloads = args.workloads or (["short"] if args.quick else ["long", "short"])


def child(marker_library: str) -> None:
    """Run every cell three times per contender, dumping callgrind's counts after runs 1 and 3."""
    from _cartpole_contenders import episodes_for, policy_for, run_evaluate, run_hand

    marker = ctypes.CDLL(marker_library)
    runners = {"hand": run_hand, "evaluate": run_evaluate}
    for workload in workloads:
        module = policy_for(workload)
        for lanes in args.lanes:
            episodes = episodes_for(workload, lanes, env_steps)
            for side in SIDES:
                run = runners[side]
                marker.rlmesh_bench_zero()
                steps = run(module, lanes, episodes, args.seed)
                marker.rlmesh_bench_dump(f"{workload} {lanes} {side} first".encode())
                steps_again = [run(module, lanes, episodes, args.seed) for _ in range(2)]
                marker.rlmesh_bench_dump(f"{workload} {lanes} {side} later".encode())
                cell = {"workload": workload, "lanes": lanes, "side": side, "episodes": episodes}
                print(json.dumps({**cell, "steps": [steps, *steps_again]}), flush=True)


def dumped_counts(folder: Path) -> dict[str, int]:
    """Label -> instructions of every client-request dump callgrind wrote to ``folder``."""
    counts = {}
    for path in folder.glob("callgrind.out*"):
        text = path.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: Client Request: (.+)$", text, re.MULTILINE)
        total = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
        if trigger and total:
            counts[trigger.group(1).strip()] = int(total.group(1))
    return counts


def main() -> None:
    missing = [tool for tool in ("valgrind", "gcc") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(
            f"instructions.py needs {' and '.join(missing)} on PATH (apt-get install valgrind gcc)"
        )
    print(load_line("before")[1] + " (instruction counts do not depend on it)")
    print(software_line())
    with tempfile.TemporaryDirectory(prefix="rlmesh-callgrind-") as scratch:
        folder = Path(scratch)
        source, library = folder / "marker.c", folder / "marker.so"
        source.write_text(MARKER_SOURCE)
        built = subprocess.run(
            ["gcc", "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
            capture_output=True,
            text=True,
        )
        if built.returncode != 0:
            raise SystemExit(
                "compiling the callgrind marker failed (is valgrind's callgrind.h installed?):\n"
                + built.stderr
            )
        command = [
            "valgrind",
            "--tool=callgrind",
            "--quiet",
            f"--callgrind-out-file={folder / 'callgrind.out'}",
            sys.executable,
            __file__,
            "--child",
            str(library),
            "--seed",
            str(args.seed),
            "--env-steps",
            str(env_steps),
            "--lanes",
            *map(str, args.lanes),
            "--workloads",
            *workloads,
        ]
        started = time.monotonic()
        ran = subprocess.run(command, capture_output=True, text=True)
        if ran.returncode != 0:
            raise SystemExit(f"the run under callgrind failed ({ran.returncode}):\n{ran.stderr[-4000:]}")
        cells = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
        counts = dumped_counts(folder)
    print(
        f"one process under callgrind, {time.monotonic() - started:.0f} s; "
        f"{env_steps} counted env-steps per run"
    )
    print("instructions of runs 2 and 3 (three runs minus the first), per counted env-step and in all")
    header = (
        f"{'workload':<8} {'N':>2} {'episodes':>8} | {'hand instr/step':>15} {'ours instr/step':>15} | "
        f"{'hand total':>14} {'ours total':>14} | {'ratio':>6}  goal <= {GOAL:.2f}x"
    )
    print(header)
    print("-" * len(header))
    by_cell = {(c["workload"], c["lanes"], c["side"]): c for c in cells}
    for workload in workloads:
        for lanes in args.lanes:
            hand_cell, ours_cell = by_cell[(workload, lanes, "hand")], by_cell[(workload, lanes, "evaluate")]
            hand = counts[f"{workload} {lanes} hand later"]
            ours = counts[f"{workload} {lanes} evaluate later"]
            hand_steps, ours_steps = sum(hand_cell["steps"][1:]), sum(ours_cell["steps"][1:])
            ratio = ours / hand
            verdict = "met" if ratio <= GOAL else "NOT met"
            note = (
                ""
                if hand_steps == ours_steps
                else f"  (counted env-steps differ: {hand_steps} vs {ours_steps})"
            )
            print(
                f"{workload:<8} {lanes:>2} {hand_cell['episodes']:>8} | {hand / hand_steps:>15,.0f} "
                f"{ours / ours_steps:>15,.0f} | {hand:>14,} {ours:>14,} | {ratio:>5.3f}x  {verdict}{note}"
            )
    print(load_line("after")[1])


if args.child:
    child(args.child)
else:
    main()
