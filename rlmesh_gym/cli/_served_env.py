"""How ``rlmesh-gym serve-env`` builds the env it serves: one env, or a vector env of N lanes.

With one lane (``--num-envs 1``, the default) it serves the env itself, as upstream rlmesh's
own ``EnvServer`` serves a ``gymnasium.Env``: DISABLED autoreset, and each reply's info is the
env's own dict (``reset(seed=123)`` gives ``info["seed"] == 123`` where the env puts it there),
which is what upstream's single-env clients (``rlmesh.RemoteEnv``) expect. ``--vector`` (or an
``--autoreset`` mode only a vector env has, or ``--vectorization async``) serves a one-lane
vector env instead, with gymnasium's vectorised info layout.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_served_env_arguments", "build_served_env", "serves_single_env"]


def add_served_env_arguments(parser: argparse.ArgumentParser) -> None:
    """``--vector`` and ``--offload``; ``--autoreset`` defaults to the form's own mode."""
    parser.add_argument(
        "--vector",
        action="store_true",
        help="serve a vector env even for one lane (gymnasium's vectorised infos; needed for "
        "--autoreset next_step/same_step on one lane, which it then implies)",
    )
    parser.add_argument(
        "--offload",
        action="store_true",
        help="run the env's calls on a worker thread, so request timeouts, Ctrl+C and SIGTERM take "
        "effect while a slow env call runs (costs a thread hop per call)",
    )
    # None: DISABLED for one env, next_step for a vector env.
    parser.set_defaults(autoreset=None)


def serves_single_env(args: argparse.Namespace) -> bool:
    """Whether the command line asks for one env rather than a vector env."""
    return (
        args.num_envs == 1
        and not args.vector
        and args.autoreset in (None, "disabled")
        and args.vectorization == "sync"
    )


def build_served_env(args: argparse.Namespace, **env_kwargs: Any) -> Any:
    """The ``GymVectorEnv`` to serve; ``ValueError`` names the env id and what went wrong."""
    import gymnasium

    from rlmesh_gym.envs import GymVectorEnv

    try:
        if serves_single_env(args):
            env = gymnasium.make(args.env_id, **env_kwargs)
            try:
                return GymVectorEnv(env, offload=args.offload)
            except BaseException:
                env.close()
                raise
        return GymVectorEnv.make(
            args.env_id,
            num_envs=args.num_envs,
            autoreset=args.autoreset or "next_step",
            vectorization=args.vectorization,
            offload=args.offload,
            **env_kwargs,
        )
    except Exception as error:  # gymnasium raises many types for unknown ids and bad kwargs
        raise ValueError(f"cannot build env {args.env_id!r}: {type(error).__name__}: {error}") from error
