"""``rlmesh-gym serve-env`` / ``serve-policy`` as real processes: serving, peers, signals, errors."""

from __future__ import annotations

import asyncio
import signal
import socket

import numpy as np
import pytest
from _serve_fakes import port_is_free, run
from _served import Served
from rlmesh import _rlmesh as b3

from rlmesh_gym.cli import main
from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import RuntimeDriver, RuntimeSessionSpec
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.serve import EnvServer, RemoteEnv, RemoteModel


def test_serve_env_serves_the_b3_runtime_and_stops_cleanly_on_sigterm(no_leaked_threads):
    served = Served("serve-env", "CartPole-v1", "--autoreset", "disabled", "--address", "127.0.0.1:0")
    try:
        address = served.address()
        b3.PyModel(lambda obs: int(np.asarray(obs)[2] > 0)).run_local_for_episodes(address, "", 3)

        async def one_session() -> list[str]:
            remote = await RemoteEnv.connect(address)
            reset = await remote.reset(env_pb2.ResetRequest(seeds=[9]))
            await remote.close()
            return list(reset.response.episode_ids)

        ids = run(one_session())
    finally:
        code, stdout, stderr = served.finish(signal.SIGTERM)
    assert len(ids) == 1
    assert code == 0, stderr
    assert "serving CartPole-v1 (1 lane(s), autoreset DISABLED, edition pin b3, token off)" in stdout
    assert stdout.endswith(f"stopped serving on {address}")
    assert port_is_free(int(address.rsplit(":", 1)[1]))


def test_an_env_server_process_killed_mid_episode_is_a_named_error_for_the_driver(no_leaked_threads):
    served = Served(
        "serve-env", "CartPole-v1", "--num-envs", "2", "--address", "127.0.0.1:0", "--token", "t0k"
    )

    async def scenario(address: str):
        remote = await RemoteEnv.connect(address, token="t0k")
        spec = RuntimeSessionSpec(
            session_id="killed", route_id="r", env_contract=remote.contract, num_envs=2, base_seed=0
        )

        from rlmesh_gym.policies import RandomPolicy
        from rlmesh_gym.runtime import RuntimeHooks

        class KillAfterThree(RuntimeHooks):
            steps = 0

            async def step_completed(self, event) -> None:
                KillAfterThree.steps += 1
                if KillAfterThree.steps == 3:
                    served.process.kill()
                    await asyncio.to_thread(served.process.wait, 30)

        with pytest.raises(EnvRpcError) as lost:
            await RuntimeDriver(
                spec, remote, RandomPolicy(seed=0, contract_or_spaces=remote.contract), hooks=KillAfterThree()
            ).run()
        await remote.close()
        return lost.value

    try:
        lost = run(scenario(served.address()))
    finally:
        code, _, _ = served.finish()
    assert code == -signal.SIGKILL
    assert lost.operation == "env.step" and "transport error: connection closed" in lost.message


@pytest.mark.torch
def test_serve_policy_serves_the_shipped_cartpole_policy_until_sigint(no_leaked_threads):
    served = Served("serve-policy", "--address", "127.0.0.1:0")

    async def scenario(address: str):
        env = GymVectorEnv.make("CartPole-v1", num_envs=2)
        model = await RemoteModel.connect(address, contract=env.contract)
        spec = RuntimeSessionSpec(
            session_id="cli", route_id="r", env_contract=env.contract, num_envs=2, base_seed=0, max_episodes=2
        )
        try:
            report = await RuntimeDriver(spec, env, model).run()
        finally:
            await model.close()
            await env.close(5.0)
        return report

    try:
        report = run(scenario(served.address()))
    finally:
        code, stdout, stderr = served.finish(signal.SIGINT)
    assert report.total_episodes >= 2
    # The shipped policy balances the pole: CartPole episodes reach the 500-step limit.
    assert report.total_steps >= 500
    assert code == 0, stderr
    assert "serving policy pretrained:cartpole (spaces from each route's contract" in stdout


