"""Where an env's exception was raised, for failure messages: :func:`raise_site`."""

from __future__ import annotations

import os
import traceback

__all__ = ["raise_site"]


def raise_site(error: BaseException) -> str:
    """`` (raised in FILE line N, in FUNCTION)`` for the innermost frame of ``error``'s traceback, or ``""``.

    >>> try:
    ...     {}["lane"]
    ... except KeyError as error:
    ...     print(raise_site(error))
     (raised in <doctest rlmesh_gym.envs._raise_site.raise_site[0]> line 2, in <module>)
    """
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    return f" (raised in {os.path.basename(frame.filename)} line {frame.lineno}, in {frame.name})"
