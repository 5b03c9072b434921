"""Throughput of ``evaluate()`` against a hand-written gymnasium evaluation loop, in one process.

Both sides run CartPole-v1 with the same shipped MLP (greedy: argmax of the logits, under
``torch.inference_mode()``), the same lanes, autoreset mode and number of vector steps, and
count env-steps the same way: lanes x vector steps. The baseline is the loop a user would write
(SyncVectorEnv, reset with seeds, step, sum rewards per lane, partial resets under DISABLED).
Runs are paired and interleaved (the order alternates inside each pair) and medians are
reported, so machine noise hits both sides alike.

Two timings per side:
  loop  the evaluation loop only: first reset to last step (ours: the runtime session, as
        ``EvalResult.timings.wall_seconds`` reports it);
  call  end to end: env construction, loop and close (ours: the whole ``evaluate()`` call).

    python benchmarks/throughput.py                 # N in {1, 8, 64}, all three autoreset modes
    python benchmarks/throughput.py --lanes 8 --modes next_step --repeats 9
    python benchmarks/throughput.py --profile 8:next_step   # cProfile of one evaluate() run
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

import gymnasium as gym
import numpy as np
import torch

from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies.pretrained import load_pretrained

MODES = {"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="lane counts N")
parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES), help="autoreset modes")
parser.add_argument("--repeats", type=int, default=5, help="paired runs per configuration (median reported)")
parser.add_argument(
    "--env-steps",
    type=int,
    default=4000,
    help="target env-steps per run; rounded up to whole 500-step episodes per lane",
)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument(
    "--split",
    action="store_true",
    help="also print where the time goes per vector step (env / policy / driver), from extra clocked runs",
)
parser.add_argument(
    "--profile",
    default=None,
    metavar="N:MODE",
    help="instead of the table, profile one evaluate() run with cProfile and print the top functions",
)
args = parser.parse_args()

torch.set_num_threads(1)
policy = load_pretrained("cartpole")


def episodes_for(lanes: int) -> int:
    # Every greedy CartPole episode of the shipped policy lasts 500 steps (truncation).
    per_lane = max(1, -(-args.env_steps // (500 * lanes)))
    return per_lane * lanes


def run_ours(lanes: int, mode: str) -> tuple[float, float, int, float, tuple[float, float, float]]:
    """(loop s, call s, vector steps, mean return, (env, model, driver) us per vector step) of evaluate()."""
    started = time.perf_counter()
    result = evaluate(
        "CartPole-v1",
        policy,
        episodes=episodes_for(lanes),
        num_envs=lanes,
        seed=args.seed,
        autoreset=mode,
        progress=False,
    )
    call = time.perf_counter() - started
    timings = result.timings
    split = (1e3 * timings.env_step_ms, 1e3 * timings.model_wait_ms, 1e3 * timings.overhead_ms)
    return timings.wall_seconds, call, timings.vector_steps, result.mean_return, split


def run_baseline(lanes: int, mode: str, vector_steps: int) -> tuple[float, float, float]:
    """(loop seconds, call seconds, mean return) of the hand-written loop for ``vector_steps`` steps."""
    started = time.perf_counter()
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(lanes)], autoreset_mode=MODES[mode]
    )
    disabled = mode == "disabled"
    next_step = mode == "next_step"
    loop_started = time.perf_counter()
    obs, _ = envs.reset(seed=[args.seed + lane for lane in range(lanes)])
    returns = np.zeros(lanes)
    finished: list[float] = []
    pending = np.zeros(lanes, dtype=bool)  # NEXT_STEP: this step is the lane's reset step
    for _ in range(vector_steps):
        with torch.inference_mode():
            actions = policy(torch.as_tensor(obs)).argmax(dim=1).numpy()
        obs, rewards, terminated, truncated, _ = envs.step(actions)
        if next_step:
            returns[pending] = 0.0
            rewards = np.where(pending, 0.0, rewards)
        returns += rewards
        done = terminated | truncated
        if done.any():
            finished.extend(returns[done].tolist())
            returns[done] = 0.0
            if disabled:
                obs, _ = envs.reset(options={"reset_mask": done})
        if next_step:
            pending = done
    loop = time.perf_counter() - loop_started
    envs.close()
    call = time.perf_counter() - started
    return loop, call, float(np.mean(finished)) if finished else float("nan")


def run_baseline_split(lanes: int, mode: str, vector_steps: int) -> tuple[float, float]:
    """(env, policy) us per vector step: the same loop with clocks around the policy and env.step."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1") for _ in range(lanes)], autoreset_mode=MODES[mode]
    )
    obs, _ = envs.reset(seed=[args.seed + lane for lane in range(lanes)])
    policy_ns = env_ns = 0
    for _ in range(vector_steps):
        t0 = time.perf_counter_ns()
        with torch.inference_mode():
            actions = policy(torch.as_tensor(obs)).argmax(dim=1).numpy()
        t1 = time.perf_counter_ns()
        obs, _, terminated, truncated, _ = envs.step(actions)
        t2 = time.perf_counter_ns()
        policy_ns += t1 - t0
        env_ns += t2 - t1
        if mode == "disabled" and (terminated | truncated).any():
            obs, _ = envs.reset(options={"reset_mask": terminated | truncated})
    envs.close()
    return env_ns / vector_steps / 1e3, policy_ns / vector_steps / 1e3


