"""Lane-by-lane episode ids, completed episodes and masks, per autoreset mode, Sync and Async.

Three lanes of ``CountingEnv`` whose episodes last 2, 3 and 4 steps (lane 1 truncates, the others
terminate), reset with seeds 0, 3 and 6 (``seed % 3 == 0`` keeps those lengths), actions all 0,
so the reward of a lane's t-th step is t.
"""

from __future__ import annotations

import pytest
from _message_form import messages
from gym_scripted import action_request, counting_vector, run

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime.errors import EnvRpcError
from rlmesh_gym.spaces.codec import decode_batch
from rlmesh_gym.spaces.meta import from_meta_map

KINDS = ["sync", "async"]
ZERO = action_request([0, 0, 0])


def episodes(response):
    return [
        (
            m.env_index,
            m.seed if m.HasField("seed") else None,
            m.step_count,
            m.cumulative_reward,
            m.terminated,
            m.truncated,
        )
        for m in response.completed_episodes
    ]


def final_infos(response):
    return [
        from_meta_map(m.final_info) if m.HasField("final_info") else None for m in response.completed_episodes
    ]


def observations(env, response):
    return decode_batch(
        response.observation.bytes.data, env.contract.observation_space, env.num_envs
    ).tolist()


def masks(response):
    return list(response.terminated_mask), list(response.truncated_mask)


def check_metadata_fields(response):
    for m in response.completed_episodes:
        assert len(m.episode_id) == 36 and m.episode_id.count("-") == 4
        assert m.start_timestamp_ns > 1_600_000_000 * 10**9
        assert m.end_timestamp_ns >= m.start_timestamp_ns
        assert m.duration_ms >= 0


@pytest.mark.parametrize("kind", KINDS)
def test_next_step_lanes(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "NextStep"))
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_NEXT_STEP
        reset = (await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))).response
        a, b, c = reset.episode_ids
        assert len({a, b, c}) == 3 and all(len(i) == 36 for i in (a, b, c))
        assert observations(env, reset) == [[0, 0], [3, 0], [6, 0]]

        s1 = (await messages(env).step(ZERO)).response
        assert list(s1.episode_ids) == [a, b, c] and not s1.completed_episodes
        assert list(s1.rewards) == [1, 1, 1] and masks(s1) == ([0, 0, 0], [0, 0, 0])

        s2 = (await messages(env).step(ZERO)).response
        assert list(s2.rewards) == [2, 2, 2] and masks(s2) == ([1, 0, 0], [0, 0, 0])
        assert list(s2.episode_ids) == [a, b, c]  # the done step keeps the finished id
        assert episodes(s2) == [(0, 0, 2, 3.0, True, False)]
        assert s2.completed_episodes[0].episode_id == a
        assert final_infos(s2) == [{"lane": 0, "t": 2, "last": True}]
        check_metadata_fields(s2)

        s3 = (await messages(env).step(ZERO)).response  # lane 0: gymnasium's reset step, not counted
        assert list(s3.rewards) == [0, 3, 3] and masks(s3) == ([0, 0, 0], [0, 1, 0])
        d = s3.episode_ids[0]
        assert d not in (a, b, c) and list(s3.episode_ids) == [d, b, c]
        assert episodes(s3) == [(1, 3, 3, 6.0, False, True)]
        assert final_infos(s3) == [{"lane": 1, "t": 3, "last": True}]
        assert observations(env, s3)[0] == [-1, 0]  # autoreset without a seed

        s4 = (await messages(env).step(ZERO)).response
        assert list(s4.rewards) == [1, 0, 4] and masks(s4) == ([0, 0, 1], [0, 0, 0])
        e = s4.episode_ids[1]
        assert e not in (a, b, c, d) and list(s4.episode_ids) == [d, e, c]
        assert episodes(s4) == [(2, 6, 4, 10.0, True, False)]

        s5 = (await messages(env).step(ZERO)).response
        f = s5.episode_ids[2]
        assert list(s5.episode_ids) == [d, e, f] and f not in (a, b, c, d, e)
        assert list(s5.rewards) == [2, 1, 0]
        assert episodes(s5) == [(0, None, 2, 3.0, True, False)]  # an autoreset episode has no seed
        assert s5.completed_episodes[0].episode_id == d

        drained = env.drain_episodes()
        assert [(m.episode_id, m.env_index, m.step_count, m.terminated, m.truncated) for m in drained] == [
            (e, 1, 1, False, True),
            (f, 2, 0, False, True),
        ]
        assert not any(m.HasField("final_info") for m in drained)
        await env.close(5.0)

    run(body())


