"""Custom gymnasium vector envs (one RNG, no reset_mask) and vector reward wrappers."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from _message_form import messages
from gym_scripted import action_request, run
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import TransformReward

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2, model_pb2
from rlmesh_gym.runtime import (
    EnvRpcError,
    RuntimeDriver,
    RuntimeHooks,
    RuntimeModel,
    RuntimeModelPrediction,
    RuntimeSessionSpec,
)

SINGLE_SEED_WARNING = (
    r"CartPoleVectorEnv is a custom gymnasium vector env whose reset takes one int seed .* first lane's "
    r"seed \(5\).* vectorization_mode=\"sync\""
)


class AlternatingModel(RuntimeModel):
    """Plays action ``slot.step % 2`` on every lane."""

    async def predict(self, request: model_pb2.PredictRequest) -> RuntimeModelPrediction:
        response = model_pb2.PredictResponse()
        response.context.CopyFrom(request.context)
        actions = [slot.step % 2 for slot in request.context.slots]
        response.action.bytes.data = np.asarray(actions, dtype="<i8").tobytes()
        return RuntimeModelPrediction(response)


class Completed(RuntimeHooks):
    def __init__(self) -> None:
        self.episodes: list[env_pb2.EpisodeMetadata] = []

    async def episode_completed(self, event) -> None:
        self.episodes.append(event.metadata)


def test_make_vec_default_mode_is_seeded_with_one_int_and_records_no_lane_seed():
    async def body():
        venv = gym.make_vec("CartPole-v1", 2)  # vectorization_mode="vector_entry_point"
        assert isinstance(venv, CartPoleVectorEnv)
        bare = gym.make_vec("CartPole-v1", 2)
        env = GymVectorEnv(venv)
        with pytest.warns(RuntimeWarning, match=SINGLE_SEED_WARNING):
            reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=[5, 9]))).response
        bare_obs, _ = bare.reset(seed=5)
        assert reset.observation.bytes.data == bare_obs.tobytes()  # seeded with the first lane's seed

        completed = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the seed warning comes once per adapter
            await messages(env).reset(env_pb2.ResetRequest(seeds=[5, 9]))
            bare.reset(seed=5)
            for t in range(60):
                actions = [t % 2, (t // 3) % 2]
                bare_obs, *_ = bare.step(np.asarray(actions))
                response = (await messages(env).step(action_request(actions))).response
                assert response.observation.bytes.data == bare_obs.tobytes()
                completed.extend(response.completed_episodes)
        assert completed, "expected CartPole episodes to finish within 60 alternating steps"
        assert not any(m.HasField("seed") for m in completed)  # which seed a lane got is unknown
        await env.close(1.0)
        bare.close()

    run(body())


def test_make_vec_default_mode_runs_a_seeded_driver_session():
    async def body():
        env = GymVectorEnv(gym.make_vec("CartPole-v1", 2))
        hooks = Completed()
        spec = RuntimeSessionSpec(
            session_id="s",
            route_id="r",
            env_contract=env.contract,
            num_envs=env.num_envs,
            base_seed=1,
            max_episodes=4,
        )
        with pytest.warns(RuntimeWarning, match="custom gymnasium vector env"):
            report = await RuntimeDriver(spec, env, AlternatingModel(), hooks=hooks).run()
        assert report.total_episodes >= 4 and len(hooks.episodes) >= 4
        assert all(not m.HasField("seed") and m.step_count > 0 for m in hooks.episodes)
        assert env.closed

    run(body())


def test_unseeded_reset_of_a_custom_vector_env_does_not_warn():
    async def body():
        env = GymVectorEnv(gym.make_vec("CartPole-v1", 2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            await messages(env).reset(env_pb2.ResetRequest())
        await env.close(1.0)

    run(body())


class DisabledCartPoleVector(CartPoleVectorEnv):
    """A custom vector env declaring DISABLED; its reset ignores options['reset_mask']."""

    metadata = {**CartPoleVectorEnv.metadata, "autoreset_mode": AutoresetMode.DISABLED}


def test_partial_reset_of_a_custom_vector_env_is_refused():
    async def body():
        env = GymVectorEnv(DisabledCartPoleVector(num_envs=2))
        assert env.autoreset_mode is AutoresetMode.DISABLED
        reset = (await messages(env).reset(env_pb2.ResetRequest())).response
        with pytest.raises(
            EnvRpcError,
            match=r"partial reset \(env_indices=\[1\]\) is not supported for DisabledCartPoleVector: only "
            r"gymnasium's SyncVectorEnv/AsyncVectorEnv are known to honour options\['reset_mask'\].*"
            r"vectorization_mode=\"sync\"",
        ) as refused:
            await messages(env).reset(env_pb2.ResetRequest(env_indices=[1], seeds=[3]))
        assert refused.value.recoverable
        assert env.episode_ids == list(reset.episode_ids)  # untouched
        await env.close(1.0)

    run(body())


def test_make_vec_default_mode_partial_reset_is_refused_by_its_autoreset_mode():
    async def body():
        env = GymVectorEnv(gym.make_vec("CartPole-v1", 2))
        await messages(env).reset(env_pb2.ResetRequest())
        with pytest.raises(EnvRpcError, match=r"partial reset \(env_indices=\[0\]\) needs DISABLED"):
            await messages(env).reset(env_pb2.ResetRequest(env_indices=[0]))
        await env.close(1.0)

    run(body())


def test_vector_reward_wrapper_reward_on_the_autoreset_step_is_not_counted():
    async def body():
        penalty = 0.01
        wrapped = TransformReward(
            gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"), lambda r: r - penalty
        )
        env = GymVectorEnv(wrapped)
        await messages(env).reset(env_pb2.ResetRequest(seeds=[1, 2]))
        completed = []
        with pytest.warns(RuntimeWarning, match=r"on their autoreset step .* not counted") as caught:
            for t in range(80):
                response = (await messages(env).step(action_request([t % 2, (t // 3) % 2]))).response
                completed.extend(response.completed_episodes)
        assert len([w for w in caught if "autoreset step" in str(w.message)]) == 1
        assert len(completed) >= 2
        for metadata in completed:  # CartPole pays 1 per counted step, shifted by the wrapper
            assert metadata.cumulative_reward == pytest.approx(metadata.step_count * (1 - penalty))
        await env.close(1.0)

    run(body())
