"""The forms ``env`` and ``policy`` may take, running under a live event loop, and the error paths."""

from __future__ import annotations

import asyncio
import io
import signal
import sys
import types
import warnings

import gymnasium
import numpy as np
import pytest
import torch
from _eval_envs import ExplodingEnv, FixedLengthEnv, balance_pole, episode_key, register_test_envs

from rlmesh_gym.envs import GymVectorEnv
from rlmesh_gym.evaluation import (
    EvalResult,
    EvaluationError,
    EvaluationOptions,
    PolicyMismatchError,
    evaluate,
    evaluate_async,
)
from rlmesh_gym.policies import CallablePolicy
from rlmesh_gym.policies.pretrained import load_pretrained
from rlmesh_gym.runtime import RuntimeHooks

pytestmark = pytest.mark.torch  # (tests/conftest.py)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    register_test_envs()


def _fast(env_kwargs=None, **kwargs):
    options = {} if env_kwargs is None else {"options": EvaluationOptions(env_kwargs=env_kwargs)}
    return dict(episodes=4, num_envs=2, seed=0, progress=False) | options | kwargs


# -- env forms --------------------------------------------------------------------------------


def test_env_id_builds_and_closes_its_env(monkeypatch):
    made: list[GymVectorEnv] = []
    original = GymVectorEnv.make.__func__

    def spy(cls, *args, **kwargs):
        env = original(cls, *args, **kwargs)
        made.append(env)
        return env

    monkeypatch.setattr(GymVectorEnv, "make", classmethod(spy))
    result = evaluate("CartPole-v1", "random", **_fast())
    assert isinstance(result, EvalResult) and len(result.episodes) == 4
    assert result.env_id == "CartPole-v1" and result.num_envs == 2 and result.vectorization == "sync"
    assert len(made) == 1 and made[0].closed


def test_gymnasium_single_env_is_one_disabled_lane_and_stays_open():
    env = gymnasium.make("CartPole-v1")
    result = evaluate(env, balance_pole, episodes=3, seed=4, progress=False)
    assert result.num_envs == 1 and result.autoreset == "disabled" and result.vectorization is None
    assert len(result.episodes) == 3 and all(r.seed is not None for r in result.episodes)
    env.reset(seed=0)  # not closed: still usable
    env.close()


def test_gymnasium_vector_env_keeps_its_lanes_and_mode():
    env = gymnasium.vector.SyncVectorEnv([lambda: FixedLengthEnv(3)] * 3, autoreset_mode="SameStep")
    try:
        result = evaluate(env, "random", episodes=6, seed=0, progress=False)
        assert (result.num_envs, result.autoreset) == (3, "same_step")
        assert result.returns == [3.0] * 6
        env.reset(seed=0)  # still open
    finally:
        env.close()


def test_gym_vector_env_is_used_as_is_and_not_closed():
    env = GymVectorEnv.make("CartPole-v1", num_envs=2, autoreset="disabled")
    result = evaluate(env, balance_pole, **_fast(num_envs=None))
    assert result.autoreset == "disabled" and not env.closed
    asyncio.run(env.close(5.0))


def test_existing_env_must_match_num_envs_and_autoreset():
    env = GymVectorEnv.make("CartPole-v1", num_envs=2)
    with pytest.raises(ValueError, match="num_envs=3 does not match the env passed in, which has 2 lane"):
        evaluate(env, "random", num_envs=3, progress=False)
    with pytest.raises(
        ValueError, match="autoreset='disabled' does not match the env passed in, which uses 'next_step'"
    ):
        evaluate(env, "random", autoreset="disabled", progress=False)
    with pytest.raises(ValueError, match="vectorization applies only when env is an env id"):
        evaluate(env, "random", progress=False, options=EvaluationOptions(vectorization="async"))
    asyncio.run(env.close(5.0))


def test_env_kwargs_reach_the_env_constructor():
    result = evaluate(
        "rlmesh_eval_test/FixedLength-v0",
        "random",
        **_fast(),
        options=EvaluationOptions(env_kwargs={"length": 4}),
    )
    assert result.returns == [4.0] * 4


