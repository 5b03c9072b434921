"""Per-step overhead of the runtime driver, against the bare cost of the env and model calls.

Three forms of the seams are measured: fakes with the array form (``step_arrays`` /
``predict_arrays``) that run inline (``runs_inline``: what the in-process adapters are and
``evaluate()`` runs on; plain awaits), the same fakes not declaring it (the driver awaits them
inside ``asyncio.timeout``, as offloaded envs: this costs the standard library's timeout), and
fakes with only the message form (protobuf requests and responses, as a user-written env or
model or a remote peer; the driver goes through its message ports, guarded too).

Times are wall time; run it on an idle machine (it prints the load average before and after).

An in-process fake env (NEXT_STEP autoreset, every lane's episode lasts --episode-steps
steps, lanes staggered so episodes end on different steps) and a fake model that echoes the
request context with a prebuilt action. For N in {1, 8, 64} it prints microseconds per driver
step for:

* bare: the same env.step + model.predict calls in a plain loop, no driver;
* driver: RuntimeDriver with no hooks;
* driver+hooks: with a typical hooks object (episode_completed, step_completed,
  observation_emitted overridden).

"overhead" is driver minus bare. The goal is <= 25 us/step with no hooks at N=1.

    python benchmarks/driver_overhead.py [--steps 20000] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import time

import numpy as np

from rlmesh_gym.proto import common_pb2, env_pb2, model_pb2, spaces_pb2
from rlmesh_gym.runtime import (
    RuntimeDriver,
    RuntimeEnv,
    RuntimeEnvReset,
    RuntimeEnvStep,
    RuntimeHooks,
    RuntimeModel,
    RuntimeModelPrediction,
    RuntimeSessionSpec,
)
from rlmesh_gym.runtime.seams import CompletedEpisode, EnvResetBatch, EnvStepBatch, ModelActionBatch
from rlmesh_gym.spaces import SpaceCodec
from rlmesh_gym.spaces.batch import SpaceBatch

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=20_000, help="driver steps per measurement")
parser.add_argument("--episode-steps", type=int, default=200, help="steps per episode on every lane")
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8, 64], help="values of N")
parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
parser.add_argument("--profile", action="store_true", help="cProfile the no-hooks driver at the first N")
parser.add_argument("--profile-hooks", action="store_true", help="--profile with the typical hooks")
args = parser.parse_args()


def payload(data: bytes) -> spaces_pb2.SpaceValue:
    return spaces_pb2.SpaceValue(bytes=common_pb2.MessageBytes(data=data))


class FakeEnv(RuntimeEnv):
    """NEXT_STEP vector env: lane i's episodes last `length` steps, the first one shortened.

    With `stop_after` set, it asks `driver` to stop after that many steps (so a driver run
    has an exact length without adding a hook).
    """

    def __init__(self, num_envs: int, length: int, stop_after: int = 0) -> None:
        self.num_envs = num_envs
        self.length = length
        self.stop_after = stop_after
        self.driver: RuntimeDriver | None = None
        self.observation = payload(bytes(4 * num_envs))  # one float32 per lane
        self.rewards = [1.0] * num_envs

    def _steady(self) -> env_pb2.StepResponse:
        return env_pb2.StepResponse(observation=self.observation, rewards=self.rewards, episode_ids=self.ids)

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        self.generation = [0] * self.num_envs
        self.ids = [f"ep-{lane}-0" for lane in range(self.num_envs)]
        # Steps left in each lane's episode; 0 means "done last step, autoreset now".
        self.left = [self.length - (lane * 7) % self.length for lane in range(self.num_envs)]
        self.steady = self._steady()
        return RuntimeEnvReset(env_pb2.ResetResponse(observation=self.observation, episode_ids=self.ids))

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        self.stop_after -= 1
        if self.stop_after == 0:
            self.driver.request_stop("benchmark done")
        left = self.left
        event = False
        for lane in range(self.num_envs):
            left[lane] -= 1
            if left[lane] <= 0:
                event = True
        if not event:
            return RuntimeEnvStep(self.steady)
        response = None
        for lane in range(self.num_envs):
            if left[lane] == 0:  # the lane's episode ends on this step
                response = response or self._steady()
                response.completed_episodes.add(
                    episode_id=self.ids[lane], env_index=lane, step_count=self.length, terminated=True
                )
            elif left[lane] < 0:  # autoreset step: a new episode id rolls in
                self.generation[lane] += 1
                self.ids[lane] = f"ep-{lane}-{self.generation[lane]}"
                left[lane] = self.length
        if response is None:
            self.steady = response = self._steady()
        return RuntimeEnvStep(response)


class FakeModel(RuntimeModel):
    """Echoes the request context with a prebuilt action."""

    def __init__(self, num_envs: int) -> None:
        self.action = payload(bytes(8 * num_envs))  # one int64 per lane

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        return RuntimeModelPrediction(model_pb2.PredictResponse(context=request.context, action=self.action))


OBSERVATION_SPEC = spaces_pb2.SpaceSpec(
    shape=[1], dtype=spaces_pb2.D_TYPE_FLOAT32, box=spaces_pb2.BoxSpec(unbounded=True)
)
ACTION_SPEC = spaces_pb2.SpaceSpec(dtype=spaces_pb2.D_TYPE_INT64, discrete=spaces_pb2.DiscreteSpec(n=2))


class FakeArrayEnv:
    """FakeEnv's episodes in array form: prebuilt batches, CompletedEpisode records."""

    def __init__(self, num_envs: int, length: int, stop_after: int = 0, inline: bool = True) -> None:
        self.runs_inline = inline
        self.num_envs = num_envs
        self.length = length
        self.stop_after = stop_after
        self.driver: RuntimeDriver | None = None
        codec = SpaceCodec(OBSERVATION_SPEC, name="observation")
        self.observation = SpaceBatch.from_values(codec, np.zeros((num_envs, 1), dtype=np.float32), num_envs)
        self.rewards = np.ones(num_envs)
        self.no_lanes = np.zeros(num_envs, dtype=bool)

    async def reset_arrays(self, env_indices, seeds, options=None) -> EnvResetBatch:
        self.generation = [0] * self.num_envs
        self.ids = [f"ep-{lane}-0" for lane in range(self.num_envs)]
        self.left = [self.length - (lane * 7) % self.length for lane in range(self.num_envs)]
        return EnvResetBatch(self.observation, list(self.ids))

    async def step_arrays(self, actions) -> EnvStepBatch:
        self.stop_after -= 1
        if self.stop_after == 0:
            self.driver.request_stop("benchmark done")
        left = self.left
        completed = []
        for lane in range(self.num_envs):
            left[lane] -= 1
            if left[lane] == 0:
                completed.append(
                    CompletedEpisode(self.ids[lane], lane, self.length, float(self.length), True, False)
                )
            elif left[lane] < 0:
                self.generation[lane] += 1
                self.ids[lane] = f"ep-{lane}-{self.generation[lane]}"
                left[lane] = self.length
        return EnvStepBatch(
            self.observation, self.rewards, self.no_lanes, self.no_lanes, list(self.ids), completed
        )


