"""``evaluate``'s signature: at most 12 parameters, the rest in ``EvaluationOptions``; the settings
the session code reads mirror both; ``evaluate_async`` has the same signature; arguments that
moved say where they went."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import pytest

from rlmesh_gym import EvaluationOptions as TopLevelOptions
from rlmesh_gym.evaluation import (
    EvaluationOptions,
    compare,
    evaluate,
    evaluate_async,
    evaluate_fleet,
    evaluate_fleet_async,
)
from rlmesh_gym.evaluation._settings import EvaluationSettings
from rlmesh_gym.runtime import RuntimeHooks, RuntimeLimits


def test_evaluate_has_at_most_12_parameters_and_the_options_the_rest():
    parameters = inspect.signature(evaluate).parameters
    assert len(parameters) <= 12
    assert list(parameters)[:2] == ["env", "policy"] and list(parameters)[-1] == "options"
    assert TopLevelOptions is EvaluationOptions


def test_the_settings_are_evaluates_arguments_and_the_options_fields():
    parameters = list(inspect.signature(evaluate).parameters.values())[2:-1]  # env, policy; options
    options = dataclasses.fields(EvaluationOptions)
    settings = dataclasses.fields(EvaluationSettings)
    assert [f.name for f in settings] == [p.name for p in parameters] + [f.name for f in options]
    defaults = [p.default for p in parameters] + [f.default for f in options]
    assert [f.default for f in settings] == defaults
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters)


def test_evaluate_async_has_evaluates_signature():
    blocking, coroutine = inspect.signature(evaluate), inspect.signature(evaluate_async)
    assert list(coroutine.parameters.values()) == list(blocking.parameters.values())
    assert inspect.iscoroutinefunction(evaluate_async)
    assert evaluate_async.__name__ == "evaluate_async" and "coroutine" in evaluate_async.__doc__
    fleet, fleet_async = inspect.signature(evaluate_fleet), inspect.signature(evaluate_fleet_async)
    assert list(fleet_async.parameters.values()) == list(fleet.parameters.values())


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


@pytest.mark.parametrize("call", ["evaluate", "evaluate_async"])
@pytest.mark.parametrize(
    "name",
    [
        "hooks",
        "max_steps",
        "max_episodes",
        "limits",
        "vectorization",
        "env_kwargs",
        "allow_pickle",
        "session_id",
        "route_id",
    ],
)
def test_an_argument_that_moved_to_the_options_says_so(call, name):
    def function(**kwargs):
        if call == "evaluate":
            return evaluate("CartPole-v1", "random", **kwargs)
        return asyncio.run(evaluate_async("CartPole-v1", "random", **kwargs))

    message = (
        rf"^{call}\(\) no longer takes {name}=: pass options=EvaluationOptions\({name}=\.\.\.\) "
        r"\(docs/evaluation.md, Changelog\)$"
    )
    with pytest.raises(TypeError, match=message):
        function(**{name: None})


def test_a_fleet_goes_through_evaluate_fleet():
    with pytest.raises(
        TypeError,
        match=r"no longer takes on_server_failure=: a fleet of env servers is evaluated by evaluate_fleet",
    ):
        evaluate("CartPole-v1", "random", on_server_failure="reassign")
    with pytest.raises(TypeError, match=r"evaluate\(\) takes one env; .*evaluate_fleet\(addresses, policy"):
        evaluate(["127.0.0.1:1", "127.0.0.1:2"], "random")


@pytest.mark.parametrize(
    ("function", "name"),
    [
        (compare, "max_steps"),
        (compare, "env_kwargs"),
        (evaluate_fleet, "hooks"),
        (evaluate_fleet, "session_id"),
    ],
)
def test_compare_and_the_fleet_say_where_their_arguments_went(function, name):
    first = ["127.0.0.1:1"] if function is evaluate_fleet else "CartPole-v1"
    second = "random" if function is evaluate_fleet else {"a": "random", "b": "random"}
    with pytest.raises(
        TypeError, match=rf"no longer takes {name}=: pass options=EvaluationOptions\({name}=\.\.\.\)"
    ):
        function(first, second, **{name: None})


def test_options_are_checked_on_construction():
    with pytest.raises(ValueError, match="max_steps must be None or an int >= 1"):
        EvaluationOptions(max_steps=0)
    with pytest.raises(ValueError, match="max_episodes must be None or an int >= 1"):
        EvaluationOptions(max_episodes=-3)
    with pytest.raises(TypeError, match="hooks must be RuntimeHooks instances, got object"):
        EvaluationOptions(hooks=[object()])
    with pytest.raises(TypeError, match="limits must be a RuntimeLimits, got dict"):
        EvaluationOptions(limits={})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="env_kwargs must be a mapping of str keyword names"):
        EvaluationOptions(env_kwargs=[("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="allow_pickle must be a bool"):
        EvaluationOptions(allow_pickle="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id must be None or a non-empty str"):
        EvaluationOptions(session_id=" ")
    with pytest.raises(TypeError, match="options must be an rlmesh_gym.EvaluationOptions"):
        evaluate("CartPole-v1", "random", options={"max_steps": 3})  # type: ignore[arg-type]
    hook = RuntimeHooks()
    options = EvaluationOptions(hooks=hook, env_kwargs={"max_episode_steps": 9}, limits=RuntimeLimits())
    assert options.hooks == (hook,) and options.env_kwargs == {"max_episode_steps": 9}
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_steps = 5  # type: ignore[misc]


def test_settings_check_what_needs_both_the_arguments_and_the_options():
    with pytest.raises(ValueError, match="episodes must be an int >= 1"):
        EvaluationSettings.of(None, episodes=0)
    with pytest.raises(ValueError, match="max_episodes applies only with target_ci"):
        evaluate("CartPole-v1", "random", options=EvaluationOptions(max_episodes=40))
    settings = EvaluationSettings.of(EvaluationOptions(max_steps=7), episodes=4, target_ci=1.0)
    assert settings.max_episodes == 400 and settings.max_steps == 7 and settings.hooks == ()


@pytest.mark.parametrize(
    "options", [EvaluationOptions(session_id="mine"), EvaluationOptions(hooks=RuntimeHooks())]
)
def test_compare_refuses_the_options_it_sets_itself(options):
    with pytest.raises(
        ValueError, match=r"EvaluationOptions (session_id|hooks) cannot be given to compare\(\)"
    ):
        compare("CartPole-v1", {"a": "random", "b": "random"}, options=options)
