"""The default ``rlmesh-gym eval`` on a busy machine, against the hand loop under the same load.

Starts ``--hogs`` CPU-bound processes (a bare Python busy loop each), then times, as whole
commands from start to exit, paired and interleaved (the order alternates every repeat):

  eval  ``rlmesh-gym eval`` with its defaults: the shipped CartPole-v1 policy, 100 episodes on
        8 lanes, seed 0 (whatever thread settings the package chooses);
  hand  the loop a user would write for the same job, one torch thread: ``run_hand`` of
        ``benchmarks/_cartpole_contenders.py`` (``SyncVectorEnv`` of 8 CartPole-v1, the same
        seeds, argmax actions under ``torch.inference_mode()``, per-lane quotas of the same 100
        episodes), in this script with ``--hand``.

Both include interpreter start and imports. The goal (issue "one hot path"): eval's median wall
time at most 1.5x the hand loop's with three hogs on 2 cores. The load average is printed
before the hogs start and after they stop.

    python benchmarks/busy_machine.py [--hogs 3] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

EPISODES, LANES, SEED = 100, 8, 0
GOAL = 1.5


def hand_loop() -> None:
    """The hand-written evaluation (run in a child process by the benchmark)."""
    from _cartpole_contenders import policy_for, run_hand  # sets one torch thread

    steps = run_hand(policy_for("long"), LANES, EPISODES, SEED)
    print(f"hand loop: {EPISODES} episodes, {steps} counted env-steps")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min) / {five:.2f} (5 min) on {os.cpu_count()} cores"


def timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, timeout=3600)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=3, help="CPU-bound processes running beside")
    parser.add_argument("--repeats", type=int, default=3, help="paired runs (median reported)")
    parser.add_argument("--hand", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hand:
        hand_loop()
        return
    console = shutil.which("rlmesh-gym", path=os.path.dirname(sys.executable)) or "rlmesh-gym"
    sides = {"eval": [console, "eval"], "hand": [sys.executable, __file__, "--hand"]}
    print(f"before: {load()}")
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hogs)]
    times: dict[str, list[float]] = {name: [] for name in sides}
    try:
        time.sleep(2.0)  # let the hogs take the cores
        for repeat in range(args.repeats):
            order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
            for name in order:
                times[name].append(timed(sides[name]))
            print(f"  repeat {repeat + 1}: " + ", ".join(f"{n} {times[n][-1]:.1f} s" for n in sides))
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()
    time.sleep(1.0)
    print(f"after (hogs stopped): {load()}")
    eval_s, hand_s = statistics.median(times["eval"]), statistics.median(times["hand"])
    ratio = eval_s / hand_s
    print(f"{args.hogs} hogs: eval {eval_s:.1f} s, hand loop {hand_s:.1f} s (medians of {args.repeats})")
    verdict = "met" if ratio <= GOAL else "NOT met"
    print(f"eval / hand = {ratio:.2f}x; goal <= {GOAL}x: {verdict}")


if __name__ == "__main__":
    main()