if args.profile:
    lanes_text, _, mode = args.profile.partition(":")
    lanes, mode = int(lanes_text), mode or "next_step"
    run_ours(lanes, mode)  # warm up imports and caches
    profiler = cProfile.Profile()
    profiler.enable()
    loop, call, steps, _, _ = run_ours(lanes, mode)
    profiler.disable()
    print(
        f"N={lanes} {mode}: {steps} vector steps, {lanes * steps / loop:,.0f} env-steps/s "
        f"({1e6 * loop / steps:.1f} us per vector step in the session)"
    )
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    raise SystemExit(0)

print(
    f"CartPole-v1, shipped MLP, greedy; {args.repeats} paired runs per row, medians; "
    "env-steps/s = lanes x vector steps / s"
)
header = (
    f"{'N':>3} {'autoreset':<10} {'steps':>7} | {'baseline':>10} {'evaluate':>10} {'ratio':>6} | "
    f"{'baseline':>10} {'evaluate':>10} {'ratio':>6}"
)
print(f"{'':<23}| {'loop (reset..last step)':^29} | {'call (build..close)':^29}")
print(header)
print("-" * len(header))
splits: list[str] = []
for lanes in args.lanes:
    for mode in args.modes:
        steps = run_ours(lanes, mode)[2]  # warm-up; fixes the vector-step count for both sides
        run_baseline(lanes, mode, steps)
        ours_loop, ours_call, base_loop, base_call, ours_split, base_split = [], [], [], [], [], []
        for repeat in range(args.repeats):
            order = ("ours", "base") if repeat % 2 == 0 else ("base", "ours")
            for side in order:
                if side == "ours":
                    loop, call, ours_steps, ours_mean, split = run_ours(lanes, mode)
                    if ours_steps != steps:
                        raise SystemExit(f"evaluate() ran {ours_steps} vector steps, expected {steps}")
                    ours_loop.append(loop)
                    ours_call.append(call)
                    ours_split.append(split)
                else:
                    loop, call, base_mean = run_baseline(lanes, mode, steps)
                    base_loop.append(loop)
                    base_call.append(call)
                    if args.split:
                        base_split.append(run_baseline_split(lanes, mode, steps))
        env_steps = lanes * steps
        rates = [env_steps / statistics.median(t) for t in (base_loop, ours_loop, base_call, ours_call)]
        print(
            f"{lanes:>3} {mode:<10} {env_steps:>7} | "
            f"{rates[0]:>10,.0f} {rates[1]:>10,.0f} {rates[1] / rates[0]:>5.2f}x | "
            f"{rates[2]:>10,.0f} {rates[3]:>10,.0f} {rates[3] / rates[2]:>5.2f}x"
        )
        if not (ours_mean >= 475 and base_mean >= 475):
            print(f"    note: mean returns {ours_mean:.1f} (evaluate) / {base_mean:.1f} (baseline)")
        if args.split:
            env, model, driver = (statistics.median(row[i] for row in ours_split) for i in range(3))
            base_env, base_policy = (statistics.median(row[i] for row in base_split) for i in range(2))
            splits.append(
                f"{lanes:>3} {mode:<10} | {base_env:>8.1f} {base_policy:>8.1f} | {env:>8.1f} {model:>8.1f} "
                f"{driver:>8.1f} | {env - base_env:>+8.1f} {model - base_policy:>+8.1f} {driver:>+8.1f}"
            )

if args.split:
    print("\nus per vector step (medians of clocked runs)")
    print(f"{'':<14} | {'baseline':^17} | {'evaluate':^26} | {'added by rlmesh_gym':^26}")
    print(
        f"{'N':>3} {'autoreset':<10} | {'env':>8} {'policy':>8} | {'env':>8} {'model':>8} {'driver':>8} | "
        f"{'env':>8} {'model':>8} {'driver':>8}"
    )
    print("\n".join(splits))
