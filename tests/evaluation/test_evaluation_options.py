"""``evaluate``'s options are written once: its signature, mirrored by ``EvaluationOptions`` and
given to ``evaluate_async``."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

from rlmesh_gym.evaluation import evaluate, evaluate_async
from rlmesh_gym.evaluation._options import EvaluationOptions


def test_the_options_dataclass_mirrors_evaluates_signature():
    parameters = list(inspect.signature(evaluate).parameters.values())[2:]  # after env, policy
    fields = dataclasses.fields(EvaluationOptions)
    assert [p.name for p in parameters] == [f.name for f in fields]
    assert [p.default for p in parameters] == [f.default for f in fields]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)


def test_evaluate_async_has_evaluates_signature():
    blocking, coroutine = inspect.signature(evaluate), inspect.signature(evaluate_async)
    assert list(coroutine.parameters.values()) == list(blocking.parameters.values())
    assert inspect.iscoroutinefunction(evaluate_async)
    assert evaluate_async.__name__ == "evaluate_async" and "coroutine" in evaluate_async.__doc__


@pytest.mark.parametrize("call", ["evaluate", "evaluate_async"])
def test_a_wrong_argument_is_pythons_own_type_error(call):
    def function(*args, **kwargs):
        if call == "evaluate":
            return evaluate(*args, **kwargs)
        return asyncio.run(evaluate_async(*args, **kwargs))  # raised when awaited, before any work

    with pytest.raises(TypeError, match="unexpected keyword argument 'episode'"):
        function("CartPole-v1", "random", episode=3)
    with pytest.raises(TypeError, match="positional argument"):
        function("CartPole-v1", "random", 3)


def test_options_are_checked_once_on_construction():
    with pytest.raises(ValueError, match="episodes must be an int >= 1"):
        EvaluationOptions(episodes=0)
    with pytest.raises(ValueError, match="on_server_failure must be one of 'raise', 'reassign'"):
        EvaluationOptions(on_server_failure="retry")
    options = EvaluationOptions(episodes=4, target_ci=1.0)
    assert options.max_episodes == 400 and options.hooks == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.episodes = 5  # type: ignore[misc]
