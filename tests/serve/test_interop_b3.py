"""Live interop with rlmesh==0.1.0b3: its runtime and clients against our servers, our driver
against its servers. Everything runs on 127.0.0.1 with free ports and bounded waits."""

from __future__ import annotations

import asyncio
import socket
import threading

import gymnasium as gym
import numpy as np
import pytest
import rlmesh
from _message_form import messages
from _serve_fakes import run
from rlmesh import _rlmesh as b3

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import CallablePolicy, RandomPolicy
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import RuntimeDriver, RuntimeHooks, RuntimeSessionSpec
from rlmesh_gym.runtime.seams import RuntimeEnv, RuntimeEnvReset, RuntimeEnvStep
from rlmesh_gym.serve import EnvServer, ModelServer, RemoteEnv, RemoteModel

EPISODES = 4


def pole_policy(observation: np.ndarray) -> int:
    """Push the cart toward the side the pole leans to (deterministic)."""
    return int(np.asarray(observation, dtype=np.float32).reshape(-1)[2] > 0)


class SeedQueue(gym.Wrapper):
    """Resets that come without a seed (b3's run_local never sends one) take the next seed of a list."""

    def __init__(self, env: gym.Env, seeds: list[int]) -> None:
        super().__init__(env)
        self.pending = list(seeds)

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=self.pending.pop(0) if seed is None else seed, options=options)


class Recording(RuntimeEnv):
    """Forwards to an env and keeps every completed episode it reports (the server-side record)."""

    def __init__(self, env: GymVectorEnv) -> None:
        self.env = env
        self.contract = env.contract
        self.num_envs = env.num_envs
        self.completed: list[env_pb2.EpisodeMetadata] = []

    async def reset(self, request: env_pb2.ResetRequest) -> RuntimeEnvReset:
        return await messages(self.env).reset(request)

    async def step(self, request: env_pb2.StepRequest) -> RuntimeEnvStep:
        result = await messages(self.env).step(request)
        self.completed.extend(result.response.completed_episodes)
        return result

    def drain_episodes(self) -> list[env_pb2.EpisodeMetadata]:
        return self.env.drain_episodes()


def in_process_returns(seeds: list[int]) -> list[tuple[int, float]]:
    """(length, return) of pole_policy on CartPole-v1 reset with each seed, plain gymnasium."""
    env = gym.make("CartPole-v1")
    episodes = []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        length, total, done = 0, 0.0, False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(pole_policy(observation))
            length, total, done = length + 1, total + float(reward), terminated or truncated
        episodes.append((length, total))
    env.close()
    return episodes


def test_b3_runtime_completes_episodes_against_our_served_cartpole(no_leaked_threads):
    seeds = [11, 12, 13, 14, 15, 16]

    async def scenario():
        served = Recording(GymVectorEnv(SeedQueue(gym.make("CartPole-v1"), seeds)))
        async with EnvServer(served) as server:
            model = b3.PyModel(pole_policy)
            await asyncio.to_thread(model.run_local_for_episodes, server.address, "", EPISODES)
            assert await server.wait_idle(10.0)
        return served.completed

    completed = run(scenario())
    assert len(completed) == EPISODES
    served = [(m.step_count, m.cumulative_reward) for m in completed]
    assert served == in_process_returns(seeds[:EPISODES])
    assert all(m.terminated or m.truncated for m in completed)


def test_b3_vector_client_sees_the_observations_of_the_env_itself():
    num_envs, seeds = 8, list(range(100, 108))
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 2, size=(40, num_envs))

    reference = gym.make_vec("CartPole-v1", num_envs, vectorization_mode="sync")
    expected_obs, _ = reference.reset(seed=seeds)
    expected = [expected_obs]
    for step_actions in actions:
        expected.append(reference.step(step_actions))
    reference.close()

    async def scenario():
        served = GymVectorEnv.make("CartPole-v1", num_envs=num_envs)
        async with EnvServer(served) as server:

            def drive():
                client = rlmesh.numpy.RemoteVectorEnv(server.address)
                try:
                    # One int seed, as rlmesh documents it: lanes get seed, seed+1, ... as in gymnasium.
                    int_seeded = client.reset(seed=seeds[0])[0]
                    got = [client.reset(seed=seeds)[0]]
                    got.extend(client.step(step_actions) for step_actions in actions)
                    return client.num_envs, int_seeded, got
                finally:
                    client.close()

            result = await asyncio.to_thread(drive)
            assert await server.wait_idle(10.0)
            await served.close(5.0)
        return result

    lanes, int_seeded, got = run(scenario())
    assert lanes == num_envs
    np.testing.assert_array_equal(np.asarray(int_seeded), expected[0])  # seeds are 100..107
    np.testing.assert_array_equal(np.asarray(got[0]), expected[0])
    autoresets = 0
    for (obs, rewards, terminated, truncated, _), (e_obs, e_rewards, e_term, e_trunc, _) in zip(
        got[1:], expected[1:], strict=True
    ):
        np.testing.assert_array_equal(np.asarray(obs), e_obs)
        np.testing.assert_array_equal(np.asarray(rewards, dtype=np.float64), e_rewards)
        np.testing.assert_array_equal(np.asarray(terminated, dtype=bool), e_term)
        np.testing.assert_array_equal(np.asarray(truncated, dtype=bool), e_trunc)
        autoresets += int(np.asarray(e_term).sum())
    assert autoresets > 0  # the run crossed NEXT_STEP autoresets


