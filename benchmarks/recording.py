"""Recording overhead: ``evaluate()`` with ``record=`` against ``evaluate()`` without, in one process.

CartPole-v1 with the shipped MLP (greedy), the same seed, lanes and autoreset mode on every
side, and the same number of vector steps (every greedy episode lasts 500 steps). Four sides:

  plain     evaluate() without recording (the baseline)
  no-op     evaluate() with a hook that listens to the recorder's per-step events and does
            nothing: the driver's share of the overhead (building and dispatching the events)
  obs on    evaluate(record=path): observations, actions, rewards and flags of every lane
  obs off   evaluate(record=RecordingOptions(path, observations=False))

Runs are interleaved (the order rotates from one repeat to the next) and medians reported, so
machine noise hits every side alike. env-steps/s = lanes x vector steps / seconds, measured
two ways: the session's wall time (``EvalResult.timings.wall_seconds``, which includes the
recorder's per-episode writes) and the whole call's CPU time of this process (which adds
building the env and closing the file, and is less sensitive to other processes on a shared
machine than wall time).

    python benchmarks/recording.py                       # N in {1, 8}, next_step, ~30 s
    python benchmarks/recording.py --lanes 8 --modes disabled --repeats 9
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

import torch

from rlmesh_gym.evaluation import EvaluationOptions, evaluate
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.recording import EpisodeRecorder, RecordingOptions, load_recording
from rlmesh_gym.runtime import RuntimeHooks

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8], help="lane counts N")
parser.add_argument(
    "--modes",
    nargs="+",
    default=["next_step"],
    choices=["next_step", "same_step", "disabled"],
    help="autoreset modes",
)
parser.add_argument(
    "--repeats", type=int, default=5, help="runs per side and configuration (median reported)"
)
parser.add_argument(
    "--env-steps",
    type=int,
    default=2000,
    help="target env-steps per run; rounded up to whole 500-step episodes",
)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

torch.set_num_threads(1)
policy = load_pretrained("cartpole")
workdir = tempfile.mkdtemp(prefix="rlmesh-recording-bench-")
path = os.path.join(workdir, "run.rec")


class PerStepListener(RuntimeHooks):
    """Listens to the per-step events the recorder uses and does nothing: the driver's share."""

    async def observation_emitted(self, event):
        pass

    async def action_received(self, event):
        pass

    async def step_completed(self, event):
        pass


# side -> (record, extra hooks)
SIDES = {
    "plain": (None, ()),
    "no-op": (None, (PerStepListener(),)),
    "obs on": (path, ()),
    "obs off": (RecordingOptions(path, observations=False), ()),
}