@pytest.mark.parametrize("kind", KINDS)
def test_same_step_lanes(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "SameStep"))
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_SAME_STEP
        a, b, c = (await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))).response.episode_ids
        await messages(env).step(ZERO)

        s2 = (await messages(env).step(ZERO)).response
        assert list(s2.rewards) == [2, 2, 2] and masks(s2) == ([1, 0, 0], [0, 0, 0])
        d = s2.episode_ids[0]
        assert d not in (a, b, c) and list(s2.episode_ids) == [d, b, c]  # rolled in the same step
        assert episodes(s2) == [(0, 0, 2, 3.0, True, False)]
        assert s2.completed_episodes[0].episode_id == a
        assert final_infos(s2) == [{"lane": 0, "t": 2, "last": True, "final_obs": [0.0, 2.0]}]
        assert observations(env, s2)[0] == [-1, 0]  # the step already shows the new episode

        s3 = (await messages(env).step(ZERO)).response  # the new episode's first step counts
        assert list(s3.rewards) == [1, 3, 3] and masks(s3) == ([0, 0, 0], [0, 1, 0])
        e = s3.episode_ids[1]
        assert list(s3.episode_ids) == [d, e, c]
        assert episodes(s3) == [(1, 3, 3, 6.0, False, True)]
        assert final_infos(s3) == [{"lane": 1, "t": 3, "last": True, "final_obs": [3.0, 3.0]}]

        s4 = (await messages(env).step(ZERO)).response
        assert list(s4.rewards) == [2, 1, 4] and masks(s4) == ([1, 0, 1], [0, 0, 0])
        g, f = s4.episode_ids[0], s4.episode_ids[2]
        assert len({a, b, c, d, e, f, g}) == 7 and s4.episode_ids[1] == e
        assert episodes(s4) == [(0, None, 2, 3.0, True, False), (2, 6, 4, 10.0, True, False)]
        assert [m.episode_id for m in s4.completed_episodes] == [d, c]
        assert final_infos(s4) == [
            {"lane": 0, "t": 2, "last": True, "final_obs": [-1.0, 2.0]},
            {"lane": 2, "t": 4, "last": True, "final_obs": [6.0, 4.0]},
        ]
        await env.close(5.0)

    run(body())


