"""Where ``evaluate()``'s wall time goes, part by part, against the hand loop's.

Runs the hand loop and ``evaluate()`` of ``throughput.py`` (``_cartpole_contenders.py``: the
same K CartPole-v1 episodes on N lanes, one torch thread) alternately in one process, and times
two parts at every call, the same on both sides:

  sub-env step  the loop over the sub-envs' ``step``: ``SyncVectorEnv.step`` for the hand loop,
                the adapter's SAME_STEP loop (``SameStepLanes.step``) for ``evaluate()``;
  forward       the ``forward`` of each layer of the policy (an ``nn.Sequential``); the
                dispatch to them (``nn.Module.__call__``, or TorchPolicy's direct calls)
                counts under loop.

The rest of a run is split at the first and the last sub-env step: **before** (building the
env, the policy and, for ``evaluate()``, its session and event loop; the cold reset; the first
forward counts under forward), **after** (closing, the result) and **loop** (everything between
the steps and forwards: for the hand loop its masks and counting, for ``evaluate()`` the driver,
the adapters around the step and the forward, and each finished episode's book-keeping). The
parts do not overlap: they add up to the total. Each part is the median over
``--repeats`` runs; the last column is ``evaluate()`` minus the hand loop, in ms per run.
Timing a call costs about half a microsecond, on both sides. Wall time: run it on an idle
machine (the load average is printed before and after).

    python benchmarks/time_split.py                      # N = 64, short episodes
    python benchmarks/time_split.py --lanes 8 --workload long --repeats 31
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import gymnasium as gym
import torch
from _cartpole_contenders import episodes_for, policy_for, run_evaluate, run_hand
from _machine import load_line, software_line

from rlmesh_gym.envs.same_step_lanes import SameStepLanes

PARTS = ("total", "sub-env step", "forward", "before", "loop", "after")

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, default=64, help="lane count N (default 64)")
parser.add_argument("--workload", default="short", choices=["long", "short"])
parser.add_argument("--repeats", type=int, default=15, help="runs of each side (default 15; median)")
parser.add_argument("--env-steps", type=int, default=8000, help="counted env-steps per run (default 8000)")
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()


class _Clock:
    """Total time inside the timed calls of one run, and when the first and last step ended."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.spent = {"sub-env step": 0, "forward": 0}
        self.first_step: int | None = None
        self.last_step = 0
        self.forward_before_first_step = 0  # the first forward comes before the first step

    def timing(self, part: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*arguments: Any, **keywords: Any) -> Any:
            started = time.perf_counter_ns()
            try:
                return call(*arguments, **keywords)
            finally:
                ended = time.perf_counter_ns()
                self.spent[part] += ended - started
                if part == "forward" and self.first_step is None:
                    self.forward_before_first_step += ended - started
                if part == "sub-env step":
                    if self.first_step is None:
                        self.first_step = started
                    self.last_step = ended

        return timed


clock = _Clock()
SameStepLanes.step = clock.timing("sub-env step", SameStepLanes.step)  # type: ignore[method-assign]
gym.vector.SyncVectorEnv.step = clock.timing("sub-env step", gym.vector.SyncVectorEnv.step)  # type: ignore[method-assign]
module = policy_for(args.workload)
# The layers' own forwards: how each side dispatches to them (nn.Module.__call__ for the hand
# loop; TorchPolicy calls a plain Sequential's layers directly) is part of its loop. Timing the
# Sequential's forward instead would give it an instance forward, which TorchPolicy calls as is.
# Another module (the long workload's MLPPolicy) is called through its forward by both sides.
for timed_module in module if isinstance(module, torch.nn.Sequential) else [module]:
    timed_module.forward = clock.timing("forward", timed_module.forward)  # type: ignore[method-assign]
episodes = episodes_for(args.workload, args.lanes, args.env_steps)
sides: dict[str, Callable[..., int]] = {"hand": run_hand, "evaluate": run_evaluate}


def split(run: Callable[..., int]) -> dict[str, float]:
    """One run's parts, in ms."""
    clock.reset()
    started = time.perf_counter_ns()
    run(module, args.lanes, episodes, args.seed)
    ended = time.perf_counter_ns()
    first = clock.first_step if clock.first_step is not None else ended
    parts = {
        "total": ended - started,
        **clock.spent,
        "before": first - started - clock.forward_before_first_step,
        "after": ended - clock.last_step if clock.first_step is not None else 0,
    }
    parts["loop"] = parts["total"] - sum(
        parts[part] for part in ("sub-env step", "forward", "before", "after")
    )
    return {part: nanoseconds / 1e6 for part, nanoseconds in parts.items()}


print(load_line("before")[1])
print(software_line())
for run in sides.values():  # warm-up
    run(module, args.lanes, episodes, args.seed)
runs: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
for repeat in range(args.repeats):
    order = list(sides) if repeat % 2 == 0 else list(reversed(sides))
    for side in order:
        runs[side].append(split(sides[side]))
medians = {
    side: {part: statistics.median(run[part] for run in runs[side]) for part in PARTS} for side in sides
}
print(
    f"CartPole-v1, {args.workload} episodes, N={args.lanes}, {episodes} episodes per run; medians of "
    f"{args.repeats} runs, ms per run"
)
print(f"{'part':<13} {'hand':>9} {'evaluate':>9} {'difference':>11}")
for part in PARTS:
    hand, ours = medians["hand"][part], medians["evaluate"][part]
    print(f"{part:<13} {hand:>9.2f} {ours:>9.2f} {ours - hand:>+11.2f}")
print(load_line("after")[1])
