"""Signatures written once: a coroutine twin of a blocking function, and clear errors for
keyword arguments that moved elsewhere."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ParamSpec, TypeVar

__all__ = ["coroutine_twin", "moved_arguments"]

P = ParamSpec("P")
R = TypeVar("R")


def coroutine_twin(
    blocking: Callable[P, Any],
) -> Callable[[Callable[..., Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """Give the decorated coroutine function ``blocking``'s signature (written once, on ``blocking``).

    The coroutine function is called with the arguments bound to that signature, defaults
    applied, as keyword arguments: a wrong argument gets Python's own ``TypeError``.
    """
    signature = inspect.signature(blocking)

    def decorate(coroutine: Callable[..., Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        async def twin(*args: P.args, **kwargs: P.kwargs) -> R:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return await coroutine(**bound.arguments)

        twin.__name__ = coroutine.__name__
        twin.__qualname__ = coroutine.__qualname__
        twin.__module__ = coroutine.__module__
        twin.__doc__ = coroutine.__doc__
        returns = inspect.signature(coroutine).return_annotation
        twin.__signature__ = signature.replace(return_annotation=returns)  # type: ignore[attr-defined]
        return twin

    return decorate


def _refuse_moved(name: str, moved: Mapping[str, str], kwargs: Mapping[str, Any]) -> None:
    found = [argument for argument in kwargs if argument in moved]
    if found:
        where = "; ".join(f"{name}() no longer takes {argument}=: {moved[argument]}" for argument in found)
        raise TypeError(f"{where} (docs/evaluation.md, Changelog)")


def moved_arguments(moved: Mapping[str, str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A call that passes a keyword argument of ``moved`` (old name -> what to do instead) raises a
    ``TypeError`` saying where it went, instead of Python's bare "unexpected keyword argument".

    The decorated function keeps its signature (``inspect.signature`` follows ``__wrapped__``);
    a coroutine function stays one.
    """

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        name = function.__name__
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def refusing_async(*args: Any, **kwargs: Any) -> Any:
                _refuse_moved(name, moved, kwargs)
                return await function(*args, **kwargs)

            return refusing_async  # type: ignore[return-value]

        @functools.wraps(function)
        def refusing(*args: P.args, **kwargs: P.kwargs) -> R:
            _refuse_moved(name, moved, kwargs)
            return function(*args, **kwargs)

        return refusing

    return decorate
