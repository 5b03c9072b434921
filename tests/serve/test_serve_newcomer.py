"""Serving as a newcomer meets it: hints that name the fix the reader can apply, a summary that
names the model server, and the insecure-bind warning importable and pointing at the caller."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from _serve_fakes import run

from rlmesh_gym.cli import main
from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.serve import AuthenticationError, EnvServer, InsecureBindWarning, ModelServer, RemoteEnv

pytestmark = pytest.mark.torch  # (tests/conftest.py)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_token_protected_server_tells_cli_users_about_the_environment_variable(capsys, monkeypatch):
    monkeypatch.delenv("RLMESH_GYM_TOKEN", raising=False)

    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=1)
        try:
            async with EnvServer(env, token="secret") as server:
                cli = await asyncio.to_thread(
                    run_cli, capsys, "eval", "--env-address", server.address, "--no-progress"
                )
                with pytest.raises(AuthenticationError) as raised:
                    await RemoteEnv.connect(server.address)
                return cli, str(raised.value)
        finally:
            await env.close(5.0)

    (code, _, err), python_message = run(scenario(), timeout=60)
    assert code == 1
    assert "set $RLMESH_GYM_TOKEN" in err and "token=" not in err
    assert "pass token=..." in python_message and "RLMESH_GYM_TOKEN" not in python_message


def test_a_remote_model_run_names_the_model_server_in_its_summary(capsys):
    async def scenario():
        async with ModelServer(TorchPolicy(load_pretrained())) as server:
            outcome = await asyncio.to_thread(
                run_cli,
                capsys,
                *("eval", "CartPole-v1", "--num-envs", "2", "--episodes", "2", "--no-progress"),
                *("--policy-address", server.address),
            )
            return server.address, outcome

    address, (code, out, err) = run(scenario(), timeout=60)
    assert code == 0, err
    assert f"policy model server {address} |" in out.splitlines()[0]


def test_the_insecure_bind_warning_points_at_the_line_that_started_the_server():
    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=1)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                async with EnvServer(env, address="0.0.0.0:0"):
                    pass
            return caught
        finally:
            await env.close(5.0)

    caught = run(scenario(), timeout=60)
    (warning,) = [w for w in caught if issubclass(w.category, InsecureBindWarning)]
    assert warning.filename == __file__
    assert "Pass a token (token=...)" in str(warning.message)
