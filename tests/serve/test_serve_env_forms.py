"""``serve-env`` as upstream serves one env (b3's single-env client sees the env's own infos),
the one-lane vector form on request, ``--offload``, and the readiness line."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import rlmesh
from _serve_fakes import run
from test_cli_serve import Served

from rlmesh_gym.proto import env_pb2
from rlmesh_gym.serve import fetch_contract

HERE = Path(__file__).parent


def serve_info_env(*extra: str) -> Served:
    # _info_env registers InfoEcho-v0 when gymnasium imports it for the id "_info_env:InfoEcho-v0".
    path = os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))
    return Served(
        "serve-env", "_info_env:InfoEcho-v0", "--address", "127.0.0.1:0", *extra, env={"PYTHONPATH": path}
    )


def b3_session(address: str) -> tuple[dict, dict, dict]:
    """reset(seed=123), then one step, with upstream's single-env client."""
    env = rlmesh.RemoteEnv(address)
    try:
        _, reset_info = env.reset(seed=123)
        _, reward, terminated, truncated, step_info = env.step(1)
        again_info = env.reset(seed=7)[1]
    finally:
        env.close()
    assert (reward, terminated, truncated) == (1.0, False, False)
    return reset_info, step_info, again_info


def test_one_lane_is_served_as_upstream_serves_a_single_env(no_leaked_threads):
    served = serve_info_env("--offload")
    try:
        address = served.address()
        reset_info, step_info, again_info = b3_session(address)
        contract = run(fetch_contract(address))
    finally:
        code, stdout, stderr = served.finish(signal.SIGTERM)
    assert code == 0, stderr
    assert reset_info["seed"] == 123 and reset_info["note"] == "reset"
    assert again_info["seed"] == 7
    assert dict(step_info) == {"t": 1, "label": "step-1"}
    assert contract.num_envs == 1 and contract.autoreset_mode == env_pb2.AUTORESET_MODE_DISABLED
    # The readiness line names the port actually bound (port 0 asked for).
    banner = "rlmesh-gym: serving InfoEcho-v0 (1 lane(s), autoreset DISABLED, edition pin b3, token off)"
    assert f"{banner} on {address}" in stdout.splitlines()
    assert not address.endswith(":0")


def test_vector_keeps_the_one_lane_vector_env_with_its_autoreset_mode(no_leaked_threads):
    served = serve_info_env("--vector", "--autoreset", "same_step")
    try:
        address = served.address()
        contract = run(fetch_contract(address))
        env = rlmesh.RemoteEnv(address)
        try:
            reset_info = env.reset(seed=123)[1]
        finally:
            env.close()
    finally:
        code, _, stderr = served.finish(signal.SIGTERM)
    assert code == 0, stderr
    assert contract.num_envs == 1 and contract.autoreset_mode == env_pb2.AUTORESET_MODE_SAME_STEP
    assert reset_info["seed"] == [123]  # gymnasium's vectorised info layout


@pytest.mark.parametrize("autoreset", ["next_step", "same_step"])
def test_a_one_lane_autoreset_mode_only_vector_envs_have_implies_the_vector_form(autoreset):
    served = Served("serve-env", "CartPole-v1", "--autoreset", autoreset, "--address", "127.0.0.1:0")
    try:
        contract = run(fetch_contract(served.address()))
    finally:
        served.finish(signal.SIGTERM)
    assert contract.autoreset_mode == env_pb2.AutoresetMode.Value(f"AUTORESET_MODE_{autoreset.upper()}")
