"""The error for something passed as an env that is not one: :func:`not_an_env`."""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium

__all__ = ["not_an_env"]


def not_an_env(value: Any, expected: str) -> TypeError:
    """A ``TypeError`` saying ``expected`` and what ``value`` was; an env class is told to be called.

    >>> class Walk1D(gymnasium.Env):
    ...     pass
    >>> print(not_an_env(Walk1D, "env must be a gymnasium Env"))
    env must be a gymnasium Env; got the class Walk1D itself, not an env: call it: Walk1D()
    >>> print(not_an_env(3, "env must be a gymnasium Env"))
    env must be a gymnasium Env; got builtins.int
    """
    if inspect.isclass(value) and issubclass(value, (gymnasium.Env, gymnasium.vector.VectorEnv)):
        name = value.__qualname__
        return TypeError(f"{expected}; got the class {name} itself, not an env: call it: {name}()")
    return TypeError(f"{expected}; got {type(value).__module__}.{type(value).__qualname__}")
