"""``evaluate()`` against a hand-written loop and SB3's ``evaluate_policy``, in wall time, in one process.

Every contender evaluates the same torch module on CartPole-v1 for the same K episodes on N
lanes (``_cartpole_contenders.py`` defines them: one torch thread each, env build and close
included, per-lane quotas):

  hand      the loop a user would write: ``SyncVectorEnv`` (NEXT_STEP autoreset), seeded reset,
            ``policy(torch.as_tensor(obs)).argmax(1)``, per-lane returns and quota counting;
  sb3       ``stable_baselines3.common.evaluation.evaluate_policy`` on a ``DummyVecEnv`` of the
            same envs, through a minimal ``predict`` around the same module;
  evaluate  ``rlmesh_gym.evaluate(env_id, module, episodes=K, num_envs=N, seed=...)``, defaults.

Extra columns: ``evaluate()`` with a typical hook set, with recording on, and with each
autoreset mode spelled out (``next_step``, ``same_step``).

Workloads: **long** (the shipped CartPole policy: 500-step episodes) and **short** (a seeded
random-init MLP: about 9 steps). Runs are paired and interleaved (the order of the contenders
rotates every repeat) and timed in wall time; a cell is the median over repeats of the paired
ratio hand time / contender time (same episodes, so time ratio = throughput ratio; higher is
faster), with the median's 95 % confidence interval after it (``_paired.py``: distribution-free,
from the order statistics; the lowest to the highest ratio when there are too few repeats).

Wall time measures the machine as much as the code: the script prints the load average and
core count before and after, and prints its verdict against the goals (>= 0.95x the hand loop
on long episodes, >= 1.00x on short ones, >= SB3 in every cell) only when the 1-minute load
average stayed at or below 1 for the whole run. A goal is met when its cell's whole interval is
at or above it, missed when the whole interval is below, and **undecided** when the interval
straddles it: more repeats, not the median's side of the line, can settle that. Run it with
nothing else running.

    python benchmarks/throughput.py                        # long and short, N in {1, 8, 64}
    python benchmarks/throughput.py --quick                # a smoke test: small cells, no verdict
    python benchmarks/throughput.py --lanes 8 --repeats 9 --workloads short
    python benchmarks/throughput.py --profile 8:short      # cProfile of one evaluate() run
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _cartpole_contenders import ENV_ID, episodes_for, policy_for, run_evaluate, run_hand, run_sb3
from _machine import load_line, no_verdict_reason, software_line
from _paired import interval_depth, judge, median_interval

from rlmesh_gym.evaluation import EvaluationOptions
from rlmesh_gym.runtime import RuntimeHooks

GOALS = {"long": 0.95, "short": 1.00}  # evaluate() / hand loop, per workload

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=None, help="lane counts N (default 1 8 64)")
parser.add_argument("--workloads", nargs="+", default=["long", "short"], choices=["long", "short"])
parser.add_argument("--repeats", type=int, default=None, help="paired runs per row (default 15; median)")
parser.add_argument("--env-steps", type=int, default=None, help="counted env-steps per run (default 8000)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument(
    "--no-extras", action="store_true", help="skip the hooks, recording and autoreset columns"
)
parser.add_argument("--quick", action="store_true", help="N in {1, 8}, 2 repeats, 500 env-steps, no extras")
parser.add_argument("--profile", default=None, metavar="N:WORKLOAD", help="cProfile one evaluate() run")
args = parser.parse_args()
lane_counts = args.lanes or ([1, 8] if args.quick else [1, 8, 64])
repeats = args.repeats or (2 if args.quick else 15)
env_steps = args.env_steps or (500 if args.quick else 8000)
extras = not (args.no_extras or args.quick)


class TypicalHooks(RuntimeHooks):
    """What a user typically listens to: episode ends, step rewards and observations."""

    def __init__(self) -> None:
        self.episodes = self.steps = self.observations = 0
        self.reward = 0.0

    async def episode_completed(self, event) -> None:
        self.episodes += 1

    async def step_completed(self, event) -> None:
        self.steps += 1
        self.reward += sum(event.rewards)

    async def observation_emitted(self, event) -> None:
        self.observations += 1


def run_ours(module, lanes: int, episodes: int, seed: int, extra: str = "") -> int:
    if extra == "record":
        # Only this column gets a folder: making and removing one costs about 0.1 ms, which
        # the hand loop does not pay.
        with tempfile.TemporaryDirectory() as folder:
            return run_evaluate(module, lanes, episodes, seed, record=os.path.join(folder, "run.rlmrec"))
    arguments: dict = {}
    if extra in ("next_step", "same_step"):
        arguments["autoreset"] = extra
    if extra == "hooks":
        arguments["options"] = EvaluationOptions(hooks=[TypicalHooks()])
    return run_evaluate(module, lanes, episodes, seed, **arguments)


def timed(run, *arguments) -> float:
    started = time.perf_counter()
    run(*arguments)
    return time.perf_counter() - started


if args.profile:
    lanes_text, _, workload = args.profile.partition(":")
    lanes, workload = int(lanes_text), workload or "long"
    module, episodes = policy_for(workload), episodes_for(workload, lanes, env_steps)
    run_ours(module, lanes, episodes, args.seed)  # warm up imports and caches
    profiler = cProfile.Profile()
    profiler.enable()
    seconds = timed(run_ours, module, lanes, episodes, args.seed)
    profiler.disable()
    print(f"N={lanes} {workload}: {episodes} episodes in {seconds:.2f} s (wall, profiled)")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    raise SystemExit(0)

sides = ["hand", "sb3", "evaluate"] + (["hooks", "record", "next_step", "same_step"] if extras else [])
runners = {
    "hand": run_hand,
    "sb3": run_sb3,
    "evaluate": run_ours,
    **{extra: lambda m, n, k, s, extra=extra: run_ours(m, n, k, s, extra) for extra in sides[3:]},
}
load, text = load_line("before")
loads = [load]
print(text)
print(software_line())
print(
    f"{ENV_ID}, greedy torch MLP, one torch thread; {repeats} paired runs per row, wall time; "
    f"ratios to the hand loop (higher is faster): median (its {interval_depth(repeats)[1]:.1%} "
    "confidence interval)"
)
header = f"{'workload':<8} {'N':>3} {'episodes':>8} | {'hand env-steps/s':>16} |" + "".join(
    f" {side:>18}" for side in sides[1:]
)
print(header)
print("-" * len(header))
verdicts: dict[str, list[str]] = {"not met": [], "undecided": []}


def check(cell: str, ratios: list[float], goal: float, what: str) -> None:
    """File ``cell``'s goal under its verdict when it is not met (a miss or undecided)."""
    low, high, _ = median_interval(ratios)
    verdict = judge((low, high), goal)
    if verdict != "met":
        verdicts[verdict].append(
            f"{cell}: {statistics.median(ratios):.2f}x {what} ({low:.2f}-{high:.2f}; goal >= {goal:.2f}x)"
        )


