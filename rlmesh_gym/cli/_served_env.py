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
        help="build the env with GymVectorEnv(offload=True), which runs gymnasium's calls on the "
        "adapter's own worker thread (the server already keeps env calls off its event loop; this adds "
        "a thread hop per call)",
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
    """The ``GymVectorEnv`` to serve (:func:`rlmesh_gym.envs.resolve.make_env`, its errors)."""
    from rlmesh_gym.envs.resolve import make_env

    return make_env(
        args.env_id,
        args.num_envs,
        args.autoreset,
        args.vectorization,
        vector=not serves_single_env(args),
        offload=args.offload,
        env_kwargs=env_kwargs,
    )
