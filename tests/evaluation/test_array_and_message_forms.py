"""The driver's array path and its protobuf seams give the same evaluation, event for event.

The in-process adapters are driven in array form; wrapping the same env and policy so that
only their message methods (``reset``/``step``/``predict``) are visible makes the driver go
through the message ports instead. Every episode and every hook event must be the same, except
the random episode ids (compared by order of first appearance) and wall-clock fields.
"""

from __future__ import annotations

import gymnasium
import pytest
import torch
from _eval_envs import register_test_envs
from _message_form import messages

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import EvaluationOptions, evaluate
from rlmesh_gym.policies import RandomPolicy, TorchPolicy
from rlmesh_gym.proto import env_pb2
from rlmesh_gym.runtime import MessageFormEnv, MessageFormModel, RuntimeHooks
from rlmesh_gym.runtime.events import EpisodeCompletedEvent, StepCompletedEvent

pytestmark = pytest.mark.torch  # (tests/conftest.py)

MODES = ("next_step", "same_step", "disabled")


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_test_envs()


class MessageOnlyEnv:
    """An env showing only the message form of the seam (as a remote or user-written env does)."""

    def __init__(self, env: GymVectorEnv) -> None:
        self._env = env
        self.contract = env.contract
        self.num_envs = env.num_envs
        self.steps = 0

    async def reset(self, request):
        return await messages(self._env).reset(request)

    async def step(self, request):
        self.steps += 1
        return await messages(self._env).step(request)

    async def close(self, timeout):
        await self._env.close(timeout)

    def drain_episodes(self):
        return self._env.drain_episodes()


class MessageOnlyModel:
    """A model showing only the message form of the seam."""

    def __init__(self, model) -> None:
        self._model = model
        self.predictions = 0

    async def predict(self, request):
        self.predictions += 1
        return await messages(self._model).predict(request)

    async def close_route(self, request, timeout):
        await self._model.close_route(request, timeout)


class EventLog(RuntimeHooks):
    """Every event, as comparable tuples: episode ids by order of first appearance, no clocks."""

    def __init__(self) -> None:
        self.events: list[tuple] = []
        self._ids: dict[str, int] = {"": -1}

    def _id(self, episode_id: str) -> int:
        return self._ids.setdefault(episode_id, len(self._ids))

    def _episode(self, metadata: env_pb2.EpisodeMetadata) -> tuple:
        return (
            self._id(metadata.episode_id),
            metadata.seed if metadata.HasField("seed") else None,
            metadata.env_index,
            metadata.step_count,
            metadata.cumulative_reward,
            metadata.terminated,
            metadata.truncated,
            metadata.final_info.SerializeToString(deterministic=True),
        )

    async def session_started(self, event) -> None:
        self.events.append(("session_started", event.session_id, event.route, event.env_id))

    async def episode_started(self, event) -> None:
        self.events.append(
            (
                "episode_started",
                self._id(event.episode_id),
                event.episode_record_id,
                event.episode_index,
                event.env_index,
                event.started_from_auto_reset,
            )
        )

    async def observation_emitted(self, event) -> None:
        self.events.append(
            (
                "observation_emitted",
                [self._id(i) for i in event.episode_ids],
                event.episode_record_ids,
                event.step,
                event.is_reset,
                event.observation,
            )
        )

    async def action_received(self, event) -> None:
        self.events.append(("action_received", event.step, event.episode_record_ids, event.action))

    async def step_completed(self, event) -> None:
        response = event.response
        self.events.append(
            (
                "step_completed",
                event.step,
                event.rewards,
                [self._id(i) for i in event.episode_ids],
                response.observation.bytes.data,
                list(response.rewards),
                response.terminated_mask,
                response.truncated_mask,
                [self._id(i) for i in response.episode_ids],
                [self._episode(m) for m in response.completed_episodes],
                response.infos.SerializeToString(deterministic=True),
            )
        )

    async def episode_completed(self, event) -> None:
        self.events.append(
            (
                "episode_completed",
                self._id(event.episode_id),
                event.episode_record_id,
                event.episode_index,
                event.env_index,
                event.step_count,
                event.cumulative_reward,
                event.terminated,
                event.truncated,
                None if event.final_info is None else event.final_info.SerializeToString(deterministic=True),
                self._episode(event.metadata),
            )
        )

    async def session_ended(self, event) -> None:
        self.events.append(("session_ended", event.reason, event.total_steps, event.total_episodes))


async def _forbidden(*args, **kwargs):
    raise AssertionError("a message-form seam method was called on the array path")


def _short_policy() -> torch.nn.Module:
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))


