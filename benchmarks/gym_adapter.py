"""The gymnasium adapter over gRPC beside rlmesh 0.1.0b3's own vector client, on the same served env.

One ``rlmesh-gym serve-env CartPole-v1 --num-envs N`` process serves the env on 127.0.0.1; both
sides run the same gymnasium random-action loop against it (``reset(seed=0)``, then ``step`` with
actions from one seeded numpy generator, NEXT_STEP autoreset on the server):

* ours: ``rlmesh_gym.serve.connect_gym_vector_env`` (a ``gymnasium.vector.VectorEnv`` over
  ``RemoteEnv``, driven from its own event-loop thread);
* rlmesh b3: ``rlmesh.numpy.RemoteVectorEnv`` (its Rust client).

Each side runs the same number of env steps per measurement (every lane's step counts); the best
of ``--repeats`` counts. ratio = ours / b3.

    python benchmarks/gym_adapter.py                # N = 1 and 8
    python benchmarks/gym_adapter.py --steps 20000  # steadier numbers on a busy machine
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np

os.environ.setdefault("RUST_LOG", "warn")  # rlmesh's client logs every session otherwise
import rlmesh.numpy  # noqa: E402

from rlmesh_gym.serve import connect_gym_vector_env  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
parser.add_argument("--steps", type=int, default=6000, help="env steps (all lanes) per measurement")
parser.add_argument("--repeats", type=int, default=3, help="measurements per side; the fastest counts")
parser.add_argument("--lanes", type=int, nargs="+", default=[1, 8], help="lane counts to measure")
args = parser.parse_args()


def start_server(lanes: int) -> tuple[subprocess.Popen, str]:
    """``rlmesh-gym serve-env`` in its own process (its own GIL); returns it and its address."""
    command = [sys.executable, "-m", "rlmesh_gym", "serve-env", "CartPole-v1", "--num-envs", str(lanes)]
    process = subprocess.Popen(
        [*command, "--address", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    for line in process.stdout:
        match = re.match(r"^rlmesh-gym: serving .* on (\S+)$", line.strip())
        if match:
            return process, match.group(1)
    raise SystemExit(f"serve-env exited with {process.wait()} before serving")


def random_loop(env, lanes: int, steps: int) -> tuple[int, float]:
    """``steps`` env steps of random actions on a gymnasium-style vector env; (env steps, seconds)."""
    rng = np.random.default_rng(0)
    target = -(-steps // lanes)
    actions = rng.integers(0, 2, size=(target, lanes))
    env.reset(seed=0)
    started = time.perf_counter()
    for row in actions:
        env.step(row)
    return target * lanes, time.perf_counter() - started


def ours(address: str, lanes: int, steps: int) -> tuple[int, float]:
    env = connect_gym_vector_env(address)
    try:
        return random_loop(env, lanes, steps)
    finally:
        env.close()


def b3(address: str, lanes: int, steps: int) -> tuple[int, float]:
    env = rlmesh.numpy.RemoteVectorEnv(address)
    try:
        return random_loop(env, lanes, steps)
    finally:
        env.close()


print(f"CartPole-v1 over gRPC on 127.0.0.1, {args.steps} env steps per measurement, best of {args.repeats}")
print(f"{'lanes':>5}  {'ours (steps/s)':>15}  {'rlmesh b3 RemoteVectorEnv':>26}  {'ratio':>6}")
for lanes in args.lanes:
    server, address = start_server(lanes)
    try:
        best_ours, best_b3 = 0.0, 0.0
        for _ in range(args.repeats):
            done, seconds = ours(address, lanes, args.steps)
            best_ours = max(best_ours, done / seconds)
            time.sleep(0.05)  # let the server end the session before the next client joins
            done, seconds = b3(address, lanes, args.steps)
            best_b3 = max(best_b3, done / seconds)
            time.sleep(0.05)
        print(f"{lanes:>5}  {best_ours:>15,.0f}  {best_b3:>26,.0f}  {best_ours / best_b3:>6.2f}")
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
