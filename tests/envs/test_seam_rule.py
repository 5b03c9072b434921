"""The rules for "is this a runtime env / model" in each form, and the optional capabilities."""

from __future__ import annotations

import gymnasium
import pytest

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.policies import CallablePolicy, RandomPolicy
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import MessageFormEnv, MessageFormModel, is_runtime_env, is_runtime_model
from rlmesh_gym.runtime.seams import (
    BindableModel,
    DrainsEpisodes,
    RendersFrames,
    TracksEpisodeIds,
    is_array_env,
    is_array_model,
)


class _AsyncEnvWithoutContract:
    async def reset(self, request): ...

    async def step(self, request): ...


class _SyncEnvWithContract:
    contract = env_pb2.EnvContract()

    def reset(self, request): ...

    def step(self, request): ...


class _MinimalEnv(_AsyncEnvWithoutContract):
    contract = env_pb2.EnvContract()


class _SyncModel:
    def predict(self, request): ...


class _AsyncModel:
    async def predict(self, request): ...


@pytest.fixture
def cartpole():
    with GymVectorEnv(gymnasium.make("CartPole-v1", render_mode="rgb_array")) as env:
        yield env


def test_a_runtime_env_has_async_reset_and_step_and_a_contract(cartpole):
    assert is_runtime_env(MessageFormEnv(cartpole)) and is_runtime_env(_MinimalEnv())
    assert not is_runtime_env(cartpole)  # the array form only
    assert not is_runtime_env(cartpole.env)  # a gymnasium env: plain reset and step
    assert not is_runtime_env(_AsyncEnvWithoutContract())
    assert not is_runtime_env(_SyncEnvWithContract())
    assert not is_runtime_env("CartPole-v1")


def test_an_array_env_has_async_reset_arrays_and_step_arrays_and_a_contract(cartpole):
    assert is_array_env(cartpole)
    assert not is_array_env(MessageFormEnv(cartpole))  # the message form only
    assert not is_array_env(_MinimalEnv()) and not is_array_env(cartpole.env)
    with pytest.raises(TypeError, match="MessageFormEnv wraps an array-form env"):
        MessageFormEnv(_MinimalEnv())


def test_a_runtime_model_has_an_async_predict():
    assert is_runtime_model(MessageFormModel(RandomPolicy(0))) and is_runtime_model(_AsyncModel())
    assert not is_runtime_model(RandomPolicy(0))  # the array form only
    assert is_array_model(RandomPolicy(0)) and not is_array_model(_AsyncModel())
    assert not is_runtime_model(_SyncModel())
    assert not is_runtime_model(lambda observations: observations)


def test_gym_vector_env_offers_every_env_capability(cartpole):
    for capability in (DrainsEpisodes, RendersFrames, TracksEpisodeIds):
        assert isinstance(cartpole, capability)
        assert not isinstance(_MinimalEnv(), capability)
    assert cartpole.episode_ids == [""]
    assert cartpole.drain_episodes() == []
    # The message form passes the capabilities of the env it wraps through, and only those.
    messages = MessageFormEnv(cartpole)
    assert all(
        isinstance(messages, capability) for capability in (DrainsEpisodes, RendersFrames, TracksEpisodeIds)
    )
    assert messages.episode_ids == [""] and messages.num_envs == 1
    with pytest.raises(AttributeError):
        messages.reset_arrays  # noqa: B018


def test_the_shipped_policies_are_bindable_and_a_plain_model_is_not():
    assert isinstance(RandomPolicy(0), BindableModel)
    assert isinstance(MessageFormModel(RandomPolicy(0)), BindableModel)
    assert isinstance(CallablePolicy(lambda observations: observations), BindableModel)
    assert not isinstance(_AsyncModel(), BindableModel)


def test_a_compare_wrapper_passes_its_env_capabilities_through_as_class_members(cartpole):
    # Python 3.12+ checks runtime protocols on the class only (inspect.getattr_static).
    from rlmesh_gym.evaluation._lane_seeds import lane_ordinal_seeds
    from rlmesh_gym.runtime.seams import RunsInline

    wrapped = lane_ordinal_seeds(cartpole, 1, 0, "session", "route")
    for capability in (DrainsEpisodes, RendersFrames, TracksEpisodeIds, RunsInline):
        assert isinstance(wrapped, capability)
    assert wrapped.runs_inline is True and wrapped.episode_ids == cartpole.episode_ids

    class ArraysOnly:
        contract = env_pb2.EnvContract()

        async def reset_arrays(self, env_indices, seeds, options=None): ...

        async def step_arrays(self, actions): ...

    bare = MessageFormEnv(ArraysOnly())
    assert not any(isinstance(bare, c) for c in (DrainsEpisodes, RendersFrames, TracksEpisodeIds))