@pytest.mark.parametrize("kind", KINDS)
def test_disabled_lanes_with_partial_resets(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "Disabled"))
        assert env.contract.autoreset_mode == env_pb2.AUTORESET_MODE_DISABLED
        a, b, c = (await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))).response.episode_ids
        await messages(env).step(ZERO)
        s2 = (await messages(env).step(ZERO)).response
        assert list(s2.episode_ids) == [a, b, c]
        assert episodes(s2) == [(0, 0, 2, 3.0, True, False)]
        assert final_infos(s2) == [{"lane": 0, "t": 2, "last": True}]

        with pytest.raises(EnvRpcError, match=r"lanes \[0\] have no running episode") as refused:
            await messages(env).step(ZERO)
        assert refused.value.recoverable

        r1 = (await messages(env).reset(env_pb2.ResetRequest(env_indices=[0], seeds=[9]))).response
        d = r1.episode_ids[0]
        assert list(r1.episode_ids) == [d, b, c] and d not in (a, b, c)
        assert observations(env, r1) == [[9, 0], [3, 2], [6, 2]]  # full width; other lanes untouched
        assert from_meta_map(r1.infos) == {
            "lane": [0, 0, 0],
            "_lane": [True, False, False],
            "seed": [9, 0, 0],
            "_seed": [True, False, False],
        }

        s3 = (await messages(env).step(ZERO)).response
        assert list(s3.rewards) == [1, 3, 3] and masks(s3) == ([0, 0, 0], [0, 1, 0])
        assert list(s3.episode_ids) == [d, b, c]
        assert episodes(s3) == [(1, 3, 3, 6.0, False, True)]

        r2 = (await messages(env).reset(env_pb2.ResetRequest(env_indices=[1]))).response  # unseeded
        e = r2.episode_ids[1]
        assert list(r2.episode_ids) == [d, e, c]
        assert observations(env, r2)[1] == [-1, 0]

        s4 = (await messages(env).step(ZERO)).response
        assert list(s4.rewards) == [2, 1, 4] and masks(s4) == ([1, 0, 1], [0, 0, 0])
        assert episodes(s4) == [(0, 9, 2, 3.0, True, False), (2, 6, 4, 10.0, True, False)]
        assert list(s4.episode_ids) == [d, e, c]

        r3 = (await messages(env).reset(env_pb2.ResetRequest(env_indices=[2], seeds=[12]))).response
        g = r3.episode_ids[2]
        assert list(r3.episode_ids) == ["", e, g]  # lane 0 finished and was not reset: idle
        with pytest.raises(EnvRpcError, match=r"lanes \[0\]"):
            await messages(env).step(ZERO)
        r4 = (await messages(env).reset(env_pb2.ResetRequest(env_indices=[0], seeds=[1]))).response
        h = r4.episode_ids[0]
        assert list(r4.episode_ids) == [h, e, g]

        s5 = (await messages(env).step(ZERO)).response  # lane 0: seed 1 gives length 3
        assert list(s5.rewards) == [1, 2, 1] and not s5.completed_episodes
        s6 = (await messages(env).step(ZERO)).response
        assert episodes(s6) == [(1, None, 3, 6.0, False, True)]
        await messages(env).reset(env_pb2.ResetRequest(env_indices=[1], seeds=[5]))
        s7 = (await messages(env).step(ZERO)).response
        assert episodes(s7) == [(0, 1, 3, 6.0, True, False)]
        await env.close(5.0)

    run(body())


@pytest.mark.parametrize("kind", KINDS)
def test_reset_interrupts_running_episodes(kind):
    async def body():
        env = GymVectorEnv(counting_vector(kind, "NextStep"))
        first = (await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))).response
        await messages(env).step(ZERO)
        second = (await messages(env).reset(env_pb2.ResetRequest())).response
        assert not set(first.episode_ids) & set(second.episode_ids)
        s1 = (await messages(env).step(ZERO)).response
        # The interrupted episodes come first, truncated, with their seeds and no final_info.
        assert [m.episode_id for m in s1.completed_episodes] == list(first.episode_ids)
        assert episodes(s1) == [
            (0, 0, 1, 1.0, False, True),
            (1, 3, 1, 1.0, False, True),
            (2, 6, 1, 1.0, False, True),
        ]
        assert not any(m.HasField("final_info") for m in s1.completed_episodes)
        assert list(s1.episode_ids) == list(second.episode_ids)
        s2 = (await messages(env).step(ZERO)).response
        assert episodes(s2) == [(0, None, 2, 3.0, True, False)]
        await env.close(5.0)

    run(body())