for workload in args.workloads:
    module = policy_for(workload)
    for lanes in lane_counts:
        episodes = episodes_for(workload, lanes, env_steps)
        for side in sides:  # warm-up
            runners[side](module, lanes, episodes, args.seed)
        times: dict[str, list[float]] = {side: [] for side in sides}
        counted = run_hand(module, lanes, episodes, args.seed)
        for repeat in range(repeats):
            shift = repeat % len(sides)
            for side in sides[shift:] + sides[:shift]:
                times[side].append(timed(runners[side], module, lanes, episodes, args.seed))
        ratios = {
            side: [base / other for base, other in zip(times["hand"], times[side], strict=True)]
            for side in sides[1:]
        }
        cells = [
            " {:>5.2f}x ({:.2f}-{:.2f})".format(statistics.median(paired), *median_interval(paired)[:2])
            for paired in ratios.values()
        ]
        hand = statistics.median(times["hand"])
        print(
            f"{workload:<8} {lanes:>3} {episodes:>8} | {counted / hand:>16,.0f} |{''.join(cells)}", flush=True
        )
        cell = f"{workload} N={lanes}"
        check(cell, ratios["evaluate"], GOALS[workload], "the hand loop")
        against_sb3 = [s / e for s, e in zip(times["sb3"], times["evaluate"], strict=True)]
        check(cell, against_sb3, 1.0, "SB3's evaluate_policy")
        loads.append(os.getloadavg()[0])

load, text = load_line("after")
loads.append(load)
print(text)
reason = no_verdict_reason(loads, args.quick, "cells")
if reason is not None:
    print(reason)
elif verdicts["not met"] or verdicts["undecided"]:
    for verdict, cells in verdicts.items():
        if cells:
            print(f"verdict: goals {verdict.upper()} (median, interval):\n  " + "\n  ".join(cells))
    if not verdicts["not met"]:
        print(f"no goal missed; rerun with more --repeats (now {repeats}) to decide the undecided ones")
else:
    print(
        "verdict: every goal met, each cell's whole interval at or above its goal (>= 0.95x the hand "
        "loop on long episodes, >= 1.00x on short, >= SB3 everywhere)"
    )
