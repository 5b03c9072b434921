"""``rlmesh-gym eval --env-address / --policy-address``: evaluation against remote rlmesh peers."""

from __future__ import annotations

import asyncio
import json
import socket

import gymnasium as gym
import pytest
import rlmesh
from _serve_fakes import CountingEnv, run

from rlmesh_gym.cli import build_parser, main
from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import evaluate
from rlmesh_gym.policies import TorchPolicy
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.serve import EnvServer, ModelServer

pytestmark = pytest.mark.torch  # (tests/conftest.py)


def eval_json(argv: list[str], capsys) -> tuple[int, dict | None, str]:
    code = main(["eval", *argv, "--json", "--no-progress"])
    captured = capsys.readouterr()
    return code, (json.loads(captured.out) if code == 0 else None), captured.err


def row(lane: int, seed: int | None, episode_return: float, length: int) -> tuple[int, int, float, int]:
    return lane, -1 if seed is None else seed, episode_return, length  # autoreset episodes have no seed


def episode_rows(result: dict) -> list[tuple[int, int, float, int]]:
    return sorted(row(e["lane"], e["seed"], e["episode_return"], e["length"]) for e in result["episodes"])


def local_rows(local) -> list[tuple[int, int, float, int]]:
    return sorted(row(e.lane, e.seed, e.episode_return, e.length) for e in local.episodes)


def test_eval_env_address_matches_the_in_process_evaluation(capsys, no_leaked_threads):
    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=4, autoreset="disabled")
        async with EnvServer(env) as server:
            outcome = await asyncio.to_thread(
                eval_json, ["--env-address", server.address, "--episodes", "6", "--seed", "3"], capsys
            )
        await env.close(5.0)
        return outcome

    code, result, err = run(scenario(), timeout=60)
    assert code == 0, err
    local = evaluate(
        "CartPole-v1",
        "pretrained:cartpole",
        episodes=6,
        num_envs=4,
        seed=3,
        autoreset="disabled",
        progress=False,
    )
    assert len(result["episodes"]) == 6
    assert episode_rows(result) == local_rows(local)


def test_eval_policy_address_serves_the_actions(capsys, no_leaked_threads):
    async def scenario():
        async with ModelServer(TorchPolicy(load_pretrained("cartpole"))) as server:
            return await asyncio.to_thread(
                eval_json,
                ["CartPole-v1", "--num-envs", "2", "--policy-address", server.address, "--episodes", "4"],
                capsys,
            )

    code, result, err = run(scenario(), timeout=60)
    assert code == 0, err
    local = evaluate("CartPole-v1", "pretrained:cartpole", episodes=4, num_envs=2, seed=0, progress=False)
    assert episode_rows(result) == local_rows(local)


def test_eval_policy_address_builds_the_local_env_with_the_env_kwargs(capsys, no_leaked_threads):
    async def scenario():
        async with ModelServer(TorchPolicy(load_pretrained("cartpole"))) as server:
            return await asyncio.to_thread(
                eval_json,
                ["CartPole-v1", "--policy-address", server.address, "--episodes", "2"]
                + ["--env-kwargs", "max_episode_steps=7"],
                capsys,
            )

    code, result, err = run(scenario(), timeout=60)
    assert code == 0, err
    # The shipped policy balances for 500 steps: only the kwarg ends its episodes at 7.
    assert [episode["length"] for episode in result["episodes"]] == [7, 7]


def test_eval_with_both_peers_remote_against_rlmesh_env_server(capsys, no_leaked_threads):
    async def scenario():
        upstream = rlmesh.EnvServer(gym.make("CartPole-v1"), "127.0.0.1:0")
        upstream.start()
        try:
            async with ModelServer(TorchPolicy(load_pretrained("cartpole"))) as model_server:
                return await asyncio.to_thread(
                    eval_json,
                    [
                        "--env-address",
                        upstream.address.removeprefix("tcp://"),
                        "--policy-address",
                        model_server.address,
                        "--episodes",
                        "2",
                    ],
                    capsys,
                )
        finally:
            upstream.shutdown()
            await asyncio.to_thread(upstream.wait, 10.0)

    code, result, err = run(scenario(), timeout=60)
    assert code == 0, err
    assert [e["episode_return"] for e in result["episodes"]] == [500.0, 500.0]


def test_eval_remote_errors_are_named(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # Nothing listens there: the error comes when the connect timeout ends. Waiting out the 30 s
    # default would prove nothing more than its value does.
    assert build_parser().parse_args(["eval"]).connect_timeout == 30.0
    argv = ["--env-address", f"127.0.0.1:{port}", "--episodes", "1", "--connect-timeout", "0.5"]
    code, _, err = eval_json(argv, capsys)
    assert code == 1 and "no server answered" in err and f"127.0.0.1:{port}" in err
    code, _, err = eval_json(["--env-address", "nowhere", "--episodes", "1"], capsys)
    assert code == 2 and "expected 'HOST:PORT'" in err

    async def both_policies():
        async with ModelServer(TorchPolicy(load_pretrained("cartpole"))) as server:
            return await asyncio.to_thread(
                eval_json, ["--policy", "random", "--policy-address", server.address], capsys
            )

    code, _, err = run(both_policies())
    assert code == 2 and "either --policy or --policy-address" in err


def test_eval_env_address_gives_up_on_a_hung_server_after_the_request_timeout(capsys, no_leaked_threads):
    class HangingEnv(CountingEnv):
        async def reset(self, request):
            await asyncio.sleep(60)
            return await super().reset(request)

    assert build_parser().parse_args(["eval"]).request_timeout == 300.0  # the default

    async def scenario():
        async with EnvServer(HangingEnv()) as server:
            argv = ["--env-address", server.address, "--policy", "random", "--episodes", "1"]
            return await asyncio.to_thread(eval_json, [*argv, "--request-timeout", "0.5"], capsys)

    code, _, err = run(scenario(), timeout=60)
    assert code == 1, err
    assert "within request_timeout=0.5s" in err
