"""Per-step cost of GymVectorEnv against the bare gymnasium vector env step, in one process.

Both sides run CartPole-v1 lanes in a SyncVectorEnv with the same autoreset mode, the same reset
seeds and the same pre-generated random actions, for the same number of vector steps.

  bare     ``env.step(actions)`` with int64 numpy action arrays (what a hand-written loop does).
  adapter  ``await MessageFormEnv(env).step(request)`` with **prebuilt** ``StepRequest`` messages: the action
           bytes are encoded before the timed loop (a model's job), so the timing is bytes in ->
           StepResponse out: action decode, the same env step, observation encode, per-lane
           episode book-keeping (ids, completed episodes), the response and its telemetry.

Under DISABLED both sides reset the finished lanes after each step with a partial reset
(``options={"reset_mask": ...}`` vs ``ResetRequest(env_indices=...)``), as the driver would.
Runs are paired and interleaved (the order alternates inside each pair); medians are reported.
Times are CPU time of this process (``time.process_time``): everything runs in this one thread
(SyncVectorEnv), and CPU time is far less disturbed than wall time by other load on the machine.

    python benchmarks/env_adapter.py                      # N in {1, 8, 64}, all three autoreset modes
    python benchmarks/env_adapter.py --lanes 8 --modes next_step --repeats 9
    python benchmarks/env_adapter.py --profile 8:next_step   # cProfile of the adapter loop
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time

import gymnasium as gym
import numpy as np

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import MessageFormEnv

MODES = {"next_step": "NextStep", "same_step": "SameStep", "disabled": "Disabled"}

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="lane counts N")
parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES), help="autoreset modes")
parser.add_argument("--repeats", type=int, default=3, help="paired runs per configuration (median reported)")
parser.add_argument(
    "--env-steps", type=int, default=12000, help="lane-steps per run (vector steps = this / N)"
)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument(
    "--profile", default=None, metavar="N:MODE", help="profile the adapter loop of one configuration instead"
)
args = parser.parse_args()


def vector_steps(lanes: int) -> int:
    return max(200, args.env_steps // lanes)


def make_bare(lanes: int, mode: str) -> gym.vector.VectorEnv:
    return gym.make_vec(
        "CartPole-v1", lanes, vectorization_mode="sync", vector_kwargs={"autoreset_mode": MODES[mode]}
    )


def action_batches(lanes: int) -> list[np.ndarray]:
    rng = np.random.default_rng(args.seed)
    return [rng.integers(0, 2, lanes, dtype=np.int64) for _ in range(256)]


def run_bare(env: gym.vector.VectorEnv, lanes: int, mode: str, actions: list[np.ndarray]) -> float:
    """Seconds per vector step of the bare loop."""
    steps = vector_steps(lanes)
    env.reset(seed=list(range(lanes)))
    started = time.process_time()
    for i in range(steps):
        _, _, terminated, truncated, _ = env.step(actions[i % len(actions)])
        if mode == "disabled":
            done = terminated | truncated
            if done.any():
                env.reset(options={"reset_mask": done})
    return (time.process_time() - started) / steps


async def adapter_loop(
    env: MessageFormEnv, lanes: int, mode: str, requests: list[env_pb2.StepRequest]
) -> float:
    steps = vector_steps(lanes)
    # A new run is a new session: end the previous run's episodes first, or the reset would report
    # them as interrupted on the first step (and a DISABLED loop would reset those lanes again).
    env.drain_episodes()
    await env.reset(env_pb2.ResetRequest(seeds=list(range(lanes))))
    started = time.process_time()
    for i in range(steps):
        response = (await env.step(requests[i % len(requests)])).response
        if mode == "disabled" and response.completed_episodes:
            done = sorted({episode.env_index for episode in response.completed_episodes})
            await env.reset(env_pb2.ResetRequest(env_indices=done))
    return (time.process_time() - started) / steps


def run_adapter(env: MessageFormEnv, lanes: int, mode: str, requests: list[env_pb2.StepRequest]) -> float:
    """Seconds per vector step of the adapter loop (bytes in -> StepResponse out)."""
    return asyncio.run(adapter_loop(env, lanes, mode, requests))


def prebuilt_requests(actions: list[np.ndarray]) -> list[env_pb2.StepRequest]:
    requests = []
    for batch in actions:
        request = env_pb2.StepRequest()
        request.action.bytes.data = batch.astype("<i8").tobytes()
        requests.append(request)
    return requests


if args.profile:
    lanes_text, mode = args.profile.split(":")
    lanes = int(lanes_text)
    adapter = MessageFormEnv(GymVectorEnv(make_bare(lanes, mode)))
    requests = prebuilt_requests(action_batches(lanes))
    run_adapter(adapter, lanes, mode, requests)  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    run_adapter(adapter, lanes, mode, requests)
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    raise SystemExit(0)

print(
    f"CartPole-v1, SyncVectorEnv, {args.env_steps} lane-steps per run, median of {args.repeats} paired runs"
)
print("adapter side: prebuilt action bytes (StepRequest) in, StepResponse out")
print(f"{'N':>3} {'mode':>10} {'steps':>6} {'bare us/step':>13} {'adapter us/step':>16}", end="")
print(f" {'overhead us':>12} {'ratio':>6}")
for lanes in args.lanes:
    for mode in args.modes:
        bare = make_bare(lanes, mode)
        adapter = MessageFormEnv(GymVectorEnv(make_bare(lanes, mode)))
        actions = action_batches(lanes)
        requests = prebuilt_requests(actions)
        run_bare(bare, lanes, mode, actions)  # warm-up both sides
        run_adapter(adapter, lanes, mode, requests)
        bare_times, adapter_times = [], []
        for repeat in range(args.repeats):
            if repeat % 2 == 0:
                bare_times.append(run_bare(bare, lanes, mode, actions))
                adapter_times.append(run_adapter(adapter, lanes, mode, requests))
            else:
                adapter_times.append(run_adapter(adapter, lanes, mode, requests))
                bare_times.append(run_bare(bare, lanes, mode, actions))
        bare_us = statistics.median(bare_times) * 1e6
        adapter_us = statistics.median(adapter_times) * 1e6
        print(
            f"{lanes:>3} {mode:>10} {vector_steps(lanes):>6} {bare_us:>13.1f} {adapter_us:>16.1f} "
            f"{adapter_us - bare_us:>12.1f} {adapter_us / bare_us:>6.2f}"
        )
        bare.close()
        asyncio.run(adapter.close(5.0))
