"""The one path from an env id or env object to a GymVectorEnv, with one error behaviour."""

from __future__ import annotations

import gymnasium
import pytest

from rlmesh_gym.envs import AutoresetMode, GymVectorEnv
from rlmesh_gym.envs.env_ids import UnknownEnvIdError
from rlmesh_gym.envs.resolve import EnvBuildError, make_env, make_gym_env, resolve_env
from rlmesh_gym.proto import env_pb2


def test_make_env_builds_vector_lanes_with_the_mode_asked_for():
    with make_env("CartPole-v1", 3, "same_step") as env:
        assert isinstance(env.env, gymnasium.vector.SyncVectorEnv)
        assert env.num_envs == 3
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_SAME_STEP
    with make_env("CartPole-v1") as env:  # the default: one vector lane under next_step
        assert env.num_envs == 1 and env.contract.autoreset_mode == AutoresetMode.NEXT_STEP.wire


def test_make_env_single_serves_the_plain_env_under_disabled():
    with make_env("CartPole-v1", vector=False, env_kwargs={"max_episode_steps": 7}) as env:
        assert isinstance(env.env, gymnasium.Env) and not isinstance(env.env, gymnasium.vector.VectorEnv)
        assert env.env.spec.max_episode_steps == 7
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_DISABLED
    with pytest.raises(ValueError, match=r"a single env \(vector=False\) has one lane, DISABLED"):
        make_env("CartPole-v1", 2, vector=False)
    with pytest.raises(ValueError, match="autoreset='next_step'"):
        make_env("CartPole-v1", autoreset="next_step", vector=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_envs": 0}, r"num_envs must be an int >= 1, got 0"),
        ({"autoreset": "sometimes"}, r"unknown autoreset mode 'sometimes'; expected 'next_step'"),
        ({"vectorization": "threads"}, r"unknown vectorization 'threads'; expected 'sync' or 'async'"),
    ],
)
def test_bad_options_are_refused_before_anything_is_built(options, message, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("an env was built")

    monkeypatch.setattr(gymnasium, "make_vec", never)
    with pytest.raises(ValueError, match=message) as caught:
        make_env("CartPole-v1", **options)
    assert not isinstance(caught.value, EnvBuildError)


@pytest.mark.parametrize("build", [make_gym_env, make_env, lambda env_id: resolve_env(env_id).env])
def test_an_unknown_id_is_one_error_on_every_path(build):
    with pytest.raises(UnknownEnvIdError, match=r"unknown env id 'NoSuchEnv-v0'.*PACKAGE:NoSuchEnv-v0"):
        build("NoSuchEnv-v0")


@pytest.mark.parametrize(
    "build",
    [
        make_gym_env,
        lambda env_id, **kw: make_env(env_id, env_kwargs=kw),
        lambda env_id, **kw: make_env(env_id, vector=False, env_kwargs=kw),
        lambda env_id, **kw: resolve_env(env_id, env_kwargs=kw),
    ],
)
def test_an_env_that_fails_to_build_is_named_with_its_cause(build):
    with pytest.raises(
        EnvBuildError, match=r"cannot build env 'CartPole-v1': TypeError: .*no_such_option"
    ) as caught:
        build("CartPole-v1", no_such_option=1)
    assert isinstance(caught.value, ValueError) and caught.value.env_id == "CartPole-v1"
    assert isinstance(caught.value.__cause__, TypeError)


def test_resolve_env_owns_what_it_builds_and_wraps_what_it_is_given():
    resolved = resolve_env("CartPole-v1", num_envs=2, autoreset="disabled", vectorization="SYNC")
    try:
        assert (resolved.env_id, resolved.num_envs, resolved.autoreset, resolved.vectorization) == (
            "CartPole-v1",
            2,
            AutoresetMode.DISABLED,
            "sync",
        )
        assert resolved.owned and isinstance(resolved.env, GymVectorEnv)
    finally:
        resolved.env.close_sync()

    gym_env = gymnasium.make("CartPole-v1")
    wrapped = resolve_env(gym_env)
    assert not wrapped.owned and wrapped.env.env is gym_env and wrapped.vectorization is None
    assert (wrapped.env_id, wrapped.num_envs, wrapped.autoreset) == ("CartPole-v1", 1, AutoresetMode.DISABLED)
    assert resolve_env(wrapped.env).env is wrapped.env  # a RuntimeEnv is used as is
    with pytest.raises(ValueError, match="autoreset='next_step' does not match the env passed in"):
        resolve_env(wrapped.env, autoreset="next_step")
    with pytest.raises(ValueError, match="vectorization applies only when env is an env id"):
        resolve_env(gym_env, vectorization="sync")
    with pytest.raises(TypeError, match="env must be an env id .*; got builtins.int"):
        resolve_env(3)
    gym_env.close()
