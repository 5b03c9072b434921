"""Bad requests, env failures and construction errors of the gymnasium env adapter."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from _message_form import messages
from gym_scripted import (
    WORKER_START_METHOD,
    CountingEnv,
    action_request,
    counting_fns,
    counting_vector,
    run,
)

from rlmesh_gym.envs import GymVectorEnv, parse_autoreset_mode
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.errors import EnvRpcError

ZERO = action_request([0, 0, 0])


def raw_request(data: bytes) -> env_pb2.StepRequest:
    request = env_pb2.StepRequest()
    request.action.bytes.data = data
    return request


async def started(mode: str = "NextStep", **kwargs) -> GymVectorEnv:
    env = GymVectorEnv(counting_vector("sync", mode, **kwargs))
    await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))
    return env


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (
            np.zeros(2, dtype="<i8").tobytes(),
            r"expected 3 action\(s\) of Discrete\(3\) \(16 bytes received\)",
        ),
        (np.zeros(3, dtype="<i4").tobytes(), r"\(12 bytes received\).*expected 3 value\(s\) of 8 bytes"),
        (np.zeros(4, dtype="<i8").tobytes(), r"\(32 bytes received\)"),
        (b"", r"\(0 bytes received\)"),
    ],
    ids=["too-few", "int32-dtype", "too-many", "empty"],
)
def test_malformed_action_batches_are_refused_and_leave_the_env_untouched(data, match):
    async def body():
        env = await started()
        with pytest.raises(EnvRpcError, match=match) as refused:
            await messages(env).step(raw_request(data))
        assert refused.value.recoverable and refused.value.operation == "env.step"
        response = (await messages(env).step(ZERO)).response  # the env still works, nothing was counted
        assert list(response.rewards) == [1, 1, 1]
        await env.close(1.0)

    run(body())


def test_out_of_range_discrete_actions_name_the_lanes():
    async def body():
        env = await started()
        with pytest.raises(
            EnvRpcError, match=r"actions of lanes \[1, 2\] are outside Discrete\(3\): \[3, -1\]"
        ):
            await messages(env).step(action_request([0, 3, -1]))
        assert list((await messages(env).step(action_request([2, 2, 2]))).response.rewards) == [2, 2, 2]
        await env.close(1.0)

    run(body())


def test_wrong_box_action_shape_is_refused():
    class BoxActionEnv(gym.Env):
        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.Box(-1, 1, (2,), np.float32)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            return 1, 0.0, False, False, {}

    async def body():
        env = GymVectorEnv(gym.vector.SyncVectorEnv([BoxActionEnv, BoxActionEnv]))
        await messages(env).reset(env_pb2.ResetRequest())
        with pytest.raises(EnvRpcError, match=r"expected 2 action\(s\) of Box.*24 bytes received"):
            await messages(env).step(raw_request(np.zeros((2, 3), np.float32).tobytes()))
        with pytest.raises(EnvRpcError, match=r"32 bytes received"):
            await messages(env).step(raw_request(np.zeros((2, 2), np.float64).tobytes()))
        ok = await messages(env).step(raw_request(np.zeros((2, 2), np.float32).tobytes()))
        assert list(ok.response.rewards) == [0.0, 0.0]
        await env.close(1.0)

    run(body())


def test_multi_binary_action_bytes_other_than_zero_read_as_one():
    class BinaryActionEnv(gym.Env):
        """Rewards the sum of its action bits and checks them against its space."""

        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.MultiBinary(3)

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            assert self.action_space.contains(np.asarray(action, np.int8)), action
            return 1, float(np.sum(action)), False, False, {}

    async def body():
        env = GymVectorEnv(gym.vector.SyncVectorEnv([BinaryActionEnv, BinaryActionEnv]))
        await messages(env).reset(env_pb2.ResetRequest())
        # Non-zero bytes read as 1, as docs/design/wire.md#leaf-bytes decodes them.
        step = await messages(env).step(raw_request(bytes([2, 0, 255, 1, 1, 0])))
        assert list(step.response.rewards) == [2.0, 2.0]
        single = GymVectorEnv(BinaryActionEnv())
        await messages(single).reset(env_pb2.ResetRequest())
        assert list((await messages(single).step(raw_request(bytes([7, 7, 0])))).response.rewards) == [2.0]
        await env.close(1.0)
        await single.close(1.0)

    run(body())


def test_subset_stepping_is_refused():
    async def body():
        env = await started()
        request = action_request([0, 0, 0])
        request.env_indices.extend([1])
        with pytest.raises(
            EnvRpcError, match=r"subset stepping \(StepRequest.env_indices=\[1\]\) is not supported"
        ):
            await messages(env).step(request)
        await env.close(1.0)

    run(body())


def test_step_before_reset_is_refused():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "NextStep"))
        with pytest.raises(EnvRpcError, match="stepped before its first reset"):
            await messages(env).step(ZERO)
        await env.close(1.0)

    run(body())


@pytest.mark.parametrize(
    ("indices", "seeds", "match"),
    [
        ([3], [], r"env_indices \[3\] out of range; lanes are 0..2"),
        ([-1, 1], [], r"env_indices \[-1\] out of range"),
        ([1, 1], [], r"duplicate env_index \[1\]"),
        ([0, 2], [5], r"expected no seeds or one seed per env_indices entry \(2\), got 1 seeds"),
        ([], [1, 2], r"expected no seeds or one seed per lane \(3\), got 2 seeds"),
        ([], [1, 2, 3, 4], r"one seed per lane \(3\), got 4 seeds"),
        ([0], [-5], r"seeds must be >= 0"),
    ],
)
def test_bad_reset_requests_are_refused(indices, seeds, match):
    async def body():
        env = GymVectorEnv(counting_vector("sync", "Disabled"))
        with pytest.raises(EnvRpcError, match=match) as refused:
            await messages(env).reset(env_pb2.ResetRequest(env_indices=indices, seeds=seeds))
        assert refused.value.recoverable and refused.value.operation == "env.reset"
        await messages(env).reset(env_pb2.ResetRequest())
        await env.close(1.0)

    run(body())


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_partial_reset_needs_disabled_autoreset(mode):
    async def body():
        env = await started(mode)
        name = parse_autoreset_mode(mode).name
        with pytest.raises(EnvRpcError, match=rf"partial reset \(env_indices=\[0\]\) needs DISABLED.*{name}"):
            await messages(env).reset(env_pb2.ResetRequest(env_indices=[0]))
        await env.close(1.0)

    run(body())


def test_reset_mask_option_is_reserved():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "Disabled"))
        request = env_pb2.ResetRequest()
        request.options.entries["reset_mask"].list.items.add().bool = True
        with pytest.raises(EnvRpcError, match=r"options\['reset_mask'\] is reserved"):
            await messages(env).reset(request)
        await env.close(1.0)

    run(body())


def test_closed_env_refuses_work_and_close_is_idempotent():
    async def body():
        lanes = counting_vector("sync", "NextStep")
        env = GymVectorEnv(lanes)
        await messages(env).reset(env_pb2.ResetRequest())
        await env.close(1.0)
        await env.close(1.0)
        assert env.closed and lanes.closed and all(sub.closed for sub in lanes.envs)
        with pytest.raises(EnvRpcError, match="the env is closed"):
            await messages(env).step(ZERO)
        with pytest.raises(EnvRpcError, match="the env is closed"):
            await messages(env).reset(env_pb2.ResetRequest())

    run(body())


@pytest.mark.filterwarnings("ignore:.*ERROR.*:UserWarning")  # AsyncVectorEnv logs the worker's traceback
@pytest.mark.parametrize("kind", ["sync", "async"])
def test_env_raising_in_step_fails_the_adapter(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "NextStep", fail_on_step=2))
        await messages(env).reset(env_pb2.ResetRequest())
        await messages(env).step(ZERO)
        with pytest.raises(
            EnvRpcError, match=r"env.step raised ValueError: lane \d exploded on step 2"
        ) as failed:
            await messages(env).step(ZERO)
        assert not failed.value.recoverable and failed.value.step == 2
        assert isinstance(failed.value.__cause__, ValueError)
        with pytest.raises(EnvRpcError, match="unusable after an earlier failure .* reset every lane"):
            await messages(env).step(ZERO)
        if kind == "async":
            # gymnasium's AsyncVectorEnv shuts its workers down when one raises: nothing to recover.
            with pytest.raises(EnvRpcError, match="env.reset raised"):
                await messages(env).reset(env_pb2.ResetRequest())
            await env.close(1.0)
            return
        # A whole-vector reset recovers (rlmesh's env server serves its next client this way).
        reset = await messages(env).reset(env_pb2.ResetRequest())
        assert len(set(reset.response.episode_ids)) == env.num_envs
        stepped = await messages(env).step(ZERO)
        assert list(stepped.response.episode_ids) == list(reset.response.episode_ids)
        await env.close(1.0)

    run(body())


def test_a_partial_reset_does_not_recover_a_failed_env():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "Disabled", fail_on_step=1))
        await messages(env).reset(env_pb2.ResetRequest())
        with pytest.raises(EnvRpcError, match="exploded on step 1"):
            await messages(env).step(ZERO)
        with pytest.raises(EnvRpcError, match="unusable after an earlier failure"):
            await messages(env).reset(env_pb2.ResetRequest(env_indices=[0]))
        await env.close(1.0)

    run(body())


def test_env_raising_in_reset_names_the_operation_and_lane():
    async def body():
        env = GymVectorEnv(CountingEnv())
        request = env_pb2.ResetRequest()
        request.options.entries["explode"].bool = True
        with pytest.raises(
            EnvRpcError, match=r"env.reset \(lane 0\) raised RuntimeError: reset exploded"
        ) as failed:
            await messages(env).reset(request)
        assert isinstance(failed.value.__cause__, RuntimeError) and failed.value.operation == "env.reset"
        await env.close(1.0)

    run(body())


def test_unconvertible_infos_fail_the_step_with_the_key_path():
    class SetInfoEnv(CountingEnv):
        def step(self, action):
            observation, reward, terminated, truncated, info = super().step(action)
            info["bad"] = {1, 2}
            return observation, reward, terminated, truncated, info

    async def body():
        env = GymVectorEnv(SetInfoEnv())
        await messages(env).reset(env_pb2.ResetRequest())
        with pytest.raises(EnvRpcError, match=r"infos\['bad'\]"):
            await messages(env).step(action_request([0]))
        await env.close(1.0)

    run(body())


def test_nonstandard_vector_env_breaking_the_next_step_lifecycle_is_an_env_failure():
    class EagerVector(gym.vector.SyncVectorEnv):
        """Claims NEXT_STEP but reports every lane done on its 3rd step (lane 0's reset step)."""

        steps = 0

        def step(self, actions):
            observation, rewards, terminated, truncated, infos = super().step(actions)
            self.steps += 1
            if self.steps == 3:
                terminated = np.ones_like(terminated)
            return observation, rewards, terminated, truncated, infos

    async def body():
        env = GymVectorEnv(EagerVector(counting_fns()))
        await messages(env).reset(env_pb2.ResetRequest())
        await messages(env).step(ZERO)
        await messages(env).step(ZERO)  # lane 0 finishes
        with pytest.raises(
            EnvRpcError,
            match=r"NEXT_STEP lanes \[0\] were waiting for their autoreset, so this step must be the env's "
            r"reset step \(not done\), but the env reported terminated \[True\]",
        ) as failed:
            await messages(env).step(ZERO)
        assert not failed.value.recoverable
        with pytest.raises(EnvRpcError, match="unusable after an earlier failure"):
            await messages(env).step(ZERO)
        await env.close(1.0)

    run(body())


def test_make_validates_its_arguments():
    with pytest.raises(
        ValueError, match=r"unknown autoreset mode 'sometimes'; expected 'next_step', 'same_step'"
    ):
        GymVectorEnv.make("CartPole-v1", autoreset="sometimes")
    with pytest.raises(ValueError, match=r"unknown vectorization 'threads'; expected 'sync' or 'async'"):
        GymVectorEnv.make("CartPole-v1", vectorization="threads")
    with pytest.raises(ValueError, match=r"num_envs must be an int >= 1, got 0"):
        GymVectorEnv.make("CartPole-v1", num_envs=0)
    with pytest.raises(ValueError, match="not in vector_kwargs"):
        GymVectorEnv.make("CartPole-v1", vector_kwargs={"autoreset_mode": "NextStep"})


@pytest.mark.parametrize(
    ("spelling", "mode"),
    [
        ("next_step", gym.vector.AutoresetMode.NEXT_STEP),
        ("NEXT_STEP", gym.vector.AutoresetMode.NEXT_STEP),
        ("NextStep", gym.vector.AutoresetMode.NEXT_STEP),
        ("Same_Step", gym.vector.AutoresetMode.SAME_STEP),
        ("disabled", gym.vector.AutoresetMode.DISABLED),
        (gym.vector.AutoresetMode.DISABLED, gym.vector.AutoresetMode.DISABLED),
    ],
)
def test_autoreset_spellings(spelling, mode):
    assert parse_autoreset_mode(spelling) is mode


def test_construction_errors():
    with pytest.raises(TypeError, match=r"or a gymnasium\.Env; got builtins\.list$"):
        GymVectorEnv([])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="runs under DISABLED, not NEXT_STEP"):
        GymVectorEnv(CountingEnv(), autoreset_mode="next_step")
    vector = counting_vector("sync", "NextStep")
    with pytest.raises(ValueError, match="disagrees with env.metadata"):
        GymVectorEnv(vector, autoreset_mode="disabled")
    del vector.metadata["autoreset_mode"]
    with pytest.raises(ValueError, match=r"has no metadata\['autoreset_mode'\]; pass"):
        GymVectorEnv(vector)
    explicit = GymVectorEnv(vector, autoreset_mode="next_step")
    assert explicit.contract.autoreset_mode == env_pb2.AUTORESET_MODE_NEXT_STEP
    vector.metadata["autoreset_mode"] = "Sometimes"
    with pytest.raises(ValueError, match=r"env.metadata\['autoreset_mode'\] is invalid"):
        GymVectorEnv(vector)
    vector.close()


