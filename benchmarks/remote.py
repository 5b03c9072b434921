"""Remote env throughput: our driver + RemoteEnv against rlmesh 0.1.0b3's own clients, same served env.

One ``rlmesh-gym serve-env CartPole-v1`` process serves the env on 127.0.0.1; both sides drive it
over gRPC with the same deterministic policy (push toward the side the pole leans to):

* ours: ``RuntimeDriver`` + ``RemoteEnv`` + ``CallablePolicy`` (the Python asyncio driver);
* N=1 baseline: rlmesh 0.1.0b3's Rust runtime, ``PyModel(policy).run_local_for_episodes``;
* N=8 baseline: rlmesh 0.1.0b3's Rust vector client, ``PyVectorEnvClient.step`` in a plain
  loop. (b3's runtime cannot drive N > 1 lanes from Python: its ``PyModel`` returns one action
  per predict, so the env answers "expected 8 actions, got 1".)

Each side runs the same number of env steps per measurement; the best of ``--repeats`` counts.
Env steps/s counts every lane's step (N per driver step). ratio = ours / baseline.

    python benchmarks/remote.py                 # about 30 s
    python benchmarks/remote.py --steps 20000   # steadier numbers on a busy machine
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("RUST_LOG", "warn")  # rlmesh's runtime logs a timing summary per session otherwise
from rlmesh import _rlmesh as b3  # noqa: E402

from rlmesh_gym.policies import CallablePolicy  # noqa: E402
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec  # noqa: E402
from rlmesh_gym.serve import RemoteEnv  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=6000, help="env steps (all lanes) per measurement")
parser.add_argument("--repeats", type=int, default=3, help="measurements per side; the fastest counts")
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8], help="lane counts to measure")
args = parser.parse_args()


def pole_action(observation) -> int:
    return int(np.asarray(observation, dtype=np.float32).reshape(-1)[2] > 0)


def pole_actions(observations: np.ndarray) -> np.ndarray:
    return (np.asarray(observations)[:, 2] > 0).astype(np.int64)


def start_server(lanes: int) -> tuple[subprocess.Popen, str]:
    """``rlmesh-gym serve-env`` in its own process (its own GIL); returns it and its address."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rlmesh_gym",
            "serve-env",
            "CartPole-v1",
            "--num-envs",
            str(lanes),
            "--address",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    for line in process.stdout:
        match = re.match(r"^rlmesh-gym: serving .* on (\S+)$", line.strip())
        if match:
            return process, match.group(1)
    raise SystemExit(f"serve-env exited with {process.wait()} before serving")


async def ours(address: str, lanes: int, steps: int) -> tuple[int, float]:
    """Our driver over RemoteEnv until ``steps`` env steps; returns (env steps, seconds)."""
    env = await RemoteEnv.connect(address)
    policy = CallablePolicy(pole_actions, env.contract)
    spec = RuntimeSessionSpec(
        session_id="bench",
        route_id="remote",
        env_contract=env.contract,
        num_envs=lanes,
        base_seed=0,
        close_env_on_end=False,
    )
    # Stop once enough driver steps ran (request_stop ends the run after the current step).
    target = -(-steps // lanes)

    class StopAt(RuntimeHooks):
        count = 0

        async def step_completed(self, event) -> None:
            StopAt.count += 1
            if StopAt.count == target:
                driver.request_stop("benchmark done")

    driver = RuntimeDriver(spec, env, policy, hooks=StopAt())
    started = time.perf_counter()
    report = await driver.run()
    elapsed = time.perf_counter() - started
    await env.close(5.0)
    return report.total_steps * lanes, elapsed


def b3_runtime(address: str, steps: int) -> tuple[int, float]:
    """rlmesh 0.1.0b3's runtime (run_local) on one lane, episodes until >= ``steps`` steps."""
    calls = 0

    def predict(observation):
        nonlocal calls
        calls += 1
        return pole_action(observation)

    total, elapsed = 0, 0.0
    while total < steps:
        calls = 0
        started = time.perf_counter()
        b3.PyModel(predict).run_local_for_episodes(address, "", 20)
        elapsed += time.perf_counter() - started
        total += calls  # one predict per env step
        time.sleep(0.05)  # let the server notice the stream ended before the next session
    return total, elapsed


def b3_vector_client(address: str, lanes: int, steps: int) -> tuple[int, float]:
    """rlmesh 0.1.0b3's vector client in a plain reset/step loop with the same policy."""
    client = b3.PyVectorEnvClient(address, connect_timeout_seconds=10)
    client.handshake()
    target = -(-steps // lanes)
    started = time.perf_counter()
    observations, _ = client.reset(list(range(lanes)))
    for _ in range(target):
        observations, *_ = client.step(pole_actions(np.asarray(observations)))
    elapsed = time.perf_counter() - started
    client.close()
    return target * lanes, elapsed


print(f"CartPole-v1 over gRPC on 127.0.0.1, {args.steps} env steps per measurement, best of {args.repeats}")
print(f"{'lanes':>5}  {'ours (steps/s)':>15}  {'rlmesh b3 (steps/s)':>20}  {'b3 path':<22}  {'ratio':>6}")
for lanes in args.lanes:
    server, address = start_server(lanes)
    try:
        best_ours, best_base = 0.0, 0.0
        for _ in range(args.repeats):
            done, seconds = asyncio.run(ours(address, lanes, args.steps))
            best_ours = max(best_ours, done / seconds)
            time.sleep(0.05)
            if lanes == 1:
                done, seconds = b3_runtime(address, args.steps)
            else:
                done, seconds = b3_vector_client(address, lanes, args.steps)
            best_base = max(best_base, done / seconds)
            time.sleep(0.05)
        path = "runtime (run_local)" if lanes == 1 else "vector client loop"
        print(
            f"{lanes:>5}  {best_ours:>15,.0f}  {best_base:>20,.0f}  {path:<22}  {best_ours / best_base:>6.2f}"
        )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