def test_serve_policy_binds_at_startup_from_a_running_env_server(no_leaked_threads):
    async def scenario():
        async with EnvServer(GymVectorEnv.make("CartPole-v1", num_envs=3)) as env_server:
            served = Served(
                "serve-policy", "random", "--contract-from", env_server.address, "--address", "127.0.0.1:0"
            )
            try:
                address = await asyncio.to_thread(served.address)
            finally:
                result = await asyncio.to_thread(served.finish, signal.SIGTERM)
            await env_server.env.close(5.0)
        return address, result

    address, (code, stdout, stderr) = run(scenario(), timeout=90)
    assert code == 0, stderr
    assert "bound to CartPole-v1 from 127.0.0.1:" in stdout and address in stdout


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["serve-env", "NoSuchEnv-v9", "--address", "127.0.0.1:0"], 2, "unknown env id 'NoSuchEnv-v9'"),
        (["serve-env", "CartPole-v1", "--num-envs", "0"], 2, "--num-envs must be at least 1"),
        (["serve-env", "CartPole-v1", "--address", "nowhere"], 2, "expected 'HOST:PORT'"),
        (["serve-env", "CartPole-v1", "--edition-pin", "b4"], 2, "unknown edition pin 'b4'"),
        (["serve-env", "CartPole-v1", "--idle-timeout", "0"], 2, "--idle-timeout must be > 0"),
        (
            ["serve-policy", "no-such-policy", "--address", "127.0.0.1:0"],
            2,
            "is not 'random', 'pretrained:NAME'",
        ),
        pytest.param(  # the list of shipped policies comes from the torch module that holds them
            ["serve-policy", "pretrained:pong", "--address", "127.0.0.1:0"],
            2,
            "no shipped policy 'pong'",
            marks=pytest.mark.torch,
        ),
        (["serve-policy", "os.path:nothing_here", "--address", "127.0.0.1:0"], 2, "has no attribute"),
        (["serve-policy", "random", "--env-id", "CartPole-v1", "--token", "b\u00e4d"], 2, "printable ASCII"),
    ],
)
def test_bad_command_lines_are_named_errors(argv, code, message, capsys):
    assert main(argv) == code
    assert message in capsys.readouterr().err


def test_a_taken_port_is_a_runtime_failure(capsys):
    async def scenario():
        async with EnvServer(GymVectorEnv.make("CartPole-v1")) as taken:
            result = await asyncio.to_thread(main, ["serve-env", "CartPole-v1", "--address", taken.address])
            await taken.env.close(5.0)
        return result

    assert run(scenario()) == 1
    assert "could not bind" in capsys.readouterr().err


def test_a_taken_port_gives_one_error_line_and_no_grpc_log():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        address = f"127.0.0.1:{holder.getsockname()[1]}"
        served = Served("serve-env", "CartPole-v1", "--address", address)
        code, stdout, stderr = served.finish(timeout=60)
    assert code == 1
    assert stderr.splitlines() == [
        f"rlmesh-gym: error: env server could not bind {address}: address already in use (is the port "
        "already in use, or the host not an address of this machine?)"
    ]
    assert "add_port" not in stderr


def test_serve_env_stops_itself_after_the_idle_shutdown():
    served = Served("serve-env", "CartPole-v1", "--address", "127.0.0.1:0", "--idle-shutdown", "1")
    address = served.address()

    async def one_session() -> int:
        remote = await RemoteEnv.connect(address)
        reset = await remote.reset(env_pb2.ResetRequest(seeds=[9]))
        await remote.close()
        return len(reset.response.episode_ids)

    lanes = run(one_session())
    code, stdout, stderr = served.finish(timeout=30)  # no signal: it must stop on its own
    assert lanes == 1
    assert code == 0, stderr
    assert stdout.endswith(f"stopped serving on {address} (idle timeout)")
    assert port_is_free(int(address.rsplit(":", 1)[1]))


@pytest.mark.slow
@pytest.mark.torch
def test_serve_policy_refuses_a_policy_that_cannot_act_in_the_env_before_serving():
    served = Served("serve-policy", "--env-id", "MountainCar-v0", "--address", "127.0.0.1:0")
    code, stdout, stderr = served.finish(timeout=120)
    assert code == 2
    assert "serving" not in stdout
    assert stderr.startswith("rlmesh-gym: error: policy 'pretrained:cartpole' cannot act in MountainCar-v0: ")
    assert "expected observations with last dimension 4, got shape (1, 2)" in stderr