# -- policy forms -----------------------------------------------------------------------------


def test_nn_module_and_pretrained_name_give_the_same_episodes():
    module = evaluate("CartPole-v1", load_pretrained("cartpole"), **_fast())
    named = evaluate("CartPole-v1", "pretrained:cartpole", **_fast())
    assert [episode_key(r) for r in module.episodes] == [episode_key(r) for r in named.episodes]
    assert module.mean_return >= 475 and named.policy == "pretrained:cartpole"


def _scripted_cartpole():
    # MLPPolicy's forward (its shape check) is not TorchScript-able; its layer stack is.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script is deprecated in torch 2.13
        return torch.jit.script(load_pretrained("cartpole").net)


def test_torchscript_module():
    scripted = _scripted_cartpole()
    result = evaluate("CartPole-v1", scripted, **_fast())
    assert result.mean_return >= 475


def test_saved_policy_paths(tmp_path):
    scripted = tmp_path / "cartpole.ts"
    torch.jit.save(_scripted_cartpole(), scripted)
    from_path = evaluate("CartPole-v1", scripted, **_fast())
    from_str = evaluate("CartPole-v1", str(scripted), **_fast())
    assert from_path.mean_return >= 475 and from_str.policy == str(scripted)
    assert [episode_key(r) for r in from_path.episodes] == [episode_key(r) for r in from_str.episodes]
    pickled = tmp_path / "cartpole.pt"
    torch.save(load_pretrained("cartpole"), pickled)
    with pytest.raises(ValueError, match="allow_pickle=True"):
        evaluate("CartPole-v1", pickled, **_fast())
    trusted = evaluate("CartPole-v1", pickled, **_fast(), options=EvaluationOptions(allow_pickle=True))
    assert [episode_key(r) for r in trusted.episodes] == [episode_key(r) for r in from_path.episodes]


def test_numpy_callable_gets_numpy_batches():
    seen: list[tuple[type, tuple[int, ...]]] = []

    def act(observation):
        seen.append((type(observation), observation.shape))
        return balance_pole(observation)

    evaluate("CartPole-v1", act, **_fast(episodes=2))
    assert seen[0] == (np.ndarray, (2, 4))


def test_callable_annotated_with_tensor_gets_tensors():
    seen: list[type] = []

    def act(observation: torch.Tensor) -> torch.Tensor:
        seen.append(type(observation))
        return (observation[:, 2] > 0).long()

    evaluate("CartPole-v1", act, **_fast(episodes=2))
    assert seen[0] is torch.Tensor


def test_runtime_model_is_bound_and_used_as_is():
    model = CallablePolicy(balance_pole)
    result = evaluate("CartPole-v1", model, **_fast())
    direct = evaluate("CartPole-v1", balance_pole, **_fast())
    assert [episode_key(r) for r in result.episodes] == [episode_key(r) for r in direct.episodes]


def test_module_attr_reference_loads_instances_and_factories(monkeypatch):
    fake = types.ModuleType("rlmesh_eval_fake_policies")
    fake.net = load_pretrained("cartpole")
    fake.make = lambda: load_pretrained("cartpole")
    fake.act = balance_pole
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    for attr in ("net", "make", "act"):
        result = evaluate("CartPole-v1", f"{fake.__name__}:{attr}", **_fast())
        assert result.mean_return >= 200


# -- running under an event loop ------------------------------------------------------------------


def test_evaluate_inside_a_running_loop_like_jupyter():
    async def notebook_cell():
        asyncio.get_running_loop()  # a loop is running, as in Jupyter
        return evaluate("CartPole-v1", "random", **_fast())

    result = asyncio.run(notebook_cell())
    plain = evaluate("CartPole-v1", "random", **_fast())
    assert [episode_key(r) for r in result.episodes] == [episode_key(r) for r in plain.episodes]


