"""``rlmesh-gym serve-env``: serve a Gymnasium env on rlmesh's gRPC EnvService from the shell.

``serve-env ENV_ID`` serves the env (as a ``GymVectorEnv``) until Ctrl+C or SIGTERM (or an
allowed remote Shutdown), then stops cleanly: the open session is told the server is going
away, the port is released and the env is closed. An env that hangs inside a call does not
stop the server from answering or stopping (docs/serving.md).
"""

from __future__ import annotations

import argparse
from typing import Any

from rlmesh_gym.cli._env_arguments import (
    add_autoreset_argument,
    add_env_package_arguments,
    add_vectorization_argument,
    env_kwargs_of,
)
from rlmesh_gym.cli._report import report_error, report_warning
from rlmesh_gym.cli._served_env import add_served_env_arguments, build_served_env
from rlmesh_gym.cli._serving import add_endpoint_arguments, endpoint_options, run_server, serve_until_stopped

__all__ = ["DEFAULT_ADDRESS", "register", "run"]

DEFAULT_ADDRESS = "127.0.0.1:50051"


def register(subparsers: Any) -> None:
    """Add the ``serve-env`` subcommand."""
    env = subparsers.add_parser(
        "serve-env",
        help="serve a Gymnasium env over rlmesh's gRPC EnvService",
        description=(
            "Serve ENV_ID as an rlmesh env endpoint (one client session at a time) until Ctrl+C or "
            "SIGTERM. rlmesh's runtime and clients, and 'rlmesh-gym eval --env-address', can drive it."
        ),
    )
    env.add_argument("env_id", metavar="ENV_ID", help="a registered Gymnasium env id, or MODULE:ENV_ID")
    env.add_argument(
        "--num-envs", type=int, default=1, metavar="N", help="lanes stepped together (default: 1)"
    )
    add_autoreset_argument(env)
    add_vectorization_argument(env)
    add_env_package_arguments(env)
    env.add_argument(
        "--render",
        action="store_true",
        help="build the env with render_mode='rgb_array' so Render returns PNGs",
    )
    add_served_env_arguments(env)
    env.add_argument(
        "--strict-autoreset-reward",
        action="store_true",
        help="under NEXT_STEP, refuse a non-zero reward on a lane's autoreset step with an INTERNAL error, "
        "as rlmesh's env server does (default: accept it; it is not counted)",
    )
    add_endpoint_arguments(env, DEFAULT_ADDRESS)
    env.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out ``rlmesh-gym serve-env``; return the exit code."""
    if args.num_envs < 1:
        return report_error(f"--num-envs must be at least 1, got {args.num_envs}", 2)
    try:
        options = endpoint_options(args)
        from rlmesh_gym.serve import EnvServer
    except (ValueError, ImportError) as error:
        return report_error(str(error), 2)
    from rlmesh_gym.runtime import AutoresetMode

    try:
        extra = {**env_kwargs_of(args), **({"render_mode": "rgb_array"} if args.render else {})}
        env = build_served_env(args, **extra)
    except ValueError as error:
        return report_error(str(error), 2)
    contract = env.contract
    mode = AutoresetMode.from_wire(contract.autoreset_mode).name
    banner = (
        f"serving {contract.id} ({env.num_envs} lane(s), autoreset {mode}, edition pin {args.edition_pin}, "
        f"token {'on' if options['token'] else 'off'})"
    )

    async def serve() -> None:
        server = EnvServer(env, strict_autoreset_reward=args.strict_autoreset_reward, **options)
        try:
            await serve_until_stopped(server, banner)
        finally:
            if server.call_in_progress:
                # Closing an env that is inside a call could block or crash; the process exits anyway.
                report_warning(
                    "the env is still inside a call that never returned (a hung step?); not closing it"
                )
            else:
                await env.close(5.0)

    return run_server(serve)