def test_unconvertible_metadata_is_left_out_with_a_warning():
    class OddMetadataEnv(CountingEnv):
        metadata = {"render_modes": [], "render_fps": 4, "tags": {"a", "b"}, 7: "int key"}

    with pytest.warns(RuntimeWarning) as caught:
        env = GymVectorEnv(OddMetadataEnv())
    messages = [str(w.message) for w in caught]
    assert any("env.metadata['tags'] (set)" in m for m in messages)
    assert any("env.metadata[7] (str)" in m for m in messages)
    assert set(env.contract.metadata.entries) == {"render_modes", "render_fps"}


def test_async_without_shared_memory_under_next_step_warns():
    from gymnasium.vector import AsyncVectorEnv

    vector = AsyncVectorEnv(counting_fns(), shared_memory=False, context=WORKER_START_METHOD)
    with pytest.warns(RuntimeWarning, match=r"shared_memory=False\) under NEXT_STEP"):
        GymVectorEnv(vector)
    vector.close()


def test_out_of_range_multi_discrete_actions_name_the_lanes():
    class MultiDiscreteEnv(gym.Env):
        observation_space = gym.spaces.Discrete(2)
        action_space = gym.spaces.MultiDiscrete([2, 3])

        def reset(self, *, seed=None, options=None):
            return 0, {}

        def step(self, action):
            return 1, float(sum(action)), False, False, {}

    async def body():
        env = GymVectorEnv(gym.vector.SyncVectorEnv([MultiDiscreteEnv, MultiDiscreteEnv]))
        await messages(env).reset(env_pb2.ResetRequest())
        bad = raw_request(np.array([[1, 2], [2, 0]], dtype="<i8").tobytes())
        with pytest.raises(
            EnvRpcError, match=r"actions of lanes \[1\] are outside MultiDiscrete\(\[2 3\]\): \[\[2, 0\]\]"
        ):
            await messages(env).step(bad)
        good = await messages(env).step(raw_request(np.array([[1, 2], [0, 1]], dtype="<i8").tobytes()))
        assert list(good.response.rewards) == [3.0, 1.0]
        await env.close(1.0)

    run(body())


def test_make_closes_the_vector_env_when_wrapping_fails(monkeypatch):
    created = []
    original = gym.make_vec

    def recording_make_vec(*args, **kwargs):
        created.append(original(*args, **kwargs))
        return created[-1]

    monkeypatch.setattr(gym, "make_vec", recording_make_vec)
    gym.register("GraphObs-v0", entry_point=GraphObsEnv)
    try:
        with pytest.raises(TypeError, match="Graph"):
            GymVectorEnv.make("GraphObs-v0", num_envs=2)
    finally:
        gym.registry.pop("GraphObs-v0")
    assert created and created[0].closed


class GraphObsEnv(gym.Env):
    observation_space = gym.spaces.Graph(node_space=gym.spaces.Discrete(3), edge_space=None)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}
