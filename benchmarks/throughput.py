"""``evaluate()`` against a hand-written loop and SB3's ``evaluate_policy``, in one process.

Every side evaluates the same torch module on CartPole-v1 for the same K episodes on N lanes,
counting each lane's first ``(K + i) // N`` episodes (the per-lane quotas SB3's
``evaluate_policy`` and ``evaluate()`` both use), greedy (argmax of the logits) under
``torch.inference_mode()``, one torch thread, env build and close included:

  hand      the loop a user would write: ``SyncVectorEnv`` (NEXT_STEP autoreset), seeded reset,
            ``policy(torch.as_tensor(obs)).argmax(1)``, per-lane returns and quota counting;
  sb3       ``stable_baselines3.common.evaluation.evaluate_policy`` on a ``DummyVecEnv`` of the
            same envs, through a minimal ``predict`` around the same module;
  evaluate  ``rlmesh_gym.evaluate(env_id, module, episodes=K, num_envs=N, seed=...)``.

Workloads: **long** (the shipped CartPole policy: every episode lasts 500 steps) and
**short** (a seeded random-init MLP 4-64-64-2: episodes of about 9 steps). Runs are paired
and interleaved (the order of the sides rotates every repeat); each side is timed in CPU time
of this process (everything runs in it, on one thread), which other work on a shared machine
disturbs less than wall time. A ratio is the median over repeats of the paired ratio
hand time / side time (same episodes per side, so time ratio = throughput ratio), with the
lowest and highest paired ratio after it; "env-steps/s" is the hand loop's counted episode
steps per CPU second. Extra columns: ``evaluate()`` with a typical hook set, with recording
on, and with ``autoreset="same_step"`` (gymnasium resets a finished lane within its last step, as
SB3's ``DummyVecEnv`` does, instead of spending one more vector step on it).

    python benchmarks/throughput.py                        # long and short, N in {1, 8, 64}
    python benchmarks/throughput.py --lanes 8 --repeats 9 --workloads short
    python benchmarks/throughput.py --profile 8:short      # cProfile of one evaluate() run
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import tempfile
import time
import warnings

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.vec_env import DummyVecEnv

from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.runtime import RuntimeHooks

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="lane counts N")
parser.add_argument("--workloads", nargs="+", default=["long", "short"], choices=["long", "short"])
parser.add_argument("--repeats", type=int, default=5, help="paired runs per row (median reported)")
parser.add_argument("--env-steps", type=int, default=8000, help="target counted env-steps per run")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--no-extras", action="store_true", help="skip the hooks and recording rows")
parser.add_argument("--profile", default=None, metavar="N:WORKLOAD", help="cProfile one evaluate() run")
args = parser.parse_args()

torch.set_num_threads(1)
ENV_ID = "CartPole-v1"


def short_policy() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 64),
        torch.nn.Tanh(),
        torch.nn.Linear(64, 2),
    ).eval()


POLICIES = {"long": load_pretrained("cartpole"), "short": short_policy()}
MEAN_LENGTH = {"long": 500, "short": 9}


def episodes_for(workload: str, lanes: int) -> int:
    per_lane = max(1, -(-args.env_steps // (MEAN_LENGTH[workload] * lanes)))
    return per_lane * lanes


def run_hand(module: torch.nn.Module, lanes: int, episodes: int) -> tuple[float, int]:
    """(seconds, counted env-steps) of the hand-written loop."""
    started = time.process_time()
    envs = gym.vector.SyncVectorEnv([lambda: gym.make(ENV_ID) for _ in range(lanes)])
    quotas = np.array([(episodes + lane) // lanes for lane in range(lanes)])
    counts = np.zeros(lanes, dtype=np.int64)
    returns = np.zeros(lanes)
    lengths = np.zeros(lanes, dtype=np.int64)
    counted_steps = 0
    pending = np.zeros(lanes, dtype=bool)  # NEXT_STEP: this step is the lane's reset step
    obs, _ = envs.reset(seed=[args.seed + lane for lane in range(lanes)])
    while (counts < quotas).any():
        with torch.inference_mode():
            actions = module(torch.as_tensor(obs)).argmax(dim=1).numpy()
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        live = ~pending
        returns[live] += rewards[live]
        lengths[live] += 1
        done = (terminated | truncated) & live
        if done.any():
            for lane in np.flatnonzero(done):
                if counts[lane] < quotas[lane]:
                    counts[lane] += 1
                    counted_steps += int(lengths[lane])
            returns[done] = 0.0
            lengths[done] = 0
        pending = done
    envs.close()
    return time.process_time() - started, counted_steps


class _SB3Predictor:
    """The minimal ``predict`` SB3's evaluate_policy calls, around a torch module."""

    def __init__(self, module: torch.nn.Module) -> None:
        self.module = module

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        with torch.inference_mode():
            return self.module(torch.as_tensor(observation)).argmax(dim=1).numpy(), state


