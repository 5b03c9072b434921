"""``GymVectorEnv.make(..., autoreset="same_step")`` steps its sub-envs with its own SAME_STEP loop
(rlmesh_gym/envs/same_step_lanes.py): everything the adapter reports must be what gymnasium's own
``SyncVectorEnv.step`` gives, side by side with the same seeds and actions."""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.spaces.batch import SpaceBatch

INFO_ENV_ID = "rlmesh-test/InfoRich-v0"


class InfoRichEnv(gym.Env):
    """Episodes of 1-4 steps with infos of every kind gymnasium batches: ints on some lanes and
    floats on others under one key, arrays, nested dicts, objects, keys only some steps carry."""

    observation_space = gym.spaces.Dict(
        {"position": gym.spaces.Box(-10.0, 10.0, (2,), np.float32), "phase": gym.spaces.Discrete(5)}
    )
    action_space = gym.spaces.Discrete(3)

    def __init__(self, lane_kind: str = "int") -> None:
        self.lane_kind = lane_kind
        self.t = 0
        self.length = 1

    def _observation(self) -> dict[str, Any]:
        return {"position": np.array([self.t, self.length], dtype=np.float32), "phase": self.t % 5}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.length = int(self.np_random.integers(1, 5))
        return self._observation(), {"length": self.length, "start": {"seed_given": seed is not None}}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        value: Any = self.t if self.lane_kind == "int" else self.t + 0.5
        info: dict[str, Any] = {"t": value, "trace": np.full(3, self.t, dtype=np.int16)}
        if done:
            info["summary"] = {"steps": self.t, "label": f"ended-{action}"}
        if action == 2:
            info["odd"] = object.__new__(_Marker)
        truncated = done and self.length == 4
        return self._observation(), float(action) - 0.25, done and not truncated, truncated, info


class _Marker:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Marker)

    __hash__ = object.__hash__


gym.register(INFO_ENV_ID, entry_point=InfoRichEnv, disable_env_checker=True)


def _assert_same(ours: Any, theirs: Any, where: str = "") -> None:
    """Equal values of equal types, arrays with equal dtypes (object arrays element by element)."""
    assert type(ours) is type(theirs), f"{where}: {type(ours).__name__} != {type(theirs).__name__}"
    if isinstance(theirs, dict):
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} != {list(theirs)}"
        for key in theirs:
            _assert_same(ours[key], theirs[key], f"{where}.{key}")
    elif isinstance(theirs, (tuple, list)):
        assert len(ours) == len(theirs), f"{where}: {len(ours)} items != {len(theirs)}"
        for index, (mine, item) in enumerate(zip(ours, theirs, strict=True)):
            _assert_same(mine, item, f"{where}[{index}]")
    elif isinstance(theirs, np.ndarray):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, where
        if theirs.dtype == object:
            for index, item in np.ndenumerate(theirs):
                _assert_same(ours[index], item, f"{where}[{index}]")
        else:
            np.testing.assert_array_equal(ours, theirs, err_msg=where)
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def _pair(env_id: str, num_envs: int, **kwargs: Any) -> tuple[GymVectorEnv, GymVectorEnv]:
    ours = GymVectorEnv.make(env_id, num_envs=num_envs, autoreset="same_step", **kwargs)
    gymnasiums = GymVectorEnv(
        gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            **kwargs,
        )
    )
    return ours, gymnasiums


def _play(env: GymVectorEnv, actions: list[np.ndarray], seeds: list[int]) -> list[tuple[Any, ...]]:
    """Every step's values as the driver sees them (ids and timestamps left out: they are random)."""

    async def play() -> list[tuple[Any, ...]]:
        reset = await env.reset_arrays([], seeds)
        steps: list[tuple[Any, ...]] = [(reset.observation.values, reset.infos)]
        for row in actions:
            step = await env.step_arrays(SpaceBatch.from_values(env._action_codec, row, env.num_envs))
            episodes = [
                (
                    episode.env_index,
                    episode.step_count,
                    episode.cumulative_reward,
                    episode.terminated,
                    episode.truncated,
                    episode.seed,
                    episode.final_info,
                )
                for episode in step.completed
            ]
            steps.append(
                (step.observation.values, step.rewards, step.terminated, step.truncated, step.infos, episodes)
            )
        return steps

    try:
        return asyncio.run(play())
    finally:
        env.close_sync()


