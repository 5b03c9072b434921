"""Closing a gymnasium ``AsyncVectorEnv`` whose worker processes may be dead or hung.

gymnasium's ``AsyncVectorEnv.close`` stops at the first dead worker's broken pipe, before it
has told the others to close; :func:`close_vector_env` then ends every worker still running, so
no process outlives the env. :func:`release_locals` frees what a failed send left in the frames
of an error (see its docstring).
"""

from __future__ import annotations

import traceback

import gymnasium
from gymnasium.vector import AsyncVectorEnv, VectorEnv

__all__ = ["close_vector_env", "release_locals", "terminate_workers"]


def close_vector_env(env: VectorEnv | gymnasium.Env, timeout: float) -> None:
    """Close ``env``; an ``AsyncVectorEnv`` within ``timeout`` seconds, its workers killed if that fails."""
    if not isinstance(env, AsyncVectorEnv):
        env.close()
        return
    try:
        env.close(timeout=timeout)
    except BaseException as error:
        terminate_workers(env)
        release_locals(error)
        raise


def terminate_workers(env: AsyncVectorEnv, grace: float = 5.0) -> None:
    """Terminate (then kill) every worker process of ``env`` still alive, and reap them all."""
    processes = [process for process in getattr(env, "processes", ()) if process is not None]
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(grace)
        if process.is_alive():
            process.kill()
            process.join(grace)
    for pipe in getattr(env, "parent_pipes", ()):
        if pipe is not None:
            pipe.close()


def release_locals(error: BaseException) -> None:
    """Free the local variables of the frames ``error`` passed through (its traceback stays).

    A send to a dead AsyncVectorEnv worker fails with its pickled message, a memoryview of a
    BytesIO, still in those frames. Kept, they sit in a reference cycle with the error, and
    Python 3.12 can tear that cycle down in the wrong order at exit: "SystemError: deallocated
    BytesIO object has exported buffers", then a crash.
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        traceback.clear_frames(current.__traceback__)
        current = current.__cause__ or current.__context__