class DictCounter(gym.Env):
    """Dict observation {"pos": Box(2), "count": Discrete(10)}; every episode lasts ``length`` steps."""

    metadata = {"render_modes": []}

    def __init__(self, length: int = 5) -> None:
        self.observation_space = gym.spaces.Dict(
            {"pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32), "count": gym.spaces.Discrete(10)}
        )
        self.action_space = gym.spaces.Discrete(2)
        self.length = length
        self.t = 0

    def _obs(self):
        return {"pos": np.array([self.t / 10, -self.t / 10], np.float32), "count": self.t}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), float(action) + 0.5, self.t >= self.length, False, {}


async def drive(env: RuntimeEnv, model, episodes: int, *, num_envs: int = 1, base_seed: int | None = 7):
    spec = RuntimeSessionSpec(
        session_id="serve-test",
        route_id="route",
        env_contract=env.contract,
        num_envs=num_envs,
        max_episodes=episodes,
        base_seed=base_seed,
        close_env_on_end=False,
    )
    completed: list[tuple[int, int, float]] = []

    class Collect(RuntimeHooks):
        async def episode_completed(self, event) -> None:
            completed.append((event.env_index, event.step_count, event.cumulative_reward))

    report = await RuntimeDriver(spec, env, model, hooks=Collect()).run()
    return report, completed


@pytest.mark.parametrize(
    "env_factory", [lambda: gym.make("CartPole-v1"), DictCounter], ids=["cartpole", "dict"]
)
def test_our_driver_with_remote_env_completes_episodes_against_rlmesh_env_server(
    env_factory, no_leaked_threads
):
    async def scenario():
        upstream = rlmesh.EnvServer(env_factory(), "127.0.0.1:0")
        upstream.start()
        try:
            remote = await RemoteEnv.connect(upstream.address.removeprefix("tcp://"), connect_timeout=10)
            try:
                report, completed = await drive(
                    remote, RandomPolicy(seed=3, contract_or_spaces=remote.contract), EPISODES
                )
            finally:
                await remote.close(5.0)
            local = GymVectorEnv(env_factory())
            local_report, local_completed = await drive(
                local, RandomPolicy(seed=3, contract_or_spaces=local.contract), EPISODES
            )
            await local.close(5.0)
        finally:
            upstream.shutdown()
            await asyncio.to_thread(upstream.wait, 10.0)
        return remote.contract, report, completed, local_report, local_completed

    contract, report, completed, local_report, local_completed = run(scenario())
    assert report.total_episodes == EPISODES and len(completed) == EPISODES
    # Same seeds, same random actions: the remote episodes are exactly the in-process ones.
    assert completed == local_completed
    assert report.total_steps == local_report.total_steps
    if contract.observation_space.WhichOneof("spec") == "dict":
        assert list(contract.observation_space.dict.keys) == ["count", "pos"]
        assert [steps for _, steps, _ in completed] == [5] * EPISODES


def test_our_driver_with_remote_model_matches_the_in_process_torch_policy(no_leaked_threads):
    pytest.importorskip("torch")  # the only torch test here; the rest of the file runs without it
    from rlmesh_gym.policies import TorchPolicy
    from rlmesh_gym.policies.pretrained import load_pretrained

    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=4)
        served_policy = TorchPolicy(load_pretrained("cartpole"))  # spaces come from ConfigureRoute
        async with ModelServer(served_policy) as server:
            remote = await RemoteModel.connect(server.address, contract=env.contract)
            try:
                report, completed = await drive(env, remote, 8, num_envs=4)
            finally:
                await remote.close()
        await env.close(5.0)
        local_env = GymVectorEnv.make("CartPole-v1", num_envs=4)
        local_report, local_completed = await drive(
            local_env, TorchPolicy(load_pretrained("cartpole"), local_env.contract), 8, num_envs=4
        )
        await local_env.close(5.0)
        return report, completed, local_report, local_completed

    report, completed, local_report, local_completed = run(scenario())
    assert report.total_episodes >= 8
    assert completed == local_completed
    assert report.total_steps == local_report.total_steps


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_our_driver_with_remote_model_against_b3_pymodel_serve():
    # rlmesh 0.1.0b3's PyModel answers one action per predict, so it can only serve one lane.
    address = f"127.0.0.1:{_free_port()}"
    model = b3.PyModel(pole_policy)
    serving = threading.Thread(
        target=model.serve, args=(address, "", b3.ServeOptions(allow_remote_shutdown=True)), daemon=True
    )
    serving.start()

    async def scenario():
        env = GymVectorEnv.make("CartPole-v1", num_envs=1, autoreset="disabled")
        remote = await RemoteModel.connect(address, contract=env.contract, connect_timeout=10)
        try:
            report, completed = await drive(env, remote, EPISODES)
        finally:
            await remote.close()
            stopper = await RemoteModel.connect(address, connect_timeout=10)
            accepted = await stopper.shutdown("test over")
            await stopper.close()
        await env.close(5.0)
        local_env = GymVectorEnv.make("CartPole-v1", num_envs=1, autoreset="disabled")
        local = CallablePolicy(lambda rows: np.array([pole_policy(row) for row in rows]), local_env.contract)
        local_report, local_completed = await drive(local_env, local, EPISODES)
        await local_env.close(5.0)
        return accepted, report, completed, local_completed

    accepted, report, completed, local_completed = run(scenario())
    serving.join(10.0)
    assert accepted and not serving.is_alive()
    assert report.total_episodes == EPISODES
    assert completed == local_completed