def _run(env_id: str, policy_factory, mode: str, *, message_form: bool, num_envs: int = 3):
    env = GymVectorEnv.make(env_id, num_envs=num_envs, autoreset=mode)
    model = policy_factory(env.contract)
    log = EventLog()
    run_env, run_model = (MessageOnlyEnv(env), MessageOnlyModel(model)) if message_form else (env, model)
    try:
        result = evaluate(
            run_env, run_model, episodes=7, seed=11, progress=False, options=EvaluationOptions(hooks=[log])
        )
    finally:
        gymnasium.vector.VectorEnv.close(env.env)
    if message_form:
        assert run_env.steps == result.timings.vector_steps
        assert run_model.predictions == result.timings.vector_steps
    episodes = [
        (r.lane, r.seed, r.episode_return, r.length, r.terminated, r.truncated, r.success)
        for r in result.episodes
    ]
    return episodes, log.events, result.timings.vector_steps


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("env_id", "policy_factory"),
    [
        ("CartPole-v1", lambda contract: TorchPolicy(_short_policy(), contract)),
        ("CartPole-v1", lambda contract: RandomPolicy(5, contract)),
        ("rlmesh_eval_test/RandomLength-v0", lambda contract: RandomPolicy(5, contract)),
    ],
    ids=["cartpole-torch", "cartpole-random", "infos-random"],
)
def test_array_path_and_message_seams_give_the_same_run(env_id, policy_factory, mode, monkeypatch):
    with monkeypatch.context() as patch:
        # In-process, no protobuf message crosses the seams: the message-form adapters stay unused.
        for owner, method in (
            (MessageFormEnv, "step"),
            (MessageFormEnv, "reset"),
            (MessageFormModel, "predict"),
        ):
            patch.setattr(owner, method, _forbidden)
        array_run = _run(env_id, policy_factory, mode, message_form=False)
    message_run = _run(env_id, policy_factory, mode, message_form=True)
    assert array_run[0] == message_run[0]  # the counted episodes
    assert array_run[2] == message_run[2]  # the vector steps
    assert len(array_run[1]) == len(message_run[1])
    for index, (from_arrays, from_messages) in enumerate(zip(array_run[1], message_run[1], strict=True)):
        assert from_arrays == from_messages, f"event {index} differs"
    kinds = {event[0] for event in array_run[1]}
    assert {"episode_completed", "step_completed", "observation_emitted", "action_received"} <= kinds
    if env_id.startswith("rlmesh_eval_test"):
        assert any(success is not None for *_, success in array_run[0])  # final_info reached the records


@pytest.mark.parametrize("mode", MODES)
def test_mixed_forms_and_transform_hooks_give_the_same_run(mode):
    class Transforms(RuntimeHooks):
        """Rewrites every action and observation (bytes in, bytes out) and records them."""

        async def transform_action(self, event):
            return bytes(len(event.action))  # always action 0

        async def transform_observation(self, event):
            return event.observation[::-1][::-1]  # equal bytes, a new object

    def run(env_form: str, model_form: str):
        env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset=mode)
        model = RandomPolicy(1, env.contract)
        log = EventLog()
        try:
            result = evaluate(
                MessageOnlyEnv(env) if env_form == "message" else env,
                MessageOnlyModel(model) if model_form == "message" else model,
                episodes=4,
                seed=3,
                progress=False,
                options=EvaluationOptions(hooks=[Transforms(), log]),
            )
        finally:
            gymnasium.vector.VectorEnv.close(env.env)
        return [(r.lane, r.seed, r.episode_return, r.length) for r in result.episodes], log.events

    reference = run("array", "array")
    assert len(reference[0]) == 4
    for forms in (("array", "message"), ("message", "array"), ("message", "message")):
        assert run(*forms) == reference, forms


class Keeper(RuntimeHooks):
    """Keeps every step and episode event to read them after the run."""

    def __init__(self) -> None:
        self.steps: list = []
        self.episodes: list = []

    async def step_completed(self, event) -> None:
        self.steps.append(event)

    async def episode_completed(self, event) -> None:
        self.episodes.append(event)


def test_events_read_after_the_run_hold_their_own_step():
    import pickle

    observations = []

    def keep_inputs(batch):
        observations.append(batch)
        return (batch[:, 2] > 0).astype("int64")

    keeper = Keeper()
    evaluate(
        "CartPole-v1",
        keep_inputs,
        episodes=2,
        num_envs=2,
        seed=0,
        progress=False,
        options=EvaluationOptions(hooks=[keeper]),
    )
    # Each predict got its own batch (the vector env reuses one buffer): no two are the same object
    # and consecutive ones differ.
    assert len({id(batch) for batch in observations}) == len(observations)
    assert not any((a == b).all() for a, b in zip(observations, observations[1:], strict=False))
    # A step event's response, first read after the run, is that step's observation.
    for event, taken in zip(keeper.steps, observations[1:], strict=False):
        assert event.response.observation.bytes.data == taken.tobytes()
    # Stored events pickle and copy as the documented classes, fields and all.
    step, episode = keeper.steps[-1], keeper.episodes[-1]
    assert type(pickle.loads(pickle.dumps(step))) is StepCompletedEvent
    assert type(pickle.loads(pickle.dumps(episode))) is EpisodeCompletedEvent
    assert pickle.loads(pickle.dumps(step)).response == step.response
    assert pickle.loads(pickle.dumps(episode)).metadata == episode.metadata


def test_observer_hooks_do_not_change_what_is_sent():
    class Meddler(RuntimeHooks):
        async def action_received(self, event):
            event.action = bytes(len(event.action))  # an observer; the step must not see this

        async def observation_emitted(self, event):
            event.observation = bytes(len(event.observation))

    plain = evaluate("CartPole-v1", "random", episodes=3, num_envs=1, seed=4, progress=False)
    meddled = evaluate(
        "CartPole-v1",
        "random",
        episodes=3,
        num_envs=1,
        seed=4,
        progress=False,
        options=EvaluationOptions(hooks=[Meddler()]),
    )
    assert [r.length for r in meddled.episodes] == [r.length for r in plain.episodes]
