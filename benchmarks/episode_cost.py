"""What a finished episode costs ``evaluate()`` beyond its steps, over a zero-cost env.

The env does nothing (a constant observation, reward 1, ``terminated`` after ``length``
steps) and the policy returns zeros, so what is left is book-keeping: episode ids, metadata,
the driver's episode records, events and the evaluation's quota counting. For N lanes it times

* long episodes (one per lane, ``--long`` steps): the cost per vector step;
* short episodes (``--short`` steps, ``--episodes`` of them): total time minus the vector steps
  at the long-episode rate, divided by the episodes: the cost per finished episode;

for ``evaluate()`` and for a hand-written gymnasium loop (``SyncVectorEnv``, NEXT_STEP
autoreset, per-lane returns and quota counting, as ``benchmarks/throughput.py``), paired and
interleaved, medians. "added" is the difference: what rlmesh_gym adds per finished episode
(the goal is <= 10 us).

    python benchmarks/episode_cost.py [--lanes 1 8 64] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import gymnasium as gym
import numpy as np

from rlmesh_gym.evaluation import EvaluationOptions, evaluate

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="lane counts N")
parser.add_argument("--repeats", type=int, default=5, help="paired runs per row (median reported)")
parser.add_argument("--short", type=int, default=2, help="steps per short episode")
parser.add_argument("--long", type=int, default=2000, help="steps per long episode")
parser.add_argument("--episodes", type=int, default=2000, help="short episodes per run")
args = parser.parse_args()

ENV_ID = "ZeroCost-v0"


class ZeroCostEnv(gym.Env):
    """Nothing to compute: a constant observation, reward 1, terminated after ``length`` steps."""

    observation_space = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 1) -> None:
        self.length = length
        self.t = 0
        self.obs = np.zeros(1, dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.obs, {}

    def step(self, action):
        self.t += 1
        return self.obs, 1.0, self.t >= self.length, False, {}


gym.register(ENV_ID, entry_point=ZeroCostEnv, disable_env_checker=True)


def run_hand(lanes: int, episodes: int, length: int) -> tuple[float, int]:
    """(seconds, vector steps) of the hand-written loop."""
    started = time.perf_counter()
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID, length=length) for _ in range(lanes)])
    quotas = np.array([(episodes + lane) // lanes for lane in range(lanes)])
    counts = np.zeros(lanes, dtype=np.int64)
    returns = np.zeros(lanes)
    actions = np.zeros(lanes, dtype=np.int64)
    pending = np.zeros(lanes, dtype=bool)
    steps = 0
    envs.reset(seed=list(range(lanes)))
    while (counts < quotas).any():
        _, rewards, terminated, truncated, _ = envs.step(actions)
        steps += 1
        live = ~pending
        returns[live] += rewards[live]
        done = (terminated | truncated) & live
        if done.any():
            for lane in np.flatnonzero(done):
                if counts[lane] < quotas[lane]:
                    counts[lane] += 1
            returns[done] = 0.0
        pending = done
    envs.close()
    return time.perf_counter() - started, steps


def zeros(observations: np.ndarray) -> np.ndarray:
    return np.zeros(len(observations), dtype=np.int64)


def run_ours(lanes: int, episodes: int, length: int) -> tuple[float, int]:
    started = time.perf_counter()
    result = evaluate(
        ENV_ID,
        zeros,
        episodes=episodes,
        num_envs=lanes,
        seed=0,
        progress=False,
        options=EvaluationOptions(env_kwargs={"length": length}),
    )
    return time.perf_counter() - started, result.timings.vector_steps


print(
    f"zero-cost env, zero policy; {args.short}-step episodes against {args.long}-step ones; "
    f"{args.repeats} paired runs, medians; us per finished episode beyond its steps"
)
header = (
    f"{'N':>3} | {'hand us/step':>12} {'ours us/step':>12} | "
    f"{'hand us/ep':>10} {'ours us/ep':>10} {'added':>8}"
)
print(header)
print("-" * len(header))
for lanes in args.lanes:
    episodes = max(args.episodes, lanes)
    runs = {
        "hand-long": (run_hand, lanes, args.long),
        "ours-long": (run_ours, lanes, args.long),
        "hand-short": (run_hand, episodes, args.short),
        "ours-short": (run_ours, episodes, args.short),
    }
    names = list(runs)
    for run, count, length in runs.values():  # warm-up
        run(lanes, count, length)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            run, count, length = runs[name]
            results[name].append(run(lanes, count, length))
    per_step, per_episode = {}, {}
    for side in ("hand", "ours"):
        long_time = statistics.median(seconds for seconds, _ in results[f"{side}-long"])
        long_steps = results[f"{side}-long"][0][1]
        per_step[side] = long_time / long_steps
        extra = [(seconds - steps * per_step[side]) / episodes for seconds, steps in results[f"{side}-short"]]
        per_episode[side] = statistics.median(extra)
    print(
        f"{lanes:>3} | {1e6 * per_step['hand']:>12.1f} {1e6 * per_step['ours']:>12.1f} | "
        f"{1e6 * per_episode['hand']:>10.1f} {1e6 * per_episode['ours']:>10.1f} "
        f"{1e6 * (per_episode['ours'] - per_episode['hand']):>+8.1f}",
        flush=True,
    )