@pytest.mark.parametrize(
    ("env_id", "num_envs", "kwargs"),
    [
        ("CartPole-v1", 5, {}),
        (INFO_ENV_ID, 4, {}),
        (INFO_ENV_ID, 3, {"lane_kind": "float"}),
    ],
)
def test_make_reports_what_gymnasiums_same_step_gives(env_id: str, num_envs: int, kwargs: dict) -> None:
    ours, gymnasiums = _pair(env_id, num_envs, **kwargs)
    assert type(ours.env) is SyncVectorEnv and type(gymnasiums.env) is SyncVectorEnv
    rng = np.random.default_rng(7)
    actions = [rng.integers(0, ours.env.single_action_space.n, num_envs) for _ in range(60)]
    seeds = list(range(100, 100 + num_envs))
    played, expected = _play(ours, actions, seeds), _play(gymnasiums, actions, seeds)
    finished = sum(len(step[-1]) for step in expected[1:])
    assert finished > 2 * num_envs  # several rolls per lane, some lanes finishing together
    for index, (mine, theirs) in enumerate(zip(played, expected, strict=True)):
        _assert_same(mine, theirs, f"step {index}")


def test_lanes_finishing_together_keep_gymnasiums_batched_info_types() -> None:
    """gymnasium gives a key the dtype of the first lane that reports it; a later lane's float
    under an int key is cast. The adapter's final_info says what gymnasium's batching said."""
    ours, gymnasiums = _pair(INFO_ENV_ID, 2)
    # Lane 1 reports floats: build its sub-env again with that kind, in both vectors.
    for adapter in (ours, gymnasiums):
        adapter.env.envs[1].unwrapped.lane_kind = "float"
    actions = [np.array([0, 1])] * 12
    played, expected = _play(ours, actions, [3, 3]), _play(gymnasiums, actions, [3, 3])
    together = [step[-1] for step in expected[1:] if len(step[-1]) == 2]
    assert together, "the seeds should make both lanes finish on the same step at least once"
    assert type(together[0][1][-1]["t"]) is np.int64  # lane 1's float, cast to lane 0's int
    for index, (mine, theirs) in enumerate(zip(played, expected, strict=True)):
        _assert_same(mine, theirs, f"step {index}")


def test_a_batch_stays_the_steps_own() -> None:
    async def play() -> None:
        async with GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="same_step") as env:
            await env.reset_arrays([], [1, 2])
            actions = SpaceBatch.from_values(env._action_codec, np.array([0, 1]), 2)
            first = await env.step_arrays(actions)
            kept = first.observation.values.copy()
            await env.step_arrays(actions)
            np.testing.assert_array_equal(first.observation.values, kept)

    asyncio.run(play())


def test_a_vector_env_passed_in_keeps_its_own_step() -> None:
    vector = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
    )
    calls = []
    own_step = vector.step

    def step(actions: Any) -> Any:
        calls.append(actions)
        return own_step(actions)

    vector.step = step  # type: ignore[method-assign]
    _play(GymVectorEnv(vector), [np.array([0, 1])] * 3, [1, 2])
    assert len(calls) == 3


OFF_DTYPE_ENV_ID = "rlmesh-test/OffDtype-v0"


