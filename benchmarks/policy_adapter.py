"""TorchPolicy through MessageFormModel against the bare module on the same batch, in one process.

The policy is a CartPole-shaped MLP (4 -> 64 -> 64 -> 2, tanh). The baseline is what a
hand-written loop does with a batch tensor it already holds:

    with torch.inference_mode():
        module(obs).argmax(-1)

The adapter starts from a prebuilt ``PredictRequest`` (observation message bytes and one slot
per lane) and returns a ``RuntimeModelPrediction``: decode the bytes to a tensor, the same
forward and argmax, check and encode the actions, copy the context, build the telemetry.
``predict`` never suspends, so it is driven with ``coroutine.send`` (no event loop: the loop's
cost belongs to the driver). Goal: at most 15 us added per call at N=1.

    python benchmarks/policy_adapter.py                 # N in {1, 8, 64}, a few seconds
    python benchmarks/policy_adapter.py --repeats 50    # steadier numbers on a busy machine
    python benchmarks/policy_adapter.py --profile       # where the adapter's time goes at N=1
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np
import torch
from torch import nn

from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.proto import model_pb2, spaces_pb2
from rlmesh_gym.runtime import MessageFormModel
from rlmesh_gym.spaces.codec import SpaceCodec

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="batch sizes N")
parser.add_argument("--iterations", type=int, default=100, help="calls per timing run")
parser.add_argument("--repeats", type=int, default=300, help="timing runs per side; the fastest counts")
parser.add_argument("--goal-us", type=float, default=15.0, help="allowed added microseconds at N=1")
parser.add_argument("--profile", action="store_true", help="print a cProfile of predict at N=1")
args = parser.parse_args()

torch.set_num_threads(1)
torch.manual_seed(0)

# The CartPole spaces as the env adapter's contract carries them.
observation_spec = spaces_pb2.SpaceSpec(
    shape=[4], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True)
)
action_spec = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))
module = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)).eval()
policy = TorchPolicy(module, (observation_spec, action_spec))
messages = MessageFormModel(policy)  # the message form: bytes in, PredictResponse out
observation_codec = SpaceCodec(observation_spec)
action_codec = SpaceCodec(action_spec)


def make_request(n: int, batch: np.ndarray) -> model_pb2.PredictRequest:
    request = model_pb2.PredictRequest()
    context = request.context
    context.session_id, context.route_id, context.request_id = (
        "bench",
        "route",
        "bench:route:step_observation:000001",
    )
    for lane in range(n):
        context.slots.add(env_index=lane, episode_id=f"episode-{lane}", step=3, reset=False)
    request.observation.bytes.data = observation_codec.encode_batch(batch, n)
    return request


def predict_once(request: model_pb2.PredictRequest) -> object:
    coroutine = messages.predict(request)
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("TorchPolicy.predict suspended")


def bare_once(obs: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return module(obs).argmax(-1)


def per_call_us(fn: object, argument: object, iterations: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(iterations):
        fn(argument)  # type: ignore[operator]
    return (time.perf_counter_ns() - start) / iterations / 1000


setup = f"{args.repeats} runs x {args.iterations} calls per side"
print(f"torch {torch.__version__}, 1 thread; MLP 4-64-64-2; {setup}")
print("best = fastest run (the machine's noise removed as far as it can be); median for reference")
print(
    f"{'N':>4} {'bare us':>9} {'TorchPolicy us':>15} {'added us':>9} {'ratio':>6}   {'median added us':>15}"
)
added_at_one = None
for n in args.lanes:
    batch = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
    request = make_request(n, batch)
    obs = torch.from_numpy(batch.copy())
    # Both sides must pick the same actions, or the comparison means nothing.
    prediction = predict_once(request)
    sent = action_codec.decode_batch(prediction.response.action.bytes.data, n)  # type: ignore[attr-defined]
    assert sent.tolist() == bare_once(obs).tolist(), "adapter and bare module disagree"
    assert prediction.response.context == request.context  # type: ignore[attr-defined]
    bare, ours = [], []
    for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits both sides
        bare.append(per_call_us(bare_once, obs, args.iterations))
        ours.append(per_call_us(predict_once, request, args.iterations))
    bare_us, ours_us = min(bare), min(ours)
    added = ours_us - bare_us
    median_added = float(np.median(ours) - np.median(bare))
    if n == 1:
        added_at_one = added
    ratio = ours_us / bare_us
    print(f"{n:>4} {bare_us:>9.2f} {ours_us:>15.2f} {added:>9.2f} {ratio:>6.2f}   {median_added:>15.2f}")

if added_at_one is not None:
    verdict = "meets" if added_at_one <= args.goal_us else "MISSES"
    print(f"N=1: the adapter adds {added_at_one:.2f} us per call; {verdict} the {args.goal_us:g} us goal")

if args.profile:
    request = make_request(1, np.zeros((1, 4), dtype=np.float32))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20 * args.iterations):
        predict_once(request)
    profiler.disable()
    pstats.Stats(profiler).strip_dirs().sort_stats("tottime").print_stats(15)