class FakeArrayModel:
    """A prebuilt action batch."""

    def __init__(self, num_envs: int, inline: bool = True) -> None:
        self.runs_inline = inline
        codec = SpaceCodec(ACTION_SPEC, name="action")
        self.action = SpaceBatch.from_values(codec, np.zeros(num_envs, dtype=np.int64), num_envs)

    async def predict_arrays(self, observation, context) -> ModelActionBatch:
        return ModelActionBatch(self.action)


class TypicalHooks(RuntimeHooks):
    """What an evaluation run typically listens to."""

    def __init__(self) -> None:
        self.returns: list[float] = []
        self.steps = 0
        self.observations = 0

    async def episode_completed(self, event) -> None:
        self.returns.append(event.cumulative_reward)

    async def step_completed(self, event) -> None:
        self.steps += 1

    async def observation_emitted(self, event) -> None:
        self.observations += 1


def make_spec(num_envs: int) -> RuntimeSessionSpec:
    contract = env_pb2.EnvContract(
        action_space=ACTION_SPEC,
        observation_space=OBSERVATION_SPEC,
        num_envs=num_envs,
        autoreset_mode=env_pb2.AUTORESET_MODE_NEXT_STEP,
    )
    return RuntimeSessionSpec(session_id="bench", route_id="route", env_contract=contract, num_envs=num_envs)