def test_single_env_is_one_disabled_lane():
    from gym_scripted import CountingEnv

    async def body():
        inner = CountingEnv(length=2)
        env = GymVectorEnv(inner)
        contract = env.contract
        assert (contract.num_envs, contract.autoreset_mode, contract.id) == (
            1,
            env_pb2.AUTORESET_MODE_DISABLED,
            "CountingEnv",
        )
        (a,) = (await messages(env).reset(env_pb2.ResetRequest(seeds=[7]))).response.episode_ids  # length 3
        one = action_request([1])
        for _ in range(2):
            response = (await messages(env).step(one)).response
            assert list(response.episode_ids) == [a] and not response.completed_episodes
        done = (await messages(env).step(one)).response
        assert list(done.episode_ids) == [a] and masks(done) == ([1], [0])
        assert episodes(done) == [(0, 7, 3, 1.5 + 2.5 + 3.5, True, False)]
        assert final_infos(done) == [{"lane": 0, "t": 3, "last": True}]
        # As rlmesh's env server: an idle single env may still be stepped; nothing is recorded.
        idle = (await messages(env).step(one)).response
        assert list(idle.episode_ids) == [""] and not idle.completed_episodes
        (b,) = (
            await messages(env).reset(env_pb2.ResetRequest(env_indices=[0], seeds=[0]))
        ).response.episode_ids
        assert b not in ("", a)
        await env.close(1.0)
        assert inner.closed

    run(body())


def test_infos_and_options_pass_through():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "Disabled"))
        request = env_pb2.ResetRequest(seeds=[0, 3, 6])
        request.options.entries["tag"].str = "hello"
        reset = (await messages(env).reset(request)).response
        infos = from_meta_map(reset.infos)
        assert infos["tag"] == ["hello"] * 3 and infos["seed"] == [0, 3, 6]
        await messages(env).step(ZERO)
        await messages(env).step(ZERO)
        # Partial resets with options: the adapter builds a fresh options dict each time.
        first = env_pb2.ResetRequest(env_indices=[0])
        first.options.entries["tag"].str = "first"
        assert from_meta_map((await messages(env).reset(first)).response.infos)["tag"] == [
            "first",
            None,
            None,
        ]
        response = (await messages(env).step(ZERO)).response
        assert episodes(response) == [(1, 3, 3, 6.0, False, True)]
        again = env_pb2.ResetRequest(env_indices=[1])
        again.options.entries["tag"].str = "again"
        assert from_meta_map((await messages(env).reset(again)).response.infos)["tag"] == [
            None,
            "again",
            None,
        ]
        await env.close(1.0)

    run(body())


def test_telemetry_names_the_operation():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "NextStep"))
        reset = await messages(env).reset(env_pb2.ResetRequest())
        step = await messages(env).step(ZERO)
        for result, operation in ((reset, "env.reset"), (step, "env.step")):
            assert result.telemetry.operation == operation
            (metric,) = result.telemetry.metrics
            assert metric.name == "endpoint.total" and metric.WhichOneof("value") == "duration_ns"
            assert metric.duration_ns > 0
        await env.close(1.0)

    run(body())


def test_render_frames_one_per_lane():
    async def body():
        env = GymVectorEnv(counting_vector("sync", "NextStep", render_mode="rgb_array"))
        await messages(env).reset(env_pb2.ResetRequest())
        await messages(env).step(ZERO)
        frames = env.render_frames()
        assert len(frames) == 3 and all(frame.shape == (4, 6, 3) for frame in frames)
        assert [int(frame[0, 0, 0]) for frame in frames] == [1, 1, 1]
        await env.close(1.0)
        no_render = GymVectorEnv(counting_vector("sync", "NextStep"))
        with pytest.raises(ValueError, match="render_mode='rgb_array'"):
            no_render.render_frames()
        await no_render.close(1.0)

    run(body())


def test_offloaded_env_calls_give_the_same_responses():
    async def body():
        inline = GymVectorEnv(counting_vector("sync", "NextStep"))
        offloaded = GymVectorEnv(counting_vector("sync", "NextStep"), offload=True)
        for env in (inline, offloaded):
            await messages(env).reset(env_pb2.ResetRequest(seeds=[0, 3, 6]))
        for _ in range(6):
            left = (await messages(inline).step(ZERO)).response
            right = (await messages(offloaded).step(ZERO)).response
            assert left.observation == right.observation and list(left.rewards) == list(right.rewards)
            assert episodes(left) == episodes(right)
        await inline.close(1.0)
        await offloaded.close(1.0)
        assert offloaded.closed

    run(body())