def run_sb3(module: torch.nn.Module, lanes: int, episodes: int) -> float:
    started = time.process_time()
    envs = DummyVecEnv([lambda: gym.make(ENV_ID) for _ in range(lanes)])
    envs.seed(args.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not wrapped with a Monitor": fine for greedy CartPole
        evaluate_policy(_SB3Predictor(module), envs, n_eval_episodes=episodes, deterministic=True)
    envs.close()
    return time.process_time() - started


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


def run_ours(module: torch.nn.Module, lanes: int, episodes: int, extra: str = "") -> float:
    started = time.process_time()
    with tempfile.TemporaryDirectory() as folder:
        evaluate(
            ENV_ID,
            module,
            episodes=episodes,
            num_envs=lanes,
            seed=args.seed,
            autoreset="same_step" if extra == "same_step" else "next_step",
            progress=False,
            hooks=[TypicalHooks()] if extra == "hooks" else (),
            record=os.path.join(folder, "run.rlmrec") if extra == "record" else None,
        )
    return time.process_time() - started


if args.profile:
    lanes_text, _, workload = args.profile.partition(":")
    lanes, workload = int(lanes_text), workload or "long"
    module, episodes = POLICIES[workload], episodes_for(workload, lanes)
    run_ours(module, lanes, episodes)  # warm up imports and caches
    profiler = cProfile.Profile()
    profiler.enable()
    seconds = run_ours(module, lanes, episodes)
    profiler.disable()
    print(f"N={lanes} {workload}: {episodes} episodes in {seconds:.2f} s")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    raise SystemExit(0)

sides = ["hand", "sb3", "evaluate"] + ([] if args.no_extras else ["hooks", "record", "same_step"])
runners = {
    "hand": lambda m, n, k: run_hand(m, n, k)[0],
    "sb3": run_sb3,
    "evaluate": run_ours,
    "hooks": lambda m, n, k: run_ours(m, n, k, "hooks"),
    "record": lambda m, n, k: run_ours(m, n, k, "record"),
    "same_step": lambda m, n, k: run_ours(m, n, k, "same_step"),
}
print(
    f"{ENV_ID}, greedy torch MLP, one torch thread; {args.repeats} paired runs per row, medians; "
    "ratios to the hand loop (higher is faster)"
)
header = f"{'workload':<8} {'N':>3} {'episodes':>8} | {'hand env-steps/s':>16} |" + "".join(
    f" {side:>18}" for side in sides[1:]
)
print(header)
print("-" * len(header))
for workload in args.workloads:
    module = POLICIES[workload]
    for lanes in args.lanes:
        episodes = episodes_for(workload, lanes)
        for side in sides:  # warm-up
            runners[side](module, lanes, episodes)
        times: dict[str, list[float]] = {side: [] for side in sides}
        counted = run_hand(module, lanes, episodes)[1]
        for repeat in range(args.repeats):
            shift = repeat % len(sides)
            for side in sides[shift:] + sides[:shift]:
                times[side].append(runners[side](module, lanes, episodes))
        hand = statistics.median(times["hand"])
        cells = []
        for side in sides[1:]:
            paired = sorted(base / other for base, other in zip(times["hand"], times[side], strict=True))
            cells.append(f" {statistics.median(paired):>5.2f}x ({paired[0]:.2f}-{paired[-1]:.2f})")
        print(
            f"{workload:<8} {lanes:>3} {episodes:>8} | {counted / hand:>16,.0f} |{''.join(cells)}", flush=True
        )