async def bare_loop(num_envs: int, steps: int) -> float:
    """The env and model calls alone, with requests the driver would send."""
    env, model = FakeEnv(num_envs, args.episode_steps), FakeModel(num_envs)
    await env.reset(env_pb2.ResetRequest())
    request = model_pb2.PredictRequest(observation=env.observation)
    request.context.session_id, request.context.route_id = "bench", "route"
    for lane in range(num_envs):
        request.context.slots.add(env_index=lane, episode_id=env.ids[lane], step=1)
    step_request = env_pb2.StepRequest(action=model.action, timeout_ms=300_000)
    started = time.perf_counter()
    for _ in range(steps):
        await model.predict(request)
        await env.step(step_request)
    return (time.perf_counter() - started) / steps * 1e6


async def bare_array_loop(num_envs: int, steps: int) -> float:
    """The array-form env and model calls alone."""
    env, model = FakeArrayEnv(num_envs, args.episode_steps), FakeArrayModel(num_envs)
    reset = await env.reset_arrays([], [])
    started = time.perf_counter()
    for _ in range(steps):
        prediction = await model.predict_arrays(reset.observation, None)
        await env.step_arrays(prediction.action)
    return (time.perf_counter() - started) / steps * 1e6


async def driver_loop(num_envs: int, steps: int, hooks: list[RuntimeHooks], form: str) -> float:
    """A driver run of exactly `steps` steps on fakes of `form` (see FORMS)."""
    if form == "message":
        env, model = FakeEnv(num_envs, args.episode_steps, stop_after=steps), FakeModel(num_envs)
    else:
        inline = form == "inline array"
        env = FakeArrayEnv(num_envs, args.episode_steps, stop_after=steps, inline=inline)
        model = FakeArrayModel(num_envs, inline=inline)
    driver = env.driver = RuntimeDriver(make_spec(num_envs), env, model, hooks)
    started = time.perf_counter()
    report = await driver.run()
    elapsed = time.perf_counter() - started
    assert report.total_steps == steps, report
    return elapsed / steps * 1e6


def best(measure) -> float:
    return min(asyncio.run(measure()) for _ in range(args.repeats))


FORMS = (("inline array", bare_array_loop), ("guarded array", bare_array_loop), ("message", bare_loop))


def machine_load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min) / {five:.2f} (5 min) on {os.cpu_count()} cores"


print(
    f"driver overhead: {args.steps} steps per run, best of {args.repeats}, {args.episode_steps}-step episodes"
)
print(f"before: {machine_load()}")
print("wall us/step   bare = env+model calls alone, overhead = driver - bare")
overheads = {}
for form, bare_measure in FORMS:
    print(f"\n{form} form of the seams")
    print(f"{'N':>4} {'bare':>8} {'driver':>8} {'overhead':>9} {'+hooks':>8} {'overhead':>9}")
    for num_envs in args.lanes:
        bare = best(lambda n=num_envs, measure=bare_measure: measure(n, args.steps))
        plain = best(lambda n=num_envs, f=form: driver_loop(n, args.steps, [], f))
        hooked = best(lambda n=num_envs, f=form: driver_loop(n, args.steps, [TypicalHooks()], f))
        overheads[form, num_envs] = plain - bare
        row = f"{bare:>8.2f} {plain:>8.2f} {plain - bare:>9.2f} {hooked:>8.2f} {hooked - bare:>9.2f}"
        print(f"{num_envs:>4} {row}")
print(f"\nafter: {machine_load()}")
if ("inline array", 1) in overheads:
    verdict = "met" if overheads["inline array", 1] <= 25 else "NOT met"
    print(f"goal <= 25 us/step overhead at N=1 without hooks (inline array form): {verdict}")

if args.profile:
    num_envs = args.lanes[0]
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(
        driver_loop(num_envs, args.steps, [TypicalHooks()] if args.profile_hooks else [], "inline array")
    )
    profiler.disable()
    hooks_text = "typical" if args.profile_hooks else "no"
    print(f"\ncProfile of the driver, array form, N={num_envs} ({hooks_text} hooks):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