def episodes_for(lanes: int) -> int:
    per_lane = max(1, -(-args.env_steps // (500 * lanes)))
    return per_lane * lanes


def run(lanes: int, mode: str, record, hooks=()) -> tuple[float, float, int, int]:
    """(session seconds, call CPU seconds, vector steps, file bytes) of one evaluate() call."""
    started = time.process_time()
    result = evaluate(
        "CartPole-v1",
        policy,
        episodes=episodes_for(lanes),
        num_envs=lanes,
        seed=args.seed,
        autoreset=mode,
        progress=False,
        record=record,
        options=EvaluationOptions(hooks=hooks),
    )
    call = time.process_time() - started
    size = os.path.getsize(path) if record is not None else 0
    return result.timings.wall_seconds, call, result.timings.vector_steps, size


class Capture(RuntimeHooks):
    """Keeps every event the recorder listens to, to time the recorder alone afterwards."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    async def session_started(self, event):
        self.events.append(("session_started", event))

    async def observation_emitted(self, event):
        self.events.append(("observation_emitted", event))

    async def action_received(self, event):
        self.events.append(("action_received", event))

    async def step_completed(self, event):
        self.events.append(("step_completed", event))

    async def episode_completed(self, event):
        self.events.append(("episode_completed", event))

    async def session_ended(self, event):
        self.events.append(("session_ended", event))


async def replay_events(events, contract, record) -> float:
    """Seconds a fresh recorder spends in its hooks for ``events`` (and in close())."""
    recorder = EpisodeRecorder(record, contract)
    started = time.perf_counter()
    for name, event in events:
        await getattr(recorder, name)(event)
    recorder.close()
    return time.perf_counter() - started


print(
    f"CartPole-v1, shipped MLP, greedy; {args.repeats} interleaved runs per side, medians; "
    "env-steps/s = lanes x vector steps / s"
)
header = (
    f"{'N':>3} {'autoreset':<10} {'side':<8} {'env-steps':>9} | {'wall':>8} {'ratio':>6} | "
    f"{'cpu':>8} {'ratio':>6} | {'file':>7} {'B/step':>6}"
)
print(f"{'':<33}| {'session, wall':^15} | {'call, CPU':^15} |")
print(header)
print("-" * len(header))
hooks_alone = []
for lanes in args.lanes:
    for mode in args.modes:
        _, _, steps, _ = run(lanes, mode, None)  # warm-up; fixes the vector-step count
        for record, hooks in SIDES.values():
            run(lanes, mode, record, hooks)
        session: dict[str, list[float]] = {side: [] for side in SIDES}
        cpu: dict[str, list[float]] = {side: [] for side in SIDES}
        sizes: dict[str, int] = {}
        names = list(SIDES)
        for repeat in range(args.repeats):
            for side in names[repeat % len(names) :] + names[: repeat % len(names)]:
                seconds, cpu_seconds, side_steps, size = run(lanes, mode, *SIDES[side])
                if side_steps != steps:
                    raise SystemExit(f"{side}: evaluate() ran {side_steps} vector steps, expected {steps}")
                session[side].append(seconds)
                cpu[side].append(cpu_seconds)
                sizes[side] = size
        # The last recording written holds every step of every episode it reports.
        recording = load_recording(path)
        assert len(recording.episodes) >= episodes_for(lanes)
        assert all(len(e.steps) == e.length == 500 for e in recording.episodes)
        env_steps = lanes * steps
        base_wall = env_steps / statistics.median(session["plain"])
        base_cpu = env_steps / statistics.median(cpu["plain"])
        for side in SIDES:
            wall = env_steps / statistics.median(session[side])
            rate_cpu = env_steps / statistics.median(cpu[side])
            size = sizes[side]
            print(
                f"{lanes:>3} {mode:<10} {side:<8} {env_steps:>9} | "
                f"{wall:>8,.0f} {wall / base_wall:>5.2f}x | {rate_cpu:>8,.0f} {rate_cpu / base_cpu:>5.2f}x | "
                f"{size / 1024:>5.0f}kB {size / env_steps:>6.1f}"
            )
        # The recorder's own hooks, timed on the events of one plain session.
        capture = Capture()
        result = evaluate(
            "CartPole-v1",
            policy,
            episodes=episodes_for(lanes),
            num_envs=lanes,
            seed=args.seed,
            autoreset=mode,
            progress=False,
            options=EvaluationOptions(hooks=[capture]),
        )
        contract = recording.header.contract
        per_step = statistics.median(session["plain"]) / steps
        for side in ("obs on", "obs off"):
            record = SIDES[side][0]
            best = min(
                asyncio.run(replay_events(capture.events, contract, record)) for _ in range(args.repeats)
            )
            hooks_alone.append((lanes, mode, side, best / steps, per_step))
print()
print("recorder hooks alone (events of one plain session replayed into a fresh recorder, best of repeats):")
for lanes, mode, side, seconds, per_step in hooks_alone:
    print(
        f"{lanes:>3} {mode:<10} {side:<8} {seconds * 1e6:>6.2f} us per vector step "
        f"({100 * seconds / per_step:.1f}% of a plain session's {per_step * 1e6:.0f} us)"
    )
os.remove(path)
os.rmdir(workdir)