class OffDtypeEnv(gym.Env):
    """Declares float32 observations of shape (3,) and returns them as float64 arrays, or, with
    ``width=2``, steps' observations of the wrong shape; episodes of 3 steps."""

    observation_space = gym.spaces.Box(-10.0, 10.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, width: int = 3) -> None:
        self.width = width
        self.t = 0

    def _observation(self) -> np.ndarray:
        return np.full(self.width if self.t else 3, self.t + 0.1, dtype=np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._observation(), {}

    def step(self, action):
        self.t += 1
        return self._observation(), 1.0, self.t >= 3, False, {}


gym.register(OFF_DTYPE_ENV_ID, entry_point=OffDtypeEnv, disable_env_checker=True)


def test_observations_of_another_dtype_are_cast_as_gymnasium_casts_them() -> None:
    ours, gymnasiums = _pair(OFF_DTYPE_ENV_ID, 3)
    actions = [np.array([0, 1, 0])] * 7
    played, expected = _play(ours, actions, [1, 2, 3]), _play(gymnasiums, actions, [1, 2, 3])
    assert played[1][0].dtype == np.float32
    for index, (mine, theirs) in enumerate(zip(played, expected, strict=True)):
        _assert_same(mine, theirs, f"step {index}")


def test_observations_of_the_wrong_shape_fail_with_gymnasiums_error() -> None:
    vector = gym.make_vec(
        OFF_DTYPE_ENV_ID,
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        width=2,
    )
    vector.reset(seed=[1, 2])
    with pytest.raises(ValueError) as gymnasiums:
        vector.step(np.array([0, 1]))
    vector.close()

    async def play() -> BaseException | None:
        async with GymVectorEnv.make(OFF_DTYPE_ENV_ID, num_envs=2, autoreset="same_step", width=2) as env:
            await env.reset_arrays([], [1, 2])
            with pytest.raises(Exception) as ours:
                await env.step_arrays(SpaceBatch.from_values(env._action_codec, np.array([0, 1]), 2))
            return ours.value.__cause__

    cause = asyncio.run(play())
    assert type(cause) is ValueError and str(cause) == str(gymnasiums.value)


KINDS_ENV_ID = "rlmesh-test/ObservationKinds-v0"
OBSERVATION_KINDS = {
    "discrete_with_start": gym.spaces.Discrete(7, start=3),
    "multi_binary": gym.spaces.MultiBinary((2, 3)),
    "multi_discrete": gym.spaces.MultiDiscrete([4, 5, 6]),
    "box_scalar": gym.spaces.Box(-5.0, 5.0, (), np.float64),
}


class ObservationKindsEnv(gym.Env):
    """Observations of one of OBSERVATION_KINDS drawn from the env's RNG; episodes of 2-3 steps."""

    action_space = gym.spaces.Discrete(2)

    def __init__(self, kind: str = "multi_binary") -> None:
        self.observation_space = OBSERVATION_KINDS[kind]
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.observation_space.seed(int(self.np_random.integers(1 << 30)))
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), 1.0, self.t >= 2 + int(action), False, {}


gym.register(KINDS_ENV_ID, entry_point=ObservationKindsEnv, disable_env_checker=True)


@pytest.mark.parametrize("kind", sorted(OBSERVATION_KINDS))
def test_every_stacked_space_kind_batches_as_gymnasium_batches_it(kind: str) -> None:
    ours, gymnasiums = _pair(KINDS_ENV_ID, 3, kind=kind)
    actions = [np.array([0, 1, 1]), np.array([1, 0, 1])] * 5
    played, expected = _play(ours, actions, [4, 5, 6]), _play(gymnasiums, actions, [4, 5, 6])
    for index, (mine, theirs) in enumerate(zip(played, expected, strict=True)):
        _assert_same(mine, theirs, f"step {index}")


def test_rewards_of_the_wrong_shape_are_refused_by_name() -> None:
    async def play() -> BaseException | None:
        async with GymVectorEnv.make(OFF_DTYPE_ENV_ID, num_envs=2, autoreset="same_step") as env:
            for lane in env.env.envs:  # every lane's reward a one-element array
                lane.unwrapped.step = lambda action: (np.zeros(3), np.array([1.0]), False, False, {})
            await env.reset_arrays([], [1, 2])
            with pytest.raises(Exception) as refused:
                await env.step_arrays(SpaceBatch.from_values(env._action_codec, np.array([0, 1]), 2))
            return refused.value.__cause__

    cause = asyncio.run(play())
    assert type(cause) is ValueError
    assert "rewards/terminated/truncated of shapes (2, 1)/(2,)/(2,); expected (2,) each" in str(cause)


class DoubledBox(gym.spaces.Box):
    """A Box whose batches gymnasium makes with a concatenate of its own (each value doubled)."""


@gym.vector.utils.concatenate.register(DoubledBox)
def _concatenate_doubled(space: DoubledBox, items: Any, out: np.ndarray) -> np.ndarray:
    return np.multiply(np.stack(items), 2, out=out)


DOUBLED_ENV_ID = "rlmesh-test/DoubledBox-v0"


class DoubledBoxEnv(OffDtypeEnv):
    observation_space = DoubledBox(-10.0, 10.0, (3,), np.float64)


gym.register(DOUBLED_ENV_ID, entry_point=DoubledBoxEnv, disable_env_checker=True)


def test_a_box_subclass_with_its_own_concatenate_keeps_it() -> None:
    ours, gymnasiums = _pair(DOUBLED_ENV_ID, 2)
    actions = [np.array([0, 1])] * 4
    played, expected = _play(ours, actions, [1, 2]), _play(gymnasiums, actions, [1, 2])
    assert played[1][0][0, 0] == 2 * 1.1  # doubled: gymnasium's concatenate for the subclass ran
    for index, (mine, theirs) in enumerate(zip(played, expected, strict=True)):
        _assert_same(mine, theirs, f"step {index}")