def test_errors_propagate_out_of_the_worker_thread():
    async def notebook_cell():
        return evaluate("rlmesh_eval_test/Exploding-v0", "random", **_fast(episodes=20))

    with pytest.raises(EvaluationError, match="simulated env failure"):
        asyncio.run(notebook_cell())


def test_evaluate_async_runs_on_the_callers_loop():
    result = asyncio.run(evaluate_async("CartPole-v1", "random", **_fast()))
    plain = evaluate("CartPole-v1", "random", **_fast())
    assert [episode_key(r) for r in result.episodes] == [episode_key(r) for r in plain.episodes]


class StopAfter(RuntimeHooks):
    """Cancels the evaluation (as Ctrl+C does) once ``n`` steps have run."""

    def __init__(self, n: int, cancel) -> None:
        self.n, self.steps, self.cancel = n, 0, cancel

    async def step_completed(self, event) -> None:
        self.steps += 1
        if self.steps == self.n:
            self.cancel()


def test_interrupt_in_a_running_loop_cancels_cleanly_and_raises_keyboard_interrupt():
    import _thread

    ExplodingEnv.closes = 0
    hook = StopAfter(3, _thread.interrupt_main)  # KeyboardInterrupt in the waiting (main) thread

    async def notebook_cell():
        # ipykernel runs cells with Python's default SIGINT handler (KeyboardInterrupt in the
        # main thread); asyncio.run replaced it with its own, so put it back as Jupyter has it.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            return evaluate(
                "rlmesh_eval_test/Exploding-v0",
                "random",
                **_fast(episodes=10**6),
                options=EvaluationOptions(hooks=[hook], env_kwargs={"explode_at": 10**9}),
            )
        finally:
            signal.signal(signal.SIGINT, previous)

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(notebook_cell())
    # A million episodes: only the cancellation can have ended the run.
    assert ExplodingEnv.closes == 2  # both lanes' envs closed by the clean shutdown


# -- errors ----------------------------------------------------------------------------------------


def test_unknown_env_id():
    with pytest.raises(ValueError, match="unknown env id 'NoSuchEnv-v9'"):
        evaluate("NoSuchEnv-v9", "random", progress=False)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        # The same words as GymVectorEnv.make's: envs.resolve checks these options for every path.
        (
            dict(autoreset="sometimes"),
            "unknown autoreset mode 'sometimes'; expected 'next_step', 'same_step' or 'disabled'",
        ),
        (
            dict(options=EvaluationOptions(vectorization="gpu")),
            "unknown vectorization 'gpu'; expected 'sync' or 'async'",
        ),
        (dict(episodes=0), "episodes must be an int >= 1, got 0"),
        (dict(num_envs=0), "num_envs must be an int >= 1, got 0"),
        (dict(seed=-1), r"seed must be None or an int in \[0, 2\*\*63\), got -1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        evaluate("CartPole-v1", "random", **(dict(progress=False) | kwargs))


def test_bad_policies():
    with pytest.raises(ValueError, match="is not 'random', 'pretrained:NAME', an existing file"):
        evaluate("CartPole-v1", "no-such-policy.pt", progress=False)
    with pytest.raises(ValueError, match="cannot import module 'no_such_module_xyz'"):
        evaluate("CartPole-v1", "no_such_module_xyz:policy", progress=False)
    with pytest.raises(ValueError, match="unknown pretrained policy 'pong'"):
        evaluate("CartPole-v1", "pretrained:pong", progress=False)
    with pytest.raises(TypeError, match="policy must be an nn.Module"):
        evaluate("CartPole-v1", 42, progress=False)


def test_unreadable_policy_file(tmp_path):
    path = tmp_path / "garbage.pt"
    path.write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="garbage.pt"):
        evaluate("CartPole-v1", path, progress=False)


