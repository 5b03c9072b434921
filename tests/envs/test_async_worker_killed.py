"""Killing one AsyncVectorEnv worker mid-evaluation leaves no other worker process running."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys, threading, time
    import psutil
    from rlmesh_gym import EvaluationOptions, evaluate
    from rlmesh_gym.evaluation import EvaluationError

    VICTIM = int(sys.argv[1])
    me = psutil.Process()
    workers = []

    def kill_one_worker():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            children = [p for p in me.children() if "python" in p.name().lower()]
            if len(children) >= 3:
                break
            time.sleep(0.05)
        time.sleep(1.0)  # let it step a while
        workers.extend(sorted(children, key=lambda p: (p.create_time(), p.pid)))
        workers[VICTIM].kill()

    threading.Thread(target=kill_one_worker, daemon=True).start()
    try:
        evaluate(
            "CartPole-v1", "random", episodes=10**7, num_envs=3, progress=False,
            options=EvaluationOptions(vectorization="async"),
        )
        print("no error")
    except EvaluationError as error:
        print("EvaluationError", flush=True)
    alive = [p.pid for p in workers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    print("alive after evaluate:", alive, flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 2])
def test_killing_one_async_worker_ends_evaluate_and_leaves_no_worker_running(victim):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(victim)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["EvaluationError", "alive after evaluate: []"], result.stderr