def test_policy_space_mismatch_is_a_clear_error():
    # The CartPole MLP takes 4 inputs; MountainCar observations have 2.
    with pytest.raises(PolicyMismatchError) as caught:
        evaluate("MountainCar-v0", "pretrained:cartpole", **_fast())
    message = str(caught.value)
    assert message.startswith(
        "policy 'pretrained:cartpole' failed on the first observations of MountainCar-v0"
    )
    assert "(2,), float32)" in message and "Discrete(3)" in message  # the env's spaces
    assert (
        "expected observations with last dimension 4, got shape (2, 2)" in message
    )  # the policy's complaint
    assert isinstance(caught.value, EvaluationError) and caught.value.partial.episodes == ()


def test_a_policy_failing_later_is_not_a_mismatch():
    calls = 0

    def flaky(observation):
        nonlocal calls
        calls += 1
        if calls == 5:
            raise ArithmeticError("policy broke on call 5")
        return balance_pole(observation)

    with pytest.raises(
        EvaluationError, match="failed after 0 of 4 episodes.*policy broke on call 5"
    ) as caught:
        evaluate("CartPole-v1", flaky, **_fast())
    assert not isinstance(caught.value, PolicyMismatchError)
    assert caught.value.partial.timings.vector_steps == 4


def test_env_failure_mid_run_raises_closes_the_env_and_keeps_the_partial_result():
    ExplodingEnv.closes = 0
    # Episodes last 3 steps; the 8th step call of lane 0 raises, after two episodes per lane.
    with pytest.raises(EvaluationError) as caught:
        evaluate(
            "rlmesh_eval_test/Exploding-v0", "random", **_fast(episodes=20, env_kwargs={"explode_at": 8})
        )
    error = caught.value
    assert "failed after 4 of 20 episodes" in str(error) and "simulated env failure" in str(error)
    assert error.__cause__ is not None
    partial = error.partial
    assert partial.complete is False and len(partial.episodes) == 4
    assert partial.episodes_per_lane == (2, 2) and partial.returns == [3.0] * 4
    # SAME_STEP (the default for an env id): each lane's step calls are its vector steps.
    assert partial.timings.vector_steps == 7  # the 8th step failed
    assert ExplodingEnv.closes == 2  # the env evaluate() built was closed (both lanes)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_counts_episodes_on_a_terminal(monkeypatch):
    terminal = _Tty()
    monkeypatch.setattr(sys, "stderr", terminal)
    evaluate("CartPole-v1", "random", **_fast(progress=True))
    text = terminal.getvalue()
    assert "CartPole-v1 x2" in text and "4/4" in text and "mean return" in text


def test_no_progress_bar_when_disabled_or_not_interactive(monkeypatch):
    for stream, progress in ((_Tty(), False), (io.StringIO(), True)):
        monkeypatch.setattr(sys, "stderr", stream)
        evaluate("CartPole-v1", "random", **_fast(progress=progress))
        assert stream.getvalue() == ""


def test_ctrl_c_in_a_plain_script_cancels_cleanly_and_raises_keyboard_interrupt():
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("needs Python's default SIGINT handler")
    ExplodingEnv.closes = 0
    hook = StopAfter(3, lambda: signal.raise_signal(signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            "rlmesh_eval_test/Exploding-v0",
            "random",
            **_fast(episodes=10**6),
            options=EvaluationOptions(hooks=[hook], env_kwargs={"explode_at": 10**9}),
        )
    # A million episodes: only the cancellation can have ended the run.
    assert ExplodingEnv.closes == 2  # both lanes' envs closed by the driver's shutdown
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored


def test_evaluate_async_lets_other_tasks_run_and_can_be_cancelled():
    ExplodingEnv.closes = 0

    async def main():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticking = asyncio.create_task(ticker())
        run = asyncio.create_task(
            evaluate_async(
                "rlmesh_eval_test/Exploding-v0",
                "random",
                **_fast(episodes=10**6, env_kwargs={"explode_at": 10**9}),
            )
        )
        while ticks < 50:  # the ticker runs while the evaluation is in progress
            await asyncio.sleep(0)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        ticking.cancel()
        return ticks

    assert asyncio.run(main()) >= 50
    assert ExplodingEnv.closes == 2  # the env evaluate_async() built was closed
